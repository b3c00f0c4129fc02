"""The wire contract travels with the clone: docs/spec.md, tests/vectors and tests/schemas.

Every `spec §N` cited anywhere in the repository names a section of docs/spec.md. Where a CI
checkout has the shared contract beside the clone (../shared), the copies are checked against it:
the same sections under the same numbers and titles, every shared vector and schema byte for byte.
Without ../shared those comparisons skip, with nothing to compare with: the only tests that skip
for the contract.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import ROOT, SCHEMAS, SHARED, SPEC, VECTORS

shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"no shared contract at {SHARED} to compare the "
                                                         "copies with (a CI checkout has it beside the clone)")

SECTION = re.compile(r"^## (\d+)\. (.+)$", re.M)
#: a citation: "spec §7", "spec §2, §7", "spec §3–§5", "spec §8.3"
CITATION = re.compile(r"\bspec (§\d+(?:\.\d+)?(?:(?:, |–|-| and )§\d+(?:\.\d+)?)*)")
#: where citations live: docs, READMEs, rules files, code and tests
CITING = ("README.md", "docs/**/*.md", "rules/**/*.toml", "bridge/**/*.py", "tests/**/*.py", "tests/**/*.md",
          "tests/vectors/*.json", "bench/**/*.py", "bench/**/*.md")


def sections(text: str) -> dict[int, tuple[str, str]]:
    """Section number → (title, body) of a spec document."""
    found = list(SECTION.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return {int(m[1]): (m[2], text[m.end():end]) for m, end in zip(found, ends)}


def citing_files() -> list[Path]:
    return sorted({p for pattern in CITING for p in ROOT.glob(pattern) if ".venv" not in p.parts})


def test_every_spec_citation_names_a_section_or_item_that_exists():
    spec = sections(SPEC.read_text())
    assert sorted(spec) == list(range(1, 14))
    cited = 0
    for path in citing_files():
        for citation in CITATION.finditer(path.read_text()):
            for ref in re.findall(r"§(\d+)(?:\.(\d+))?", citation[1]):
                number, item = int(ref[0]), ref[1]
                where = f"{path.relative_to(ROOT)}: {citation[0]!r}"
                assert number in spec, f"{where}: docs/spec.md has no §{number}"
                if item:
                    assert re.search(rf"^{item}\. ", spec[number][1], re.M), f"{where}: §{number} has no item {item}"
                cited += 1
    assert cited > 100  # the pattern really finds the citations


def test_links_into_the_spec_land_on_a_section():
    """`[spec §7](spec.md#7-policy-rules-files)`: the anchor GitHub makes of the section's title."""
    anchors = {re.sub(r"[^\w\- ]", "", f"{n}. {title}".lower()).replace(" ", "-")
               for n, (title, _) in sections(SPEC.read_text()).items()}
    links = [(path, m[1]) for path in citing_files() if path.suffix == ".md"
             for m in re.finditer(r"\bspec\.md#([\w\-]+)", path.read_text())]
    assert links
    assert [f"{p.relative_to(ROOT)}: #{a}" for p, a in links if a not in anchors] == []


def test_nothing_cites_the_shared_spec_as_if_it_were_here():
    """Upper-case SPEC citations pointed at a file a clone does not have; the shared SPEC.md is only
    named by its place beside the clone (this file names it on purpose, and is left out)."""
    stale = re.compile(r"\bSPEC §|\b[Tt]he SPEC\b|(?<!shared/)(?<!shared )(?<!shared `)\bSPEC\.md")
    found = [f"{p.relative_to(ROOT)}: {m[0]!r}" for p in citing_files() if p != Path(__file__)
             for m in stale.finditer(p.read_text())]
    assert not found


@shared
def test_the_spec_keeps_every_shared_section_under_its_number_and_title():
    ours = {n: title for n, (title, _) in sections(SPEC.read_text()).items()}
    theirs = {n: title for n, (title, _) in sections((SHARED / "SPEC.md").read_text()).items()}
    assert ours == theirs


@shared
def test_the_sections_keep_every_numbered_item_of_the_shared_ones():
    ours, theirs = sections(SPEC.read_text()), sections((SHARED / "SPEC.md").read_text())
    for number, (_, body) in theirs.items():
        items = re.findall(r"^(\d+)\. ", body, re.M)
        assert re.findall(r"^(\d+)\. ", ours[number][1], re.M) == items, f"§{number}"


def _files(directory: Path, pattern: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob(pattern)) if p.name != "README.md"}


@shared
def test_every_shared_vector_is_copied_unchanged():
    theirs, ours = _files(SHARED / "vectors", "*.json"), _files(VECTORS, "*.json")
    assert theirs
    missing = sorted(theirs.keys() - ours.keys())
    changed = sorted(name for name in theirs.keys() & ours.keys() if theirs[name] != ours[name])
    assert not missing and not changed, f"copy ../shared/vectors/*.json again: missing {missing}, changed {changed}"


@shared
def test_the_schemas_are_the_shared_ones():
    theirs, ours = _files(SHARED / "schemas", "*"), _files(SCHEMAS, "*")
    assert theirs
    assert sorted(ours) == sorted(theirs), "tests/schemas must hold exactly the files of ../shared/schemas"
    changed = sorted(name for name in theirs if theirs[name] != ours[name])
    assert not changed, f"copy ../shared/schemas again: {changed} differ"
