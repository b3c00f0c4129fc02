"""`reminder-bridge demo` runs from an installed package and shows real rewritten traffic a newcomer
can read: JSON laid out within the terminal's width (never cut inside a token), what changed
marked by JSON path with the reason, what the legacy channel is, and messages and reminders
counted apart."""
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.demo import run_demo
from tests.paths import ROOT

CONVERSATIONS = ("MCP", "Claude Code", "ACP", "A2A")


def demo_command() -> list[str]:
    """The installed console script beside this interpreter, else `python -m bridge`."""
    script = Path(sys.executable).with_name("reminder-bridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bridge"]


def json_blocks(lines: list[str]) -> list[tuple[str, object]]:
    """Every message the demo printed, as (its label, the JSON parsed back from its lines): a label
    line `  LABEL:` then lines indented by 4; and every value laid out below a change's head
    (`- PATH:` then lines indented further, the first after `was `/`now ` for a `~`). A line cut
    inside a token would not parse."""
    blocks, n = [], 0
    while n < len(lines):
        line = lines[n]
        label = re.fullmatch(r"  (\S.*):", line)
        head = re.fullmatch(r"( {4,})[~+\-] .*:", line)
        if (label and label.group(1) != "what changed") or head:
            depth = len(head.group(1)) + 4 if head else 4
            body, n = [], n + 1
            while n < len(lines) and lines[n].startswith(" " * depth) and not re.match(r"\s*[~+\-→] ", lines[n]):
                text = lines[n].strip()
                if head and re.match(r"(was|now) ", text):
                    if body:
                        blocks.append((line.strip(), json.loads(" ".join(body))))
                    text, body = text[4:], []
                body.append(text)
                n += 1
            blocks.append(((label.group(1) if label else line.strip()), json.loads(" ".join(body))))
            continue
        n += 1
    return blocks


def messages(blocks: list[tuple[str, object]]) -> list[dict]:
    return [value for _, value in blocks if isinstance(value, dict) and value.get("jsonrpc") == "2.0"]


@pytest.fixture(scope="module")
def shown() -> list[str]:
    """The demo as a newcomer runs it, in a 100-column terminal."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "100"}
    proc = subprocess.run(demo_command() + ["demo"], cwd=ROOT, env=env, capture_output=True, timeout=60)
    out = proc.stdout.decode("utf-8")
    assert proc.returncode == 0, out[-2000:] + proc.stderr.decode("utf-8", "replace")
    assert proc.stderr == b"", "the recorder's log must not reach stderr"
    return out.splitlines()


def test_the_demo_fits_a_100_column_terminal_and_never_cuts_a_json_token(shown):
    assert max(len(line) for line in shown) <= 100
    assert sum(len(line) > 90 for line in shown) > 20  # the width is really used
    blocks = json_blocks(shown)  # every message parses back: no line broke inside a token
    assert len(messages(blocks)) >= 45


def test_the_demo_explains_the_legacy_channel_and_the_markers(shown):
    text = " ".join(shown)
    assert "The legacy channel is Harn's: Harn, the agent runtime that introduced ambient reminders" in text
    assert "~ changed, + added, - removed, → moved or renamed" in text


def test_the_changed_fields_are_marked_by_json_path_with_the_reason(shown):
    changed = [line.strip() for line in shown]
    # MCP: the legacy log message becomes notifications/reminder; the reminder object moves
    assert '~ method: "notifications/message" → "notifications/reminder"' in changed
    assert "→ params._meta.harn.reminder → params.reminder" in changed
    source = changed.index('~ source → _meta."reminder-bridge/original".source: "stdlib_provider" → "provider"')
    reason = " ".join(changed[source + 1:source + 4])
    assert reason.startswith('("stdlib_provider" is Harn\'s name for "provider" (spec §2)')
    assert '- params.level: "info"' in changed and '- params.logger: "harn.reminder"' in changed
    # Claude Code channels: the same alias, into the event's meta
    assert '~ params._meta.harn.reminder.source → params.meta.source: "stdlib_provider" → "provider"' in changed
    # ACP: the downgrade renames to Harn's snake_case and always writes a mode
    assert "→ params.dedupeKey → params.dedupe_key" in changed
    assert changed[changed.index("→ params.dedupeKey → params.dedupe_key") + 1] == "(Harn spells it snake_case)"
    assert '+ params.mode: "finish_step"' in changed
    assert '~ params.update._meta.harn.reminder.source → params.update.source: "bridge" → "host"' in changed
    # A2A: the card points at the proxy
    assert '~ supportedInterfaces[0].url: "http://10.0.0.7:9000/a2a" → "http://127.0.0.1:8080/a2a"' in changed


def test_the_demo_shows_real_rewritten_traffic_for_all_three_protocols_and_claude_code_channels(shown):
    blocks = json_blocks(shown)
    sent = messages(blocks)
    by_method: dict[str, list[dict]] = {}
    for msg in sent:
        by_method.setdefault(str(msg.get("method")), []).append(msg)
    # MCP: capability and reminder notification rewritten, the ordinary log untouched
    assert any("reminders" in (m.get("result") or {}).get("capabilities", {}) for m in sent)
    reminder = by_method["notifications/reminder"][0]["params"]["reminder"]
    assert reminder["dedupeKey"] == "file_changed:src/app.py"
    assert any(m["params"].get("logger") == "fs" for m in by_method["notifications/message"])
    # ACP: standard inject downgraded with an explicit mode; Harn's emitted form flattened
    remind = by_method["session/remind"][0]["params"]
    assert (remind["dedupe_key"], remind["mode"]) == ("ci:main", "finish_step")
    updates = [m["params"]["update"] for m in by_method["session/update"]]
    assert any(u["sessionUpdate"] == "reminder_emitted" and "reminderId" in u for u in updates)
    # A2A: the card at the proxy, a reminderUpdate frame, the inject answered by the proxy after GetTask
    cards = [value for _, value in blocks if isinstance(value, dict) and "supportedInterfaces" in value]
    assert cards[-1]["supportedInterfaces"][0]["url"] == "http://127.0.0.1:8080/a2a"
    assert any("reminderUpdate" in (m.get("result") or {}) for m in sent)
    assert by_method["GetTask"] and by_method["InjectTaskReminder"]
    refused = [m["error"] for m in sent if (m.get("error") or {}).get("code") == -32004]
    assert refused[0]["message"].startswith("Task task-1 is in terminal state: TASK_STATE_COMPLETED")
    # Claude Code with channels: capability and paragraph offered, the reminder pushed as a channel event
    offered = [m["result"] for m in sent if "instructions" in (m.get("result") or {})]
    assert offered[0]["capabilities"] == {"tools": {}, "logging": {}, "experimental": {"claude/channel": {}}}
    assert offered[0]["instructions"].startswith('Events in <channel source="workspace"> tags are ambient')
    event = by_method["notifications/claude/channel"][0]["params"]
    assert event["content"] == "src/app.py changed externally; re-read it before editing."
    assert any("unchanged, byte for byte" in line for line in shown)


def test_the_summary_counts_messages_and_reminders_apart(shown):
    end = shown[[n for n, line in enumerate(shown) if line.startswith("━")][-1] + 1:]
    assert end == [
        "MCP          7 messages: 2 rewritten, 5 passed unchanged, 0 dropped",
        "             1 reminder: 1 rewritten",
        "             ok",
        "Claude Code  7 messages: 2 rewritten, 5 passed unchanged, 0 dropped",
        "             1 reminder: 1 sent as a channel event",
        "             ok",
        "ACP          10 messages: 4 rewritten, 6 passed unchanged, 0 dropped",
        "             1 reminder: 1 rewritten twice",
        "             ok",
        "A2A          12 messages: 7 rewritten, 5 passed unchanged, 0 dropped",
        "             3 reminders: 1 rewritten; 1 queued, then attached to the next message; 1 refused",
        "             ok",
    ]


@pytest.mark.parametrize("width", [60, 100, 140])
def test_the_demo_fits_the_requested_width(width):
    buf = io.StringIO()
    assert run_demo(width=width, out=buf) == 0
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= width
    assert any(len(line) > width - 10 for line in lines)  # the width is actually used
    assert len(messages(json_blocks(lines))) >= 45


def strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


def test_long_strings_are_shortened_to_fit_and_a_wide_terminal_shows_them_whole(shown):
    assert any(s.endswith("…") for _, value in json_blocks(shown) for s in strings(value))
    buf = io.StringIO()
    assert run_demo(width=4000, out=buf) == 0
    assert not any(s.endswith("…") for _, value in json_blocks(buf.getvalue().splitlines()) for s in strings(value))


def test_demo_fails_when_the_proxy_rewrites_nothing(monkeypatch):
    """The demo checks its own traffic: with every route at stage `observe` nothing is rewritten."""
    import bridge.demo
    from bridge.rules import RouteSettings

    monkeypatch.setattr(bridge.demo, "RouteSettings", lambda: RouteSettings(stage="observe"))
    buf = io.StringIO()
    assert run_demo(width=200, out=buf) == 1
    verdicts = [line.strip() for line in buf.getvalue().splitlines() if line.strip().startswith(("ok", "MISSING"))]
    assert len(verdicts) == 4 and all(v.startswith("MISSING: ") for v in verdicts)
