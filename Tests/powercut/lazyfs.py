"""A file system that loses, at a power cut, everything not yet synced.

In the manner of Jepsen's LazyFS: a FUSE layer (libfuse 3 through mfusepy)
whose files and names live in its own cache. A file's data becomes durable
when the file is fsynced (fsync or fdatasync); names (create, mkdir, link,
rename, unlink, rmdir) become durable when their directory is fsynced. The
metadata operations are kept as one ordered journal, as ext4's is: a
directory's fsync makes durable every operation up to the last one that
touched that directory, so a rename is never half there (a name in two
folders) and an operation never outlives one before it.

    python3 lazyfs.py DISK MOUNT

mounts MOUNT with DISK's contents as its durable state. Looking up the name
`.powercut` in MOUNT's root is the power cut: from that moment every
operation fails with EIO. Unmounting (`fusermount3 -u MOUNT`) then writes
what was durable at the cut into DISK, in place of what was there, and
exits. Unmounted without a cut, it writes everything (a clean shutdown
syncs). Single-threaded: every operation is serialised with the cut.
"""
import errno
import os
import shutil
import stat
import sys
import time

import mfusepy as fuse

CUT = "/.powercut"


class Node:
    __slots__ = ("ino", "is_dir", "mode", "data", "durable", "dirty", "mtime", "nlink")

    def __init__(self, ino, is_dir, mode, data=b""):
        self.ino = ino
        self.is_dir = is_dir
        self.mode = mode
        self.data = bytearray(data)  # what is read now
        self.durable = bytearray(data)  # what a power cut leaves
        self.dirty = []  # (start, end) written since the last fsync
        self.mtime = time.time_ns()
        self.nlink = 1

    def sync(self):
        d, data = self.durable, self.data
        if len(d) > len(data):
            del d[len(data):]
        for start, end in self.dirty:
            end = min(end, len(data))
            if start < end:
                if len(d) < end:
                    d.extend(bytes(end - len(d)))
                d[start:end] = data[start:end]
        if len(d) < len(data):
            d.extend(data[len(d):])
        self.dirty.clear()


class LazyFS(fuse.Operations):
    use_ns = True

    def __init__(self, disk):
        self.disk = disk
        self.next_ino = 1000
        self.nodes = {}
        self.root = self.new_node(True, 0o755)
        # Directory entries now, and as a power cut would leave them: ino -> {name: ino}.
        self.names = {self.root.ino: {}}
        self.durable_names = {self.root.ino: {}}
        self.journal = []  # metadata operations not yet durable, in order
        self.cut = False
        self.load(disk, self.root)
        self.durable_names = {ino: dict(entries) for ino, entries in self.names.items()}

    # -- the cache -----------------------------------------------------------

    def new_node(self, is_dir, mode, data=b""):
        self.next_ino += 1
        node = Node(self.next_ino, is_dir, mode, data)
        self.nodes[node.ino] = node
        return node

    def load(self, path, directory):
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                node = self.new_node(True, stat.S_IMODE(st.st_mode))
                self.names[node.ino] = {}
                self.names[directory.ino][name] = node.ino
                self.load(full, node)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    node = self.new_node(False, stat.S_IMODE(st.st_mode), f.read())
                self.names[directory.ino][name] = node.ino

    def write_durable(self):
        """What a power cut leaves, written into DISK in place of what was there."""
        staging = self.disk.rstrip("/") + ".writing"
        shutil.rmtree(staging, ignore_errors=True)
        os.mkdir(staging)
        written = {}

        def out(dir_ino, path):
            for name, ino in self.durable_names.get(dir_ino, {}).items():
                node, full = self.nodes[ino], os.path.join(path, name)
                if node.is_dir:
                    os.mkdir(full)
                    out(ino, full)
                elif ino in written:
                    os.link(written[ino], full)
                else:
                    with open(full, "wb") as f:
                        f.write(node.durable)
                    os.chmod(full, node.mode)
                    written[ino] = full

        out(self.root.ino, staging)
        shutil.rmtree(self.disk, ignore_errors=True)
        os.rename(staging, self.disk)

    def commit_journal(self, through):
        """Makes the journal durable up to and including operation `through`."""
        for op in self.journal[:through + 1]:
            kind = op[0]
            if kind in ("create", "link", "mkdir"):
                _, parent, name, ino = op
                self.durable_names.setdefault(parent, {})[name] = ino
                if kind == "mkdir":
                    self.durable_names.setdefault(ino, {})
            elif kind in ("unlink", "rmdir"):
                _, parent, name = op
                self.durable_names.get(parent, {}).pop(name, None)
            elif kind == "rename":
                _, old_parent, old_name, new_parent, new_name = op
                ino = self.durable_names.get(old_parent, {}).pop(old_name, None)
                if ino is not None:
                    self.durable_names.setdefault(new_parent, {})[new_name] = ino
        del self.journal[:through + 1]

    def lookup(self, path):
        if self.cut:
            raise fuse.FuseOSError(errno.EIO)
        node = self.root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir or part not in self.names[node.ino]:
                raise fuse.FuseOSError(errno.ENOENT)
            node = self.nodes[self.names[node.ino][part]]
        return node

    def parent(self, path):
        head, name = os.path.split(path.rstrip("/"))
        directory = self.lookup(head or "/")
        if not directory.is_dir:
            raise fuse.FuseOSError(errno.ENOTDIR)
        return directory, name

    # -- FUSE operations -----------------------------------------------------

    def getattr(self, path, fh=None):
        if path == CUT and not self.cut:
            self.cut = True
            sys.stderr.write("lazyfs: power cut\n")
            raise fuse.FuseOSError(errno.ENOENT)
        node = self.lookup(path)
        kind = stat.S_IFDIR if node.is_dir else stat.S_IFREG
        size = 4096 if node.is_dir else len(node.data)
        return {"st_mode": kind | node.mode, "st_ino": node.ino, "st_nlink": node.nlink + (1 if node.is_dir else 0),
                "st_size": size, "st_blocks": (size + 511) // 512, "st_uid": 0, "st_gid": 0,
                "st_atime": node.mtime, "st_mtime": node.mtime, "st_ctime": node.mtime}

    def readdir(self, path, fh):
        node = self.lookup(path)
        # With use_ino, an entry's inode number must be given: one of 0 is skipped as deleted.
        entries = [(".", node), ("..", node)] + [(name, self.nodes[ino]) for name, ino in self.names[node.ino].items()]
        return [(name, {"st_ino": n.ino, "st_mode": stat.S_IFDIR if n.is_dir else stat.S_IFREG}, 0) for name, n in entries]

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 24, "f_bfree": 1 << 23, "f_bavail": 1 << 23,
                "f_files": 1 << 20, "f_ffree": 1 << 19, "f_favail": 1 << 19, "f_namemax": 255}

    def create(self, path, mode, fi=None):
        directory, name = self.parent(path)
        if name in self.names[directory.ino]:
            node = self.nodes[self.names[directory.ino][name]]
            return node.ino
        node = self.new_node(False, stat.S_IMODE(mode))
        self.names[directory.ino][name] = node.ino
        self.journal.append(("create", directory.ino, name, node.ino))
        return node.ino

    def open(self, path, flags):
        node = self.lookup(path)
        if flags & os.O_TRUNC:
            self.truncate(path, 0)
        return node.ino

    def opendir(self, path):
        return self.lookup(path).ino

    def read(self, path, size, offset, fh):
        node = self.by_handle(fh)
        return bytes(node.data[offset:offset + size])

    def write(self, path, data, offset, fh):
        node = self.by_handle(fh)
        if len(node.data) < offset:
            node.data.extend(bytes(offset - len(node.data)))
        node.data[offset:offset + len(data)] = data
        node.dirty.append((offset, offset + len(data)))
        node.mtime = time.time_ns()
        return len(data)

    def truncate(self, path, length, fh=None):
        node = self.by_handle(fh) if fh else self.lookup(path)
        old = len(node.data)
        if length < old:
            del node.data[length:]
        else:
            node.data.extend(bytes(length - old))
            node.dirty.append((old, length))
        node.mtime = time.time_ns()
        return 0

    def fsync(self, path, datasync, fh):
        node = self.by_handle(fh)
        node.sync()
        return 0

    def fsyncdir(self, path, datasync, fh):
        node = self.by_handle(fh)
        touching = [i for i, op in enumerate(self.journal)
                    if op[1] == node.ino or (op[0] == "rename" and op[3] == node.ino)]
        if touching:
            self.commit_journal(touching[-1])
        return 0

    def flush(self, path, fh):
        self.by_handle(fh)
        return 0

    def release(self, path, fh):
        return 0

    def releasedir(self, path, fh):
        return 0

    def mkdir(self, path, mode):
        directory, name = self.parent(path)
        if name in self.names[directory.ino]:
            raise fuse.FuseOSError(errno.EEXIST)
        node = self.new_node(True, stat.S_IMODE(mode))
        self.names[node.ino] = {}
        self.names[directory.ino][name] = node.ino
        self.journal.append(("mkdir", directory.ino, name, node.ino))
        return 0

    def unlink(self, path):
        directory, name = self.parent(path)
        if name not in self.names[directory.ino]:
            raise fuse.FuseOSError(errno.ENOENT)
        node = self.nodes[self.names[directory.ino].pop(name)]
        node.nlink -= 1
        self.journal.append(("unlink", directory.ino, name))
        return 0

    def rmdir(self, path):
        directory, name = self.parent(path)
        node = self.lookup(path)
        if self.names[node.ino]:
            raise fuse.FuseOSError(errno.ENOTEMPTY)
        del self.names[directory.ino][name]
        self.journal.append(("rmdir", directory.ino, name))
        return 0

    def rename(self, old, new):
        old_dir, old_name = self.parent(old)
        new_dir, new_name = self.parent(new)
        if old_name not in self.names[old_dir.ino]:
            raise fuse.FuseOSError(errno.ENOENT)
        ino = self.names[old_dir.ino].pop(old_name)
        replaced = self.names[new_dir.ino].get(new_name)
        if replaced is not None and replaced != ino:
            self.nodes[replaced].nlink -= 1
        self.names[new_dir.ino][new_name] = ino
        self.journal.append(("rename", old_dir.ino, old_name, new_dir.ino, new_name))
        return 0

    def link(self, target, source):
        node = self.lookup(source)
        directory, name = self.parent(target)
        if name in self.names[directory.ino]:
            raise fuse.FuseOSError(errno.EEXIST)
        self.names[directory.ino][name] = node.ino
        node.nlink += 1
        self.journal.append(("link", directory.ino, name, node.ino))
        return 0

    def chmod(self, path, mode):
        self.lookup(path).mode = stat.S_IMODE(mode)
        return 0

    def chown(self, path, uid, gid):
        self.lookup(path)
        return 0

    def utimens(self, path, times=None):
        self.lookup(path).mtime = times[1] if times else time.time_ns()
        return 0

    def access(self, path, amode):
        self.lookup(path)
        return 0

    def by_handle(self, fh):
        if self.cut:
            raise fuse.FuseOSError(errno.EIO)
        return self.nodes[fh]


def main():
    disk, mount = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(disk, exist_ok=True)
    fs = LazyFS(disk)
    fuse.FUSE(fs, mount, foreground=True, nothreads=True, use_ino=True, attr_timeout=0, entry_timeout=0,
              negative_timeout=0, fsname="lazyfs")
    if not fs.cut:  # unmounted cleanly: everything counts as synced
        for node in fs.nodes.values():
            if not node.is_dir:
                node.sync()
        fs.commit_journal(len(fs.journal) - 1)
    fs.write_durable()


if __name__ == "__main__":
    main()
