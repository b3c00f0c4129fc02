"""Where things are, for tests anywhere under tests/.

The wire contract travels with the clone: docs/spec.md, the conversion vectors in tests/vectors/ and
the published schemas in tests/schemas/. ``SHARED`` is the shared contract a CI checkout has beside
the clone (../shared); only tests/unit/test_contract.py reads it, to check the copies against it.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec.md"
VECTORS = ROOT / "tests" / "vectors"
SCHEMAS = ROOT / "tests" / "schemas"
SHARED = ROOT.parent / "shared"
