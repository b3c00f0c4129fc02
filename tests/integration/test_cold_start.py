"""A cold start nobody notices (issue 23): hosts start every configured server at launch, so
`reminder-bridge stdio` starts the child first and imports only what its route needs; a setting
refused after the child started stops the child, so no server outlives a proxy that refused to run.

(The delay itself is a speed goal: bench/cold_start.py measures it.)"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from tests.peers.processes import wait_until
from tests.paths import ROOT

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}) + "\n"
SERVER = [sys.executable, "-m", "bridge.examples.mcp_legacy_server"]


def modules_after(argv: list[str], stdin: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the CLI on ``argv`` in a fresh interpreter: what it wrote, and every module it imported."""
    listing = tmp_path / "modules.json"
    script = ("import json, sys\nfrom bridge.cli import main\n"
              "try:\n    code = main(sys.argv[2:])\nexcept SystemExit as exc:  # argparse's way out\n    code = exc.code\n"
              "open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules)))\nsys.exit(code)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", script, str(listing), *argv], input=stdin.encode(),
                          capture_output=True, timeout=60, cwd=ROOT, env=env)
    assert listing.exists(), done.stderr.decode()
    return done, set(json.loads(listing.read_text()))


def families(modules: set[str], *names: str) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


def test_stdio_without_tracing_imports_neither_opentelemetry_nor_aiohttp(tmp_path):
    done, modules = modules_after(["stdio", "--", *SERVER], INITIALIZE, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and "capabilities" in answer["result"]  # the route ran: the host got its answer
    assert families(modules, "opentelemetry", "aiohttp") == []


def test_stdio_without_rules_answers_initialize_without_pydantic(tmp_path):
    """The first answer (with its capability rewrite) runs on the plain built-in settings: the rules
    schema and the reminder model (pydantic, most of the start-up) wait for a reminder or a rules file."""
    init = json.loads(INITIALIZE)
    init["params"]["capabilities"] = {"experimental": {"reminders": {}}}  # a standard host: the answer is rewritten
    done, modules = modules_after(["stdio", "--", *SERVER], json.dumps(init) + "\n", tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and "reminders" in answer["result"]["capabilities"]  # rewritten for the standard host
    assert families(modules, "pydantic", "pydantic_core") == []
    assert sorted(m for m in modules if m in ("bridge.rules", "bridge.state.settings")) == []  # (bridge.model: lazy)


def test_acp_stdio_answers_initialize_without_pydantic(tmp_path):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    done, modules = modules_after(["stdio", "--", sys.executable, "-m", "bridge.examples.acp_harn_agent"],
                                  json.dumps(init) + "\n", tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.splitlines()[0])["result"]["agentCapabilities"]
    assert families(modules, "pydantic", "pydantic_core") == []


def test_version_builds_no_rules_schema(tmp_path):
    done, modules = modules_after(["--version"], "", tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(b"reminder-bridge ")
    # (finding the [otlp] extra imports the namespace packages above its module: nothing of the SDK)
    assert families(modules, "pydantic", "aiohttp", "asyncio") == []


def test_stdio_starts_its_child_before_the_rules_schema(tmp_path):
    """The child is spawned with what parsing the command line needs, and nothing of pydantic, the
    pipeline or the loop: those are imported while the child starts."""
    listing = tmp_path / "at-spawn.json"
    script = ("import json, sys\nfrom bridge.transports import child\nstart = child.start\n"
              "def spy(*args, **kwargs):\n    open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules)))\n"
              "    return start(*args, **kwargs)\n"
              "child.start = spy\nfrom bridge.cli import main\nsys.exit(main(sys.argv[2:]))\n")
    done = subprocess.run([sys.executable, "-c", script, str(listing), "stdio", "--", *SERVER],
                          input=INITIALIZE.encode(), capture_output=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.splitlines()[0])["id"] == 1
    modules = set(json.loads(listing.read_text()))
    assert families(modules, "pydantic", "pydantic_core", "asyncio", "aiohttp") == []
    assert sorted(m for m in modules if m.startswith(("bridge.rules", "bridge.model", "bridge.pipeline"))) == []


def running_with(token: str) -> list[int]:
    """Processes whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def child_that_stays(token: str) -> list[str]:
    """A server that would run for a minute, whatever its stdin does, marked by ``token``."""
    return [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)",
            token]


def test_an_admin_port_that_cannot_listen_stops_the_child_it_started():
    token = f"cold-start-{uuid.uuid4().hex}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "bridge", "stdio", "--admin", f"127.0.0.1:{port}", "--",
                               *child_that_stays(token)], input=INITIALIZE.encode(), capture_output=True, timeout=60)
    assert done.returncode == 2
    assert f"127.0.0.1:{port}" in done.stderr.decode()
    wait_until(lambda: not running_with(token))
    assert running_with(token) == []


def test_a_refused_state_url_stops_the_child_and_says_why():
    token = f"cold-start-{uuid.uuid4().hex}"
    done = subprocess.run([sys.executable, "-m", "bridge", "stdio", "--state", "bogus://somewhere", "--",
                           *child_that_stays(token)], input=INITIALIZE.encode(), capture_output=True, timeout=60)
    assert done.returncode == 2
    assert "--state" in done.stderr.decode() and "bogus" in done.stderr.decode()
    wait_until(lambda: not running_with(token))
    assert running_with(token) == []
