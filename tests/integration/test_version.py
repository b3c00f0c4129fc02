"""`reminder-bridge --version`: what an operator pastes into a bug report (version, Python, the event
loop the proxy runs on, the optional extras it found)."""
from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
from importlib.metadata import version

import pytest


def run_version(**env: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "bridge", "--version"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_version_names_the_release_python_loop_and_extras():
    lines = run_version()
    assert lines[0] == f"reminder-bridge {version('reminder-bridge')}"
    assert lines[1].startswith(f"python {platform.python_version()} ")
    uvloop = importlib.util.find_spec("uvloop") is not None
    # stdio keeps asyncio's loop: uvloop would give the child socketpairs, not pipes
    assert lines[2] == f"event loop: {'uvloop' if uvloop else 'asyncio'} (serve), asyncio (stdio)"
    extras = lines[3].removeprefix("optional extras found: ").split(", ")
    assert ("uvloop" in extras) == uvloop
    assert ("redis" in extras) == (importlib.util.find_spec("redis") is not None)
    assert ("msgspec" in extras) == (importlib.util.find_spec("msgspec") is not None)  # the [fast] decoder


def test_the_standard_loop_can_be_chosen_and_version_says_so():
    assert run_version(REMINDER_BRIDGE_LOOP="asyncio")[2] == "event loop: asyncio (serve), asyncio (stdio)"


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="pip install 'reminder-bridge[fast]'")
def test_serve_runs_on_uvloop_when_installed():
    from tests.peers.processes import proxy

    running = proxy("--protocol", "mcp", "--upstream", "http://127.0.0.1:9")
    try:
        assert '"loop": "uvloop"' in next(line for line in running.stderr if '"listening"' in line)
    finally:
        running.stop()
