"""A machine without redis-server, Chromium or Firefox: the test run ends by naming the tests they
kept from running and the one command that installs them (tests/components.py, and the summary
hook in tests/conftest.py).

The run is a real pytest process over real tests of this suite, with a PATH that holds only the
interpreter's folder and none of the variables that name or demand a component.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.components import COMPONENTS, install_command
from tests.paths import ROOT

NEEDS_REDIS = "tests/integration/test_state.py::test_redis_refills_by_the_servers_clock"
EITHER_BACKEND = "tests/integration/test_state.py::test_queue_push_dedupes_limits_and_take_empties"
NEEDS_CHROMIUM = "tests/integration/test_console_browser.py::test_the_console_in_chromium"
NEEDS_FIREFOX = "tests/integration/test_console_firefox.py::test_the_console_in_firefox"


def test_a_run_without_them_names_what_did_not_run_and_how_to_install_it():
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDER_BRIDGE_")}
    env["PATH"] = str(Path(sys.executable).parent)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", NEEDS_REDIS,
                           EITHER_BACKEND, NEEDS_CHROMIUM, NEEDS_FIREFOX],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "1 passed, 4 skipped" in out  # the memory backend ran; nothing else could
    section = out[out.index("skipped: real components missing on this machine"):]
    lines = section.splitlines()
    assert "redis-server is not installed; 2 tests did not run:" in lines
    assert f"    {NEEDS_REDIS}" in lines and f"    {EITHER_BACKEND}[redis]" in lines
    assert f"    {EITHER_BACKEND}[memory]" not in lines
    assert "Chromium is not installed; 1 test did not run:" in lines and f"    {NEEDS_CHROMIUM}" in lines
    assert "Firefox is not installed; 1 test did not run:" in lines and f"    {NEEDS_FIREFOX}" in lines
    command = install_command(COMPONENTS)
    assert command.endswith("apt-get install -y redis-server chromium firefox-esr")
    # the run ends with it: only pytest's closing count comes after the one command
    assert [line.strip() for line in lines[-3:-1]] == ["Install them all with:", command]
