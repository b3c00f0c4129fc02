"""The command line as a user runs it: `reminder-bridge translate` end to end in its own process
(stdin → stdout, a drop logged on stderr, a refusal's exit code), `python -m bridge`, and,
in-process through the same functions the commands call, byte-identical passthrough and `check`.

Every conversion vector runs in-process (tests/unit/test_vectors.py): a fresh interpreter per
vector adds nothing the one end-to-end run here does not show.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bridge.cli import main
from bridge.cli.translate import translate_lines
from tests.paths import ROOT, VECTORS
from tests.vectors import match


def command() -> list[str]:
    """The console script of the interpreter running the tests, else the one on PATH, else `-m bridge`."""
    beside = Path(sys.executable).parent / "reminder-bridge"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("reminder-bridge")
    return [found] if found else [sys.executable, "-m", "bridge"]


def run(args: list[str], stdin: bytes = b"", cmd: list[str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run((cmd or command()) + args, input=stdin, capture_output=True, timeout=30, cwd=ROOT)


def test_translate_command_converts_a_vector_end_to_end():
    """The installed `translate` reads a pretty-printed message on stdin and prints one JSON line per
    message the proxy writes, as tests/vectors/README.md describes it."""
    vector = json.loads((VECTORS / "mcp-legacy-message-to-standard.json").read_text())
    proc = run(["translate", "--protocol", vector["protocol"], "--toward", vector["toward"],
                "--source", vector["source"], "--target", vector["target"]],
               json.dumps(vector["input"], indent=2).encode())
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert match(vector["output"], lines) is None, proc.stdout.decode()[:1500]
    assert lines[0]["message"]["method"] == "notifications/reminder"


def test_python_dash_m_bridge_help():
    proc = run(["--help"], cmd=[sys.executable, "-m", "bridge"])
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert text.startswith("usage: reminder-bridge")
    for sub in ("translate", "check"):
        assert sub in text


# ----------------------------------------------------------------------------- in-process, as the commands run

PASSTHROUGH = ('{"jsonrpc":"2.0",  "method":"notifications/message","params":{"data":"caf\\u00e9 ☕ 中文",'
               '"level":"info","logger":"db","n":1.50,"big":12345678901234567890}}').encode()
INVALID = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "data": "x", "_meta": {"harn": {"reminder": {"id": "r-1", "ttlTurns": 0, "body": "secret"}}}}}).encode()
BROKEN_RULES = 'version = 1\n\n[routes.fs]\nprotocol = "mcp"\nstage = "translat"\n'


def test_passthrough_is_byte_identical(capsys):
    out = translate_lines("mcp", "host", "legacy", "standard", PASSTHROUGH + b"\n")
    assert out == b'{"to":"host","message":' + PASSTHROUGH + b"}\n"
    assert capsys.readouterr().err == ""


def test_invalid_notification_is_dropped_and_logged():
    proc = run(["translate", "--protocol", "mcp", "--toward", "host", "--source", "legacy", "--target", "standard"],
               INVALID)
    assert (proc.returncode, proc.stdout) == (0, b"")
    err = proc.stderr.decode()
    logs = [json.loads(line) for line in err.splitlines() if line.strip()]
    [entry] = [e for e in logs if e.get("event") == "invalid"]
    assert "`params._meta.harn.reminder.ttlTurns`" in entry["why"]
    assert entry["protocol"] == "mcp" and entry["method"] == "notifications/message"
    assert "secret" not in err  # bodies are never logged


def test_translate_refuses_a_host_adapter_toward_the_peer():
    """The error path in its own process: exit code 2, the reason on stderr, nothing on stdout."""
    proc = run(["translate", "--protocol", "mcp", "--toward", "peer", "--source", "legacy",
                "--target", "claude-channel"], INVALID)
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert "only translates --toward host" in proc.stderr.decode()


def test_check_shipped_default_rules(capsys):
    assert main(["check", str(ROOT / "rules" / "default.toml")]) == 0
    assert capsys.readouterr().out.startswith("ok:")


def test_check_broken_rules_names_file_line_key(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(BROKEN_RULES)
    assert main(["check", str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    pattern = re.compile(r"^(?P<file>.+):(?P<line>\d+): (?P<key>[\w.\-]+): (?P<message>.+)$")
    found = [pattern.match(line) for line in lines]
    assert found and all(found), lines
    first = found[0]
    assert (first["file"], first["line"], first["key"]) == (str(bad), "5", "routes.fs.stage")
    assert "translat" in first["message"]
