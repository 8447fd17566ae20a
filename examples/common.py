"""Finding the service: the endpoints it really bound, from endpoints.json."""
import json
import os
from pathlib import Path


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
