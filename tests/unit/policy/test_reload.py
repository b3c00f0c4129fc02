"""`RulesFile` (spec §7): a rules file is read again only when it changed, however it was replaced
(written in place, touched, renamed over, deleted), validated whole, and either loaded with the
running routes' new settings or refused with every problem as `reminder-bridge check` prints it."""
from __future__ import annotations

import os
from pathlib import Path

from bridge.policy.reload import Loaded, Refused, RulesFile

ROUTE = '[routes.fs]\nprotocol = "mcp"\nstage = "{stage}"\n'


def watched(tmp_path: Path, stage: str = "observe") -> tuple[RulesFile, Path]:
    path = tmp_path / "rules.toml"
    path.write_text(ROUTE.format(stage=stage))
    return RulesFile(path, lambda rules: {name: rules.routes[name] for name in ("fs",) if name in rules.routes}), path


def stage_of(result) -> str:
    assert isinstance(result, Loaded), result
    return result.routes["fs"].stage


def test_an_unchanged_file_is_not_read_again(tmp_path):
    rules, _ = watched(tmp_path)
    assert rules.poll() is None and rules.poll() is None


def test_a_change_is_loaded_once_with_the_running_routes_new_settings(tmp_path):
    rules, path = watched(tmp_path)
    path.write_text(ROUTE.format(stage="translate") + '[routes.other]\nprotocol = "acp"\n')
    result = rules.poll()
    assert stage_of(result) == "translate" and set(result.routes) == {"fs"}  # what `select` gives
    assert set(result.rules.routes) == {"fs", "other"}
    assert rules.poll() is None


def test_a_file_renamed_over_the_old_one_is_seen_even_with_the_same_size_and_time(tmp_path):
    """How editors and Kubernetes ConfigMaps replace a file: a new inode, the rest alike."""
    rules, path = watched(tmp_path, stage="observe")
    before = os.stat(path)
    replacement = tmp_path / "rules.toml.new"
    replacement.write_text(ROUTE.format(stage="enforce"))  # "observe" and "enforce": the same length
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, path)
    assert stage_of(rules.poll()) == "enforce"


def test_a_broken_file_is_refused_with_every_problem_as_check_prints_them(tmp_path):
    rules, path = watched(tmp_path)
    path.write_text('[routes.fs]\nprotocol = "mcp"\nstage = "translat"\n\n[routes.fs.budget]\nrate = -1\n')
    result = rules.poll()
    assert isinstance(result, Refused)
    assert [line.split(": ", 2)[:2] for line in result.lines] == [[f"{path}:3", "routes.fs.stage"],
                                                                 [f"{path}:6", "routes.fs.budget.rate"]]
    assert rules.poll() is None  # refused once, not again at every poll
    path.write_text(ROUTE.format(stage="dual"))  # fixed: loaded
    assert stage_of(rules.poll()) == "dual"


def test_a_file_that_goes_away_is_refused_once_and_loaded_when_it_is_back(tmp_path):
    rules, path = watched(tmp_path)
    path.unlink()
    result = rules.poll()
    assert isinstance(result, Refused) and "cannot read rules file" in result.lines[0]
    assert rules.poll() is None
    path.write_text(ROUTE.format(stage="translate"))
    assert stage_of(rules.poll()) == "translate"


def test_a_file_that_is_not_text_is_refused(tmp_path):
    rules, path = watched(tmp_path)
    path.write_bytes(b"\xff\xfe\x00[routes]\n")
    assert isinstance(rules.poll(), Refused)


def test_reload_reads_the_file_now_whether_or_not_it_changed(tmp_path):
    rules, _ = watched(tmp_path, stage="dual")
    assert stage_of(rules.reload()) == "dual"
    assert rules.poll() is None  # a reload counts as a look
