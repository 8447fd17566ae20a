"""`make failover` with few rounds (docs/protocol.md §11, §13): kill -9 of a
primary under steady writes, the standby promoted, a follower ending equal
to it, nothing acknowledged lost beyond the standby's lag at the kill, the
old primary refused by the promoted one, then rejoining as its standby."""
import subprocess
import sys
from pathlib import Path

from conftest import BINARY

SCRIPT = Path(__file__).resolve().parents[1] / "failover" / "failover.py"


def test_three_rounds_of_failover_keep_their_promises():
    done = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "3", "--binary", BINARY],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rounds = [line for line in done.stdout.splitlines() if line.startswith("failover round ")]
    assert len(rounds) == 3 and "epoch 5" in rounds[-1], done.stdout  # round 1 promotes twice (the refusal)
    assert "failover: 3 rounds" in done.stdout
