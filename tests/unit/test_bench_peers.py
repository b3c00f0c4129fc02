"""`python -m bench --peers` without the network: what runs, and the row a peer gets when it is not
installed or reminder-bridge cannot take its position yet (bench/alternatives.py,
bench/peer_install.py). Nothing here is timed."""
from __future__ import annotations

import json

import pytest

from bench import alternatives, peer_install
from bench.__main__ import PEERS, parse, scenarios
from bench.peers import REMINDER_LINE


def test_peers_come_after_the_scenarios_asked_for():
    assert scenarios(parse(["--peers", "--only", "stdio", "cold_start"])) == ["stdio", "cold_start", PEERS]
    assert scenarios(parse(["--only", "peers", "--peers-offline"])) == [PEERS]
    assert scenarios(parse([]))[-1] != PEERS


def test_peers_offline_needs_peers(capsys):
    with pytest.raises(SystemExit):
        parse(["--peers-offline"])
    assert "--peers-offline goes with --peers" in capsys.readouterr().err


def test_a_peer_not_cached_is_not_installed_offline_and_its_row_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("REMINDER_BRIDGE_BENCH_CACHE", str(tmp_path))
    why = peer_install.ensure("mcp-proxy", offline=True)
    assert why == f"not installed under {tmp_path} (installing is off: --peers-offline)"
    assert list(tmp_path.iterdir()) == []  # nothing was written, nothing fetched
    setting = alternatives.Setting("http://127.0.0.1:9", str(tmp_path), {"mcp-proxy": why})
    row = alternatives.measure("mcp-proxy", "HTTP → stdio", setting, 9, calls=1, seconds=0.1)
    assert row == {"scenario": "peers HTTP → stdio: mcp-proxy", "skipped": why}
    assert any(line.endswith(why) for line in alternatives.table([row]))


def test_a_node_peer_without_npm_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("REMINDER_BRIDGE_BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without npm
    assert peer_install.ensure("supergateway") == "needs npm and Node (apt-get install npm nodejs)"


def test_a_cached_peer_is_found_again_without_installing(tmp_path, monkeypatch):
    monkeypatch.setenv("REMINDER_BRIDGE_BENCH_CACHE", str(tmp_path))
    package = peer_install.PACKAGES["supergateway"]
    home = peer_install._home(package)
    (home / "node_modules" / ".bin").mkdir(parents=True)
    (home / "node_modules" / ".bin" / "supergateway").write_text("#!/bin/sh\n")
    (home / "installed.txt").write_text(f"{package.spec}\n4.0.0\n")
    found = peer_install.ensure("supergateway", offline=True)
    assert isinstance(found, peer_install.Installed) and found.version == "4.0.0"


def test_reminder_bridge_bridging_rows_wait_for_the_flags():
    flags = alternatives.bridge_flags()  # this build's `--help`
    setting = alternatives.Setting("http://127.0.0.1:9", "/tmp", flags=flags)
    for position, flag, command in (("HTTP → stdio", "upstream-command", "serve"), ("stdio → HTTP", "upstream", "stdio")):
        got = alternatives._reminder_bridge(position, setting)
        if flags[flag]:
            assert isinstance(got, alternatives.Launch)
        else:
            assert got == f"not available in this build (`reminder-bridge {command} --help` offers no --{flag})"
    assert isinstance(alternatives._reminder_bridge("stdio → stdio", setting), alternatives.Launch)


def test_what_reaches_a_host_is_counted_by_form():
    legacy = json.loads(REMINDER_LINE % (1, 1, 1, 1))
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "Build 2 failed"}}
    standard = {"jsonrpc": "2.0", "method": "notifications/reminder", "params": {"reminder": {"id": "r-3"}}}
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "ok\nBuild 4 failed; Build 5 failed"}]}}
    forms = alternatives.survived([legacy, log, standard, answer])
    assert forms == {"standard": 1, "legacy": 1, "log text": 1, "rendered": 2}
    assert alternatives.said({"standard": 0, "legacy": 0, "log text": 0, "rendered": 0}) == "none"
    assert alternatives.said(forms).startswith("1 standard, 1 legacy, intact")

