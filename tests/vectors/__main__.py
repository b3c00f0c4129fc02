"""`python -m tests.vectors [DIR...]`, from the clone: checks every conversion vector in each DIR
(default: tests/vectors) in-process, as `reminder-bridge translate` converts it, and prints a line
per failure and `N passed, M failed`. Exits 1 if any failed or none ran, as
../shared/tools/check_vectors.py does."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.vectors import HERE, check, vector_paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.vectors", description="Check conversion vectors "
                                     "in-process, as `reminder-bridge translate` converts them.")
    parser.add_argument("dirs", nargs="*", type=Path, default=[HERE], metavar="DIR",
                        help="a folder of vectors (default: tests/vectors)")
    args = parser.parse_args(argv)
    passed = failed = 0
    for directory in args.dirs:
        if not directory.is_dir():
            parser.error(f"{directory} is not a folder")
        for path in vector_paths(directory):
            err = check(json.loads(path.read_text()))
            if err:
                failed += 1
                print(f"FAIL {path.name}: {err}")
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
