"""The wire contract travels with the clone: docs/spec.md, tests/vectors and tests/schemas.

Every `spec §N` cited anywhere in the repository names a section of docs/spec.md. The copies are
checked against the shared contract by `python -m tests.contract_sync`, a CI step run where a
checkout has it beside the clone; here only that check's own logic is tested, on a copy made to
differ, so no test needs (or skips for) anything beside the clone.
"""
from __future__ import annotations

import re
from pathlib import Path

from tests.contract_sync import SHARED_SPEC, problems, sections
from tests.paths import ROOT, SHARED, SPEC

#: a citation: "spec §7", "spec §2, §7", "spec §3–§5", "spec §8.3"
CITATION = re.compile(r"\bspec (§\d+(?:\.\d+)?(?:(?:, |–|-| and )§\d+(?:\.\d+)?)*)")
#: where citations live: docs, READMEs, rules files, code and tests
CITING = ("README.md", "docs/**/*.md", "rules/**/*.toml", "bridge/**/*.py", "tests/**/*.py", "tests/**/*.md",
          "tests/vectors/*.json", "bench/**/*.py", "bench/**/*.md")


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
    named by its place beside the clone (this file and tests/contract_sync.py name it on purpose, and
    are left out)."""
    stale = re.compile(r"\bSPEC §|\b[Tt]he SPEC\b|(?<!shared/)(?<!shared )(?<!shared `)\bSPEC\.md")
    found = [f"{p.relative_to(ROOT)}: {m[0]!r}" for p in citing_files() if p not in (Path(__file__), ROOT / "tests" / "contract_sync.py")
             for m in stale.finditer(p.read_text())]
    assert not found


def test_the_sync_check_names_a_section_a_vector_and_a_schema_that_differ(tmp_path):
    """`tests.contract_sync` against a shared contract made to differ from the copies: a renamed
    section, a changed vector and a missing schema are each named; the copies themselves agree."""
    shared = tmp_path / "shared"
    (shared / "vectors").mkdir(parents=True)
    (shared / "schemas").mkdir()
    (shared / SHARED_SPEC).write_text(SPEC.read_text().replace("## 1. ", "## 1. Renamed ", 1))
    (shared / "vectors" / "x.json").write_text("{}")
    (shared / "schemas" / "not-copied.json").write_text("{}")
    found = problems(shared)
    assert any("section" in p for p in found)
    assert any("vectors" in p and "x.json" in p for p in found)
    assert any("schemas" in p and "not-copied.json" in p for p in found)
    if SHARED.is_dir():  # a CI checkout: the real copies agree with the shared contract
        assert problems(SHARED) == []
