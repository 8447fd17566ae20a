"""Finding the service: the endpoints it really bound, from endpoints.json.

Importing it also lets the examples find the client library in this clone
(clients/python) when it is not installed, so that `python3
examples/subscribe.py` works right after `make run`; an installed copy
(`pip install ./clients/python`) comes first."""
import json
import os
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "clients" / "python"))


def endpoints(data_dir):
    path = Path(data_dir) / "endpoints.json"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: start the service first (make run), or pass --data DIR")
    found = json.loads(path.read_text())
    if found.get("serverKey"):
        raise SystemExit("this service runs with security.curve: see the README's 'Running across hosts'")
    pid = found.get("pid")
    if pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise SystemExit(f"the service is not running (pid {pid} in {path} has exited): start it with make run")
        except PermissionError:
            pass
    return {k: v[0].replace("tcp://*:", "tcp://127.0.0.1:").replace("tcp://0.0.0.0:", "tcp://127.0.0.1:")
            for k, v in found.items() if isinstance(v, list) and v}
