"""`reminder-bridge demo` runs fast from an installed package and shows real rewritten traffic."""
import io
import os
import subprocess
import sys
import time
from pathlib import Path

from bridge.demo import run_demo
from tests.paths import ROOT



def demo_command() -> list[str]:
    """The installed console script beside this interpreter, else `python -m bridge`."""
    script = Path(sys.executable).with_name("reminder-bridge")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bridge"]


def test_demo_shows_rewritten_traffic_for_all_three_protocols_and_claude_code_channels():
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    started = time.monotonic()
    # wide enough that no message is wrapped, so whole JSON fragments can be matched
    proc = subprocess.run(demo_command() + ["demo", "--width", "4000"], cwd=ROOT, env=env, capture_output=True, timeout=60)
    elapsed = time.monotonic() - started
    out = proc.stdout.decode("utf-8")

    assert proc.returncode == 0, out[-2000:] + proc.stderr.decode("utf-8", "replace")
    assert elapsed < 10, f"demo took {elapsed:.1f} s"
    assert proc.stderr == b"", "the recorder's log must not reach stderr"
    # MCP: capability and reminder notification rewritten, the ordinary log untouched.
    assert '"capabilities":{"tools":{},"logging":{},"reminders":' in out
    assert "notifications/reminder" in out
    assert '"logger":"fs"' in out
    # ACP: standard inject downgraded with an explicit mode; Harn's emitted form flattened.
    assert "session/remind" in out and '"dedupe_key":"ci:main"' in out and '"mode":"finish_step"' in out
    assert '"sessionUpdate":"reminder_emitted","reminderId":' in out
    # A2A: card at the proxy, reminderUpdate frame, inject answered by the proxy after GetTask.
    assert '"url":"http://127.0.0.1:8080/a2a"' in out
    assert "reminderUpdate" in out
    assert "InjectTaskReminder" in out and '"method":"GetTask"' in out
    assert '"code":-32004,"message":"Task task-1 is in terminal state: TASK_STATE_COMPLETED' in out  # after it ended
    # Claude Code with channels: capability and paragraph offered, the reminder pushed as a channel event.
    assert '"capabilities":{"tools":{},"logging":{},"experimental":{"claude/channel":{}}}' in out
    assert '"instructions":"Events in <channel source=\\"workspace\\"> tags are ambient reminders' in out
    assert '"method":"notifications/claude/channel","params":{"content":"src/app.py changed externally' in out
    assert "= unchanged" in out
    for protocol in ("MCP", "Claude Code", "ACP", "A2A"):
        summary = [line for line in out.splitlines() if line.startswith(f"{protocol}  ") and "messages:" in line]
        assert summary and summary[0].endswith("| ok"), summary


def test_demo_fits_the_requested_width():
    for width in (100, 140):
        buf = io.StringIO()
        assert run_demo(width=width, out=buf) == 0
        lines = buf.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        assert any(len(line) > width - 10 for line in lines)  # the width is actually used


def test_demo_fails_when_the_proxy_rewrites_nothing(monkeypatch):
    """The demo checks its own traffic: with every route at stage `observe` nothing is rewritten."""
    import bridge.demo
    from bridge.rules import RouteSettings

    monkeypatch.setattr(bridge.demo, "RouteSettings", lambda: RouteSettings(stage="observe"))
    buf = io.StringIO()
    assert run_demo(width=200, out=buf) == 1
    summaries = [line for line in buf.getvalue().splitlines() if "messages:" in line]
    assert len(summaries) == 4 and all("MISSING" in line for line in summaries)
