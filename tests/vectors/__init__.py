"""The conversion vectors (the *.json files in this folder) and the one runner and comparison rule
for them.

A vector runs in-process through `bridge.cli.translate.translate_lines`, the function whose bytes
`reminder-bridge translate` prints, and its output is compared by the rule of README.md here (the
rule of the shared vectors). `python -m tests.vectors` checks a folder of them from the command
line; tests/unit/test_vectors.py makes each one a test.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from bridge.cli.translate import target_problem, translate_lines
from bridge.telemetry import Recorder

HERE = Path(__file__).resolve().parent

#: reminder fields an actual object may carry beyond the expected ones, written with their defaults
DEFAULTS = {("tags", "[]"), ("preserveOnCompact", "false"), ("preserve_on_compact", "false"),
            ("propagate", '"session"'), ("propagate", '"REMINDER_PROPAGATION_SESSION"'),
            ("roleHint", '"system"'), ("role_hint", '"system"'), ("roleHint", '"REMINDER_ROLE_HINT_SYSTEM"'),
            ("firedAtTurn", "null")}


def match(expected: Any, actual: Any, path: str = "$") -> str | None:
    """None when ``actual`` matches ``expected`` (README.md, "How an output is compared"), else
    where and why it does not."""
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


def vector_paths(directory: Path = HERE) -> list[Path]:
    return sorted(directory.glob("*.json"))


def run(vector: dict[str, Any]) -> bytes:
    """What `reminder-bridge translate` prints for the vector's input (its log lines, on stderr there,
    discarded)."""
    protocol, toward, target = vector["protocol"], vector["toward"], vector["target"]
    if (problem := target_problem(protocol, toward, target)) is not None:
        raise ValueError(f"translate refuses --target: {problem}")
    return translate_lines(protocol, toward, vector["source"], target, json.dumps(vector["input"]).encode(),
                           Recorder(log=io.StringIO()))


def check(vector: dict[str, Any]) -> str | None:
    """None when the vector holds, else where and why it does not."""
    try:
        lines = [json.loads(line) for line in run(vector).splitlines()]
    except Exception as exc:  # noqa: BLE001 - any failure is a failed vector, named
        return f"{type(exc).__name__}: {exc}"
    for i, line in enumerate(lines):
        if set(line) != {"to", "message"} or line["to"] not in ("host", "peer"):
            return f"output line {i} is not {{to: host|peer, message}}: {json.dumps(line)[:120]}"
    return match(vector["output"], lines)
