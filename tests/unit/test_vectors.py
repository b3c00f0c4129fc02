"""Every conversion vector in tests/vectors, in-process through the function `reminder-bridge
translate` prints with, one test each; the comparison rule; and the `python -m tests.vectors`
runner, which must fail on a vector that does not hold."""
from __future__ import annotations

import json

import pytest

from tests.paths import VECTORS
from tests.vectors import check, match, vector_paths
from tests.vectors.__main__ import main

PATHS = vector_paths()


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_vector(path):
    vector = json.loads(path.read_text())
    assert vector["name"] == path.stem
    assert check(vector) is None, f"{path.name}: {check(vector)}"


def test_vectors_cover_every_protocol_and_the_host_adapter():
    vectors = [json.loads(p.read_text()) for p in PATHS]
    assert {v["protocol"] for v in vectors} == {"mcp", "acp", "a2a"}
    assert {v["target"] for v in vectors} == {"standard", "legacy", "claude-channel"}
    assert any(v["output"] == [] for v in vectors)  # a drop


def test_match_rule_itself():
    assert match({"a": 1}, {"a": 1, "_meta": {"x": 1}, "tags": []}) is None
    assert match({"a": 1}, {"a": 1.0}) is not None  # 1 and 1.0 are not equal
    assert match({"a": 1}, {"a": 1, "tags": ["x"]}) is not None
    assert match({"a": "<any>"}, {"a": {"deep": 1}}) is None
    assert match([{"a": 1}], [{"a": 1}, {"a": 1}]) is not None
    assert match({"a": True}, {"a": 1}) is not None


def test_runner_passes_every_vector(capsys):
    assert main([]) == 0
    assert capsys.readouterr().out == f"{len(PATHS)} passed, 0 failed\n"


def test_runner_names_a_vector_that_does_not_hold(tmp_path, capsys):
    vector = json.loads((VECTORS / "mcp-legacy-message-to-standard.json").read_text())
    vector["output"][0]["message"]["method"] = "notifications/message"
    (tmp_path / "broken.json").write_text(json.dumps(vector))
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL broken.json: $[0].message.method: expected")
    assert out[-1] == "0 passed, 1 failed"


def test_runner_fails_when_no_vector_ran(tmp_path, capsys):
    assert main([str(tmp_path)]) == 1
    assert capsys.readouterr().out == "0 passed, 0 failed\n"
