"""tests/unit mirrors bridge/, so a module's unit tests are found by its path: those of
bridge/<pkg>/<mod>.py are in tests/unit/<pkg>/test_<mod>.py, those of bridge/<mod>.py in
tests/unit/test_<mod>.py, and a file that tests a package as a whole is tests/unit/<pkg>/test_<pkg>.py
or test_<pkg>_<topic>.py. Only this direction is checked: a module need not have a test file yet,
but every test file names an existing module or package, and every folder an existing package."""
from __future__ import annotations

from pathlib import Path

from tests.paths import ROOT

BRIDGE = ROOT / "bridge"
UNIT = ROOT / "tests" / "unit"

#: test files that test no one module or package of bridge/, and why
EXCEPTIONS = {
    "test_contract.py": "the wire contract travels with the clone: docs/spec.md and the copies of ../shared",
    "test_vectors.py": "the contract's conversion vectors (tests/vectors) and their `python -m tests.vectors` runner",
    "dialects/test_schemas.py": "the contract's published schemas (tests/schemas) against what the proxy writes; "
                                "tests/integration/test_standalone_clone.py runs it by this path",
    "test_layers.py": "the import graph of the whole of bridge/",
    "test_private_imports.py": "every import in bridge/, against libraries' private modules",
    "test_bench_peers.py": "bench/ (alternatives.py, peer_install.py), not bridge/",
    "test_mirror.py": "this rule: the layout of tests/unit itself",
}


def names_a_module(test: Path) -> bool:
    """tests/unit/<dir>/test_<name>.py: <name> is a module or package of bridge/<dir>, or <dir>'s own
    name (alone or with a `_<topic>`) for a test of that package as a whole."""
    where = test.parent.relative_to(UNIT).parts
    name = test.stem.removeprefix("test_")
    package = BRIDGE.joinpath(*where)
    if (package / f"{name}.py").is_file() or (package / name).is_dir():
        return True
    return bool(where) and (name == where[-1] or name.startswith(f"{where[-1]}_"))


def unit_test_files() -> list[Path]:
    return sorted(UNIT.rglob("test_*.py"))


def test_every_unit_test_file_names_a_module_or_package_of_bridge():
    strays = [str(t.relative_to(UNIT)) for t in unit_test_files()
              if t.relative_to(UNIT).as_posix() not in EXCEPTIONS and not names_a_module(t)]
    assert strays == [], "move each to the path of the module it tests, or add it to EXCEPTIONS with why"


def test_every_unit_test_folder_is_a_package_of_bridge():
    folders = {t.parent.relative_to(UNIT) for t in UNIT.rglob("*.py")}
    assert sorted(str(f) for f in folders if not BRIDGE.joinpath(*f.parts).is_dir()) == []


def test_every_exception_is_a_file_the_rule_would_refuse():
    """An exception that names no file, or one the rule already accepts, would hide a later stray."""
    for path in EXCEPTIONS:
        assert (UNIT / path).is_file(), path
        assert not names_a_module(UNIT / path), path
