"""Shared fixtures: where the shared contract (SPEC, schemas, vectors) lives beside the clone.

CI checks the project out next to `shared/`; a bare clone has no such folder, so every test
that needs it skips with a reason instead of failing.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared contract not found at {path} (CI checks it out beside the clone)")
    return path


@pytest.fixture(scope="session")
def schemas_dir() -> Path:
    return _need(SHARED / "schemas")


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    return _need(SHARED / "vectors")


@pytest.fixture(scope="session")
def load_schema(schemas_dir: Path):
    """load_schema("mcp-2025-11-25.schema.json") → the parsed document (cached)."""
    cache: dict[str, dict] = {}

    def load(name: str) -> dict:
        if name not in cache:
            cache[name] = json.loads(_need(schemas_dir / name).read_text())
        return cache[name]

    return load
