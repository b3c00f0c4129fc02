"""Where things are, for tests anywhere under tests/: the clone, and the shared contract beside it."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
