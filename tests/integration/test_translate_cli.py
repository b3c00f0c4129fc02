"""The installed command line, run as a user runs it: every shared vector (and the project's own, in
tests/vectors) through `reminder-bridge translate`, byte-identical passthrough, drops, `--help` and `check`.

The vectors are run concurrently once per session (each run is a fresh interpreter), then
compared one test per vector with the rule of vectors/README.md.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from tests.paths import ROOT, SHARED as SHARED_ROOT

VECTORS_DIR = SHARED_ROOT / "vectors"
VECTORS = sorted(VECTORS_DIR.glob("*.json")) if VECTORS_DIR.is_dir() else []
#: the project's own cases, for what the shared vectors do not cover (the host adapters)
OWN_VECTORS = sorted((ROOT / "tests" / "vectors").glob("*.json"))


def command() -> list[str]:
    """The console script of the interpreter running the tests, else the one on PATH, else `-m bridge`."""
    beside = Path(sys.executable).parent / "reminder-bridge"
    if beside.exists():
        return [str(beside)]
    venv = ROOT / ".venv" / "bin" / "reminder-bridge"
    if venv.exists():
        return [str(venv)]
    found = shutil.which("reminder-bridge")
    return [found] if found else [sys.executable, "-m", "bridge"]


def run(args: list[str], stdin: bytes = b"", cmd: list[str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run((cmd or command()) + args, input=stdin, capture_output=True, timeout=30, cwd=ROOT)


def translate_args(protocol: str, toward: str, source: str, target: str) -> list[str]:
    return ["translate", "--protocol", protocol, "--toward", toward, "--source", source, "--target", target]


# ----------------------------------------------------------------------------- comparison (vectors/README.md)

DEFAULTS = {("tags", "[]"), ("preserveOnCompact", "false"), ("preserve_on_compact", "false"),
            ("propagate", '"session"'), ("propagate", '"REMINDER_PROPAGATION_SESSION"'),
            ("roleHint", '"system"'), ("role_hint", '"system"'), ("roleHint", '"REMINDER_ROLE_HINT_SYSTEM"'),
            ("firedAtTurn", "null")}


def match(expected: Any, actual: Any, path: str = "$") -> str | None:
    """None when ``actual`` matches ``expected``, else where and why it does not."""
    if expected == "<any>":
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {json.dumps(actual)[:80]}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing"
            if err := match(value, actual[key], f"{path}.{key}"):
                return err
        for key in actual.keys() - expected.keys():
            if key in ("_meta", "metadata") or (key, json.dumps(actual[key])) in DEFAULTS:
                continue
            return f"{path}.{key}: unexpected key = {json.dumps(actual[key])[:80]}"
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path}: expected a list of {len(expected)}, got {json.dumps(actual)[:120]}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            if err := match(e, a, f"{path}[{i}]"):
                return err
        return None
    if type(expected) is not type(actual) or expected != actual:
        return f"{path}: expected {json.dumps(expected)[:80]}, got {json.dumps(actual)[:80]}"
    return None


def test_match_rule_itself():
    assert match({"a": 1}, {"a": 1, "_meta": {"x": 1}, "tags": []}) is None
    assert match({"a": 1}, {"a": 1.0}) is not None  # 1 and 1.0 are not equal
    assert match({"a": 1}, {"a": 1, "tags": ["x"]}) is not None
    assert match({"a": "<any>"}, {"a": {"deep": 1}}) is None
    assert match([{"a": 1}], [{"a": 1}, {"a": 1}]) is not None
    assert match({"a": True}, {"a": 1}) is not None


# ----------------------------------------------------------------------------- all runs, concurrently

PASSTHROUGH = ('{"jsonrpc":"2.0",  "method":"notifications/message","params":{"data":"caf\\u00e9 ☕ 中文",'
               '"level":"info","logger":"db","n":1.50,"big":12345678901234567890}}').encode()
INVALID = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {
    "level": "info", "data": "x", "_meta": {"harn": {"reminder": {"id": "r-1", "ttlTurns": 0, "body": "secret"}}}}}).encode()
BROKEN_RULES = 'version = 1\n\n[routes.fs]\nprotocol = "mcp"\nstage = "translat"\n'


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess[bytes]]:
    """Every subprocess this file needs, started together: each is a fresh interpreter, and the
    suite must stay fast."""
    bad = tmp_path_factory.mktemp("rules") / "bad.toml"
    bad.write_text(BROKEN_RULES)
    jobs: dict[str, tuple[list[str], bytes, list[str] | None]] = {
        "passthrough": (translate_args("mcp", "host", "legacy", "standard"), PASSTHROUGH + b"\n", None),
        "invalid": (translate_args("mcp", "host", "legacy", "standard"), INVALID, None),
        "help": (["--help"], b"", [sys.executable, "-m", "bridge"]),
        "check-ok": (["check", "rules/default.toml"], b"", None),
        "check-bad": (["check", str(bad)], b"", None),
    }
    for path in VECTORS + OWN_VECTORS:
        vector = json.loads(path.read_text())
        args = translate_args(vector["protocol"], vector["toward"], vector["source"], vector["target"])
        jobs[str(path)] = (args, json.dumps(vector["input"]).encode(), None)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {name: pool.submit(run, args, stdin, cmd) for name, (args, stdin, cmd) in jobs.items()}
        done = {name: f.result() for name, f in futures.items()}
    return done


# ----------------------------------------------------------------------------- every vector


def check_vector(runs, path: Path) -> None:
    vector = json.loads(path.read_text())
    proc = runs[str(path)]
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    assert all(set(line) == {"to", "message"} and line["to"] in ("host", "peer") for line in lines)
    err = match(vector["output"], lines)
    assert err is None, f"{path.name}: {err}\nstdout: {proc.stdout.decode()[:1500]}"


@pytest.mark.parametrize("name", [p.name for p in VECTORS] or ["(no vectors)"])
def test_vector(runs, name):
    if not VECTORS:
        pytest.skip(f"no conversion vectors at {VECTORS_DIR} (CI checks ../shared out beside the clone)")
    check_vector(runs, VECTORS_DIR / name)


@pytest.mark.parametrize("path", OWN_VECTORS, ids=lambda p: p.name)
def test_own_vector(runs, path):
    check_vector(runs, path)


def test_own_vectors_cover_the_claude_channel_adapter():
    targets = {json.loads(p.read_text())["target"] for p in OWN_VECTORS}
    assert targets == {"claude-channel"}


def test_vectors_cover_every_protocol():
    if not VECTORS:
        pytest.skip(f"no conversion vectors at {VECTORS_DIR}")
    protocols = {json.loads(p.read_text())["protocol"] for p in VECTORS}
    assert protocols == {"mcp", "acp", "a2a"}


# ----------------------------------------------------------------------------- behaviour a user sees


def test_passthrough_is_byte_identical(runs):
    proc = runs["passthrough"]
    assert proc.returncode == 0
    assert proc.stdout == b'{"to":"host","message":' + PASSTHROUGH + b"}\n"
    assert proc.stderr == b""


def test_invalid_notification_is_dropped_and_logged(runs):
    proc = runs["invalid"]
    assert proc.returncode == 0
    assert proc.stdout == b""
    logs = [json.loads(line) for line in proc.stderr.decode().splitlines() if line.strip()]
    [entry] = [e for e in logs if e.get("event") == "invalid"]
    assert "`params._meta.harn.reminder.ttlTurns`" in entry["why"]
    assert entry["protocol"] == "mcp" and entry["method"] == "notifications/message"
    assert b"secret" not in proc.stderr  # bodies are never logged


def test_python_dash_m_bridge_help(runs):
    proc = runs["help"]
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert text.startswith("usage: reminder-bridge")
    for sub in ("translate", "check"):
        assert sub in text


def test_check_shipped_default_rules(runs):
    proc = runs["check-ok"]
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    assert proc.stdout.decode().startswith("ok:")


def test_check_broken_rules_names_file_line_key(runs):
    proc = runs["check-bad"]
    assert proc.returncode == 1
    lines = proc.stdout.decode().splitlines()
    assert lines, proc.stderr.decode()
    pattern = re.compile(r"^(?P<file>.+):(?P<line>\d+): (?P<key>[\w.\-]+): (?P<message>.+)$")
    found = [pattern.match(line) for line in lines]
    assert all(found), lines
    first = found[0]
    assert (first["file"], first["line"], first["key"]) == (proc.args[-1], "5", "routes.fs.stage")
    assert "translat" in first["message"]
