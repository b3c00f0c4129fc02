"""`python -m tests.contract_sync [SHARED]`: the repository's copies of the wire contract against
the shared one beside the clone (default ../shared): the same sections under the same numbers and
titles with every numbered item, every shared vector and schema byte for byte.

A CI step (.ci/run), run when a checkout has the shared contract: the test suite itself needs
nothing beside the clone, and so never skips for a missing contract.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.paths import SCHEMAS, SHARED, SPEC, VECTORS

SECTION = re.compile(r"^## (\d+)\. (.+)$", re.M)
#: the shared contract's file, in the shared directory
SHARED_SPEC = "SPEC.md"


def sections(text: str) -> dict[int, tuple[str, str]]:
    """Section number → (title, body) of a spec document."""
    found = list(SECTION.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return {int(m[1]): (m[2], text[m.end():end]) for m, end in zip(found, ends)}


def _files(directory: Path, pattern: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob(pattern)) if p.name != "README.md"}


def problems(shared: Path) -> list[str]:
    """What differs between the copies and ``shared``; empty when they agree."""
    found: list[str] = []
    ours, theirs = sections(SPEC.read_text()), sections((shared / SHARED_SPEC).read_text())
    if {n: t for n, (t, _) in ours.items()} != {n: t for n, (t, _) in theirs.items()}:
        found.append("docs/spec.md must keep every shared section under its number and title")
    for number, (_, body) in theirs.items():
        items = re.findall(r"^(\d+)\. ", body, re.M)
        if number in ours and re.findall(r"^(\d+)\. ", ours[number][1], re.M) != items:
            found.append(f"docs/spec.md §{number} must keep the shared numbered items {items}")
    for name, directory, where, pattern in (("vectors", VECTORS, "tests/vectors", "*.json"),
                                            ("schemas", SCHEMAS, "tests/schemas", "*")):
        theirs_files, ours_files = _files(shared / name, pattern), _files(directory, pattern)
        if not theirs_files:
            found.append(f"{shared / name} holds nothing to compare with")
        missing = sorted(theirs_files.keys() - ours_files.keys())
        changed = sorted(n for n in theirs_files.keys() & ours_files.keys() if theirs_files[n] != ours_files[n])
        if missing or changed:
            found.append(f"copy {shared / name} into {where} again: missing {missing}, changed {changed}")
        if name == "schemas" and sorted(ours_files) != sorted(theirs_files):
            found.append("tests/schemas must hold exactly the files of the shared schemas")
    return found


def main(argv: list[str]) -> int:
    shared = Path(argv[0]) if argv else SHARED
    found = problems(shared)
    for problem in found:
        print(f"contract_sync: {problem}")
    print(f"contract_sync: the copies match {shared}" if not found else f"contract_sync: {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
