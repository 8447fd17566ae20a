"""The Debian package (docs/protocol.md §14): built by `make deb`, installed
with `apt-get install ./…deb` in a fresh Debian 12 root made by mmdebstrap
from Debian's own packages (no Swift in it), over the previous commit's
package; there `coffee-tracker --version`, `check` on the packaged
configuration, `serve` answering `ping`, every library resolved by `ldd`,
drinks kept through the upgrade, the operator's configuration kept, and
`/var/lib/coffee-tracker` removed by a purge only.

It needs root (chroot, mounts) and Debian's package servers; without
either it is skipped, and says why."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()


def why_not():
    if os.geteuid() != 0:
        return "the package test needs root (mmdebstrap's root, chroot, mounts)"
    for tool in ("mmdebstrap", "dpkg-deb", "lintian", "git"):
        if shutil.which(tool) is None:
            return f"the package test needs {tool} (make deps installs it)"
    if subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD~1"], cwd=ROOT, capture_output=True).returncode != 0:
        return "the package test upgrades from the previous commit's package, and this clone has no previous commit"
    try:
        urllib.request.urlopen("http://deb.debian.org/debian/dists/bookworm/Release", timeout=10).close()
    except OSError as error:
        return f"the package test needs Debian's package servers, and deb.debian.org did not answer: {error}"
    return None


REASON = why_not()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def make(target):
    done = subprocess.run(["make", "-s", target], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [Path(ROOT, line.strip()) for line in done.stdout.splitlines() if line.strip().endswith(".deb")][-1]


class Root:
    """A fresh Debian 12 root with `deb` installed by apt, /proc and /dev mounted while it is used."""

    def __init__(self, folder, deb):
        self.path = Path(folder) / "root"
        done = subprocess.run(
            # The package lists are kept: an upgrade may depend on a library the previous package did not.
            ["mmdebstrap", "--variant=apt", "--include=systemd", "--skip=cleanup/apt/lists",
             f"--customize-hook=copy-in {deb} /tmp",
             f'--customize-hook=chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y /tmp/{deb.name}',
             "bookworm", str(self.path)],
            capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-4000:]
        subprocess.run(["mount", "-t", "proc", "proc", str(self.path / "proc")], check=True)
        subprocess.run(["mount", "--bind", "/dev", str(self.path / "dev")], check=True)
        self.service = None

    def run(self, *argv, user=None, check=True, timeout=120):
        prefix = ["chroot"] + ([f"--userspec={user}:{user}"] if user else []) + [str(self.path)]
        done = subprocess.run(prefix + list(argv), capture_output=True, text=True, timeout=timeout,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
                                   "HOME": "/root"})
        if check:
            assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done

    def serve(self):
        """The packaged service as its user, on a test configuration of its own endpoints (ipc paths in /run)."""
        config = json.loads((self.path / "etc/coffee-tracker/coffee-tracker.json").read_text())
        config.update({"ingest": {"bind": ["ipc:///run/ct-test/ingest.sock"]},
                       "updates": {"bind": ["ipc:///run/ct-test/updates.sock"]},
                       "query": {"bind": ["ipc:///run/ct-test/query.sock"]}, "http": {"bind": None}})
        (self.path / "run/ct-test").mkdir(parents=True, exist_ok=True)
        self.run("chown", "coffee-tracker:coffee-tracker", "/run/ct-test")
        (self.path / "run/ct-test/test.json").write_text(json.dumps(config))
        endpoints = self.path / "var/lib/coffee-tracker/data/endpoints.json"
        if endpoints.exists():
            endpoints.unlink()
        self.service = subprocess.Popen(
            ["chroot", "--userspec=coffee-tracker:coffee-tracker", str(self.path), "coffee-tracker", "serve",
             "--config", "/run/ct-test/test.json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        while not endpoints.exists():
            assert self.service.poll() is None, self.service.stdout.read()
            assert time.time() < deadline, "the packaged service did not start"
            time.sleep(0.1)
        return "/run/ct-test/test.json"

    def stop(self):
        self.service.terminate()
        output, _ = self.service.communicate(timeout=60)
        assert self.service.returncode == 0, output
        return output

    def close(self):
        if self.service and self.service.poll() is None:
            self.service.kill()
        for mount in ("dev", "proc"):
            subprocess.run(["umount", "-l", str(self.path / mount)])


@pytest.mark.timeout(1800)  # two release builds, static, from a clean clone
def test_the_package_installs_on_a_fresh_debian_12_upgrades_and_purges():
    new, previous = make("deb"), make("deb-previous")
    lint = subprocess.run(["lintian", "--tag-display-limit", "0", str(new)], capture_output=True, text=True,
                          timeout=300)
    errors = [line for line in lint.stdout.splitlines() if line.startswith("E:")]
    assert not errors, lint.stdout

    with tempfile.TemporaryDirectory(prefix="ct-deb-") as folder:
        root = Root(folder, previous)
        try:
            assert not (root.path / "usr/bin/swift").exists()
            assert root.run("id", "coffee-tracker").returncode == 0  # made by systemd-sysusers
            config = root.serve()
            add = root.run("coffee-tracker", "add", "--mg", "95", "--config", config, user="coffee-tracker")
            root.run("coffee-tracker", "add", "--mg", "64", "--config", config, user="coffee-tracker")
            # The packaged rules are on: the first drink's alerts are commits of their own (§16),
            # decided a moment after it. The anchor is read once they are in.
            ping = lambda: root.run("coffee-tracker", "ping", "--config", config, user="coffee-tracker").stdout  # noqa: E731
            before = ping()
            while True:
                time.sleep(0.5)
                if (now := ping()) == before:
                    break
                before = now
            root.stop()
            # The operator's edit of the conffile, which the upgrade must keep.
            packaged = root.path / "etc/coffee-tracker/coffee-tracker.json"
            edited = json.loads(packaged.read_text())
            edited["log"]["level"] = "notice"
            packaged.write_text(json.dumps(edited, indent=2))

            shutil.copy(new, root.path / "tmp" / new.name)
            root.run("apt-get", "install", "-y", "-o", "Dpkg::Options::=--force-confdef",
                     "-o", "Dpkg::Options::=--force-confold", f"/tmp/{new.name}")
            version = root.run("coffee-tracker", "--version").stdout
            assert version.startswith(f"coffee-tracker {VERSION} "), version
            assert json.loads(packaged.read_text())["log"]["level"] == "notice"
            check = root.run("coffee-tracker", "check", "--config", "/etc/coffee-tracker/coffee-tracker.json")
            assert check.stdout.startswith("ok"), check.stdout
            ldd = root.run("ldd", "/usr/bin/coffee-tracker").stdout
            assert "not found" not in ldd and "libswift" not in ldd and "libFoundation" not in ldd, ldd
            shipped = (root.path / "usr/bin/coffee-tracker").read_bytes()
            assert b"COFFEE_TRACKER_TEST_HOOKS" not in shipped  # a release build: no test hooks
            config = root.serve()
            after = root.run("coffee-tracker", "ping", "--config", config, user="coffee-tracker").stdout
            # Two drinks, and whatever alerts they told (nothing told again after the upgrade).
            assert after == before and int(re.search(r"anchor:? (\d+)", after).group(1)) >= 2, (before, after)
            root.stop()

            root.run("apt-get", "remove", "-y", "coffee-tracker")
            assert (root.path / "var/lib/coffee-tracker/data").is_dir()  # remove keeps the store
            root.run("apt-get", "purge", "-y", "coffee-tracker")
            assert not (root.path / "var/lib/coffee-tracker").exists()  # purge, and only it, removes it
        finally:
            root.close()
        assert add.returncode == 0
