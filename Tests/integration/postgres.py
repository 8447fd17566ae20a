"""PostgreSQL servers of the tests' own (Tests/postgres/server.sh): data and
socket in a folder of their own, no TCP port, so runs never collide."""
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "postgres" / "server.sh"


def as_owner(args):
    """`args` as the user the servers run as (initdb refuses root)."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else list(args)


def server_bin():
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    return found[-1] if found else None


class PostgresServer:
    def __init__(self, root=None, name="server"):
        self.own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="ct-pg-"))
        os.chmod(self.root, 0o755)  # the postgres user reaches its folder
        self.dir = self.root / name
        self.conninfo = None

    def start(self, *settings):
        out = subprocess.run([str(SCRIPT), "start", str(self.dir), *settings], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        self.conninfo = out.stdout.strip()
        return self

    def stop(self, mode="fast"):
        subprocess.run([str(SCRIPT), "stop", str(self.dir), mode], capture_output=True, timeout=120, check=True)

    def promote(self):
        subprocess.run([str(SCRIPT), "promote", str(self.dir)], capture_output=True, timeout=120, check=True)

    def sql(self, statement, database="postgres"):
        """Runs `statement` with psql; returns its rows, unaligned."""
        out = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", statement,
                              f"{self.conninfo} dbname={database}"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def new_database(self):
        name = "ct_" + uuid.uuid4().hex
        self.sql(f"CREATE DATABASE {name}")
        return name, f"{self.conninfo} dbname={name}"

    def base_backup(self, into, application_name):
        """A standby of this server in `into` (pg_basebackup -R), that
        names itself `application_name` to it."""
        into.dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(into.dir, "postgres", "postgres")
        data = into.dir / "data"
        out = subprocess.run(as_owner([str(server_bin() / "pg_basebackup"), "-D", str(data), "-R", "-X", "stream", "-c", "fast",
                                       "-d", f"{self.conninfo} application_name={application_name}"]),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr

    def cleanup(self):
        try:
            self.stop("immediate")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        if self.own_root:
            shutil.rmtree(self.root, ignore_errors=True)
