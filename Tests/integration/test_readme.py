"""The README's "Using it" and "From your phone", run as a new user would:
each command of their blocks, in order, as written, from a copy of the
clone's layout (its configuration with endpoints of the test's own, so that
runs never collide), with the system's `python3`, which has no
coffee_tracker installed (the README must not need `make test`'s virtual
environment)."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BINARY, query, run_on_terminal
from test_inbox import wait_until

ROOT = Path(__file__).resolve().parents[2]


def readme_block(heading):
    """The first indented command block under `## heading` in the README: its command lines."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"\n\n((?:    \S.*\n)+)", section).group(1)
    return [line[4:].split("  #", 1)[0].strip() for line in block.splitlines()]


def system_python():
    """A python3 outside make test's virtual environment."""
    for candidate in (shutil.which("python3", path=os.environ.get("PATH", "").replace(str(ROOT / ".build/pyenv/bin"), "")),
                      "/usr/bin/python3"):
        if candidate and ".build/pyenv" not in candidate:
            return candidate
    pytest.skip("no python3 outside the virtual environment")


@pytest.fixture
def clone(tmp_path):
    """The clone's layout with the binary under test as the release build."""
    (tmp_path / "config").mkdir()
    config = json.loads((ROOT / "config" / "coffee-tracker.json").read_text())
    config["ingest"]["bind"] = [f"ipc://{tmp_path}/ingest.sock"]
    config["updates"]["bind"] = [f"ipc://{tmp_path}/updates.sock"]
    config["query"]["bind"] = ["tcp://127.0.0.1:*"]
    config["http"] = {"bind": "127.0.0.1:0"}
    (tmp_path / "config" / "coffee-tracker.json").write_text(json.dumps(config))
    os.symlink(ROOT / "examples", tmp_path / "examples")
    os.symlink(ROOT / "clients", tmp_path / "clients")
    (tmp_path / ".build" / "release").mkdir(parents=True)
    os.symlink(BINARY, tmp_path / ".build" / "release" / "coffee-tracker")
    return tmp_path


def test_using_it_works_as_written_from_a_fresh_clone(clone):
    commands = readme_block("Using it")
    assert commands[0] == "make run" and commands[1] == "python3 examples/subscribe.py", commands
    python = system_python()
    probe = subprocess.run([python, "-c", "import coffee_tracker"], capture_output=True, text=True, cwd="/")
    assert probe.returncode != 0, "this python has coffee_tracker installed: it would hide the README's gap"
    env = {**os.environ, "PATH": f"{Path(python).parent}:{os.environ['PATH']}"}
    # `make run` builds, then runs this:
    run = re.search(r"^run: release\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    serve = shlex.split(run.replace("$(CONFIG)", "config/coffee-tracker.json"))
    log = open(clone / "service.log", "wb")
    service = subprocess.Popen(serve, cwd=clone, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    subscriber = None
    try:
        wait_until(lambda: (clone / "data" / "endpoints.json").exists(), timeout=20, what="the service to start")
        subscriber = subprocess.Popen(shlex.split(commands[1]), cwd=clone, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        first = subscriber.stdout.readline()
        assert "subscribed" in first, first + subscriber.stderr.read()
        # Its subscriptions (changes, model, heartbeat) have reached the service before anything is added.
        endpoint = json.loads((clone / "data" / "endpoints.json").read_text())["query"][0]
        wait_until(lambda: query(endpoint, {"op": "stats"})["subscribers"] >= 3, 10, what="subscribe.py's subscriptions")
        outputs = {}
        for command in commands[2:]:
            if command.endswith(" watch"):
                code, shown = run_on_terminal(["--help"], timeout=10)  # the binary answers on a terminal
                assert code == 0
                watch = subprocess.Popen(shlex.split(command), cwd=clone, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
                line = watch.stdout.readline()
                watch.send_signal(signal.SIGINT)
                watch.wait(timeout=10)
                outputs[command] = line
                continue
            done = subprocess.run(shlex.split(command), cwd=clone, env=env, capture_output=True, text=True, timeout=30)
            assert done.returncode == 0, f"{command}: {done.stderr}"
            outputs[command] = done.stdout
        add = outputs[".build/release/coffee-tracker add --type doubleEspresso"]
        assert add.startswith("added doubleEspresso 128 mg") and add.strip().endswith("anchor 1"), add
        assert "caffeine" in outputs[".build/release/coffee-tracker model"]
        assert outputs[".build/release/coffee-tracker changes"].startswith("+ ")
        assert "anchor" in outputs[".build/release/coffee-tracker watch"] or outputs[".build/release/coffee-tracker watch"]
        subscriber.send_signal(signal.SIGINT)
        out, err = subscriber.communicate(timeout=20)
        assert "doubleEspresso" in out, out + err
    finally:
        if subscriber and subscriber.poll() is None:
            subscriber.kill()
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=30)
        log.close()
