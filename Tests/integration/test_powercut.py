"""A few power cuts (Tests/powercut/powercut.py, which `make powercut
CUTS=N` runs at length): the service under mixed load on a file system that
loses what was not synced, cut at random moments; nothing acknowledged may
be lost. Needs /dev/fuse, fusermount3 and mfusepy (`make test` installs
them); skipped, saying why, where they are missing."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BINARY

HARNESS = Path(__file__).resolve().parents[1] / "powercut" / "powercut.py"


def missing():
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse here"
    if not shutil.which("fusermount3"):
        return "fusermount3 (Debian's fuse3) is not installed"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"mfusepy cannot load libfuse3: {error}"
    return None


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_power_cuts_under_mixed_load_lose_nothing_acknowledged():
    p = subprocess.run([sys.executable, str(HARNESS), "--binary", BINARY, "--cuts", "4"],
                       capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "4 passed, 0 failed" in p.stdout
    assert "nothing acknowledged lost" in p.stdout
