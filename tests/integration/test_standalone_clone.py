"""A clone stands alone: the committed HEAD, cloned into an empty folder with nothing beside it
(no ../shared), runs the README's vector command, collects the whole suite, and runs every test
that reads the contract, the vectors or the schemas with no skip (the comparisons with ../shared
are .ci/run's tests/contract_sync.py step).

It runs with this interpreter (the test extra installed) and PYTHONPATH at the clone, so the
clone's own code and tests are what run.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

#: every test that reads docs/spec.md, tests/vectors or tests/schemas at run time (the fuzz reads
#: the schemas when it is collected, which the collection run covers)
CONTRACT_TESTS = ["tests/unit/test_contract.py", "tests/unit/test_vectors.py", "tests/unit/dialects/test_schemas.py"]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout, so there is no committed HEAD to clone")
    where = tmp_path_factory.mktemp("alone") / "reminder-bridge"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(where)], check=True, timeout=60)
    assert not (where.parent / "shared").exists()
    return where


def run(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(clone)}
    return subprocess.run([sys.executable, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=120)


def test_the_clone_runs_its_own_code(clone):
    proc = run(clone, "-c", "import bridge, tests.vectors; print(bridge.__file__); print(tests.vectors.__file__)")
    assert proc.stdout.splitlines() == [str(clone / "bridge" / "__init__.py"),
                                        str(clone / "tests" / "vectors" / "__init__.py")], proc.stderr


def test_the_readme_vector_command_checks_every_vector_in_the_clone(clone):
    assert "python -m tests.vectors" in (clone / "README.md").read_text()
    vectors = sorted((clone / "tests" / "vectors").glob("*.json"))
    protocols = {re.search(r'"protocol": "(\w+)"', p.read_text())[1] for p in vectors}
    assert protocols == {"mcp", "acp", "a2a"}
    proc = run(clone, "-m", "tests.vectors")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == f"{len(vectors)} passed, 0 failed\n"


def test_the_whole_suite_collects_in_the_clone(clone):
    proc = run(clone, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--collect-only")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"^\d{3,} tests collected", proc.stdout, re.M), proc.stdout[-500:]


def test_no_contract_test_skips_in_the_clone(clone):
    """The comparisons with ../shared are a CI step (tests/contract_sync.py), not tests, so the
    contract tests run whole in a clone with nothing beside it."""
    proc = run(clone, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *CONTRACT_TESTS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert not re.findall(r"^SKIPPED", proc.stdout, re.M), proc.stdout[-2000:]
    assert re.search(r"^\d{2,} passed in ", proc.stdout, re.M), proc.stdout[-500:]
