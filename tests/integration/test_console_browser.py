"""The console in a real browser (issues 14 and 22): headless Chromium driven by Playwright for
Python, in front of a real `reminder-bridge serve` and real peers.

Chromium is the Debian package (`.ci/run` installs it): $REMINDER_BRIDGE_CHROMIUM, else
`chromium` on the PATH; Playwright never downloads a browser here.  The charts test takes the
screenshot docs/console.md shows (1280x900): into the test's temporary folder, and into
docs/console.png when REMINDER_BRIDGE_SCREENSHOT=1 (to refresh the picture on purpose).
"""
from __future__ import annotations

import contextlib
import os
import re
import time

import pytest

from tests import components
from tests.integration.test_console import (LEGACY_HOST_CAPS, ROOT, STANDARD_HOST_CAPS, TOKEN, Bridge, connect_host,
                                            remind, rpc)
from tests.peers.processes import eventually

CHROMIUM = components.CHROMIUM.path()
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
DOCS_SCREENSHOT = ROOT / "docs" / "console.png"

try:
    from playwright.async_api import async_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    async_playwright = None

pytestmark = [
    pytest.mark.skipif(async_playwright is None, reason="Playwright for Python is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(CHROMIUM is None, reason=components.CHROMIUM.missing()),
]


@contextlib.asynccontextmanager
async def chromium_page(bridge: Bridge, *, height: int):
    """A headless Chromium page 1280 px wide, with what it logged as an error and what it asked of
    any address but the admin port's: (page, errors, outside)."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": height})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            outside: list[str] = []
            page.on("request", lambda req: None if req.url.startswith(bridge.base) else outside.append(req.url))
            yield page, errors, outside
        finally:
            await browser.close()


def reminder_ids(answer: list[dict]) -> list[str]:
    return [m["params"]["reminder"]["id"] for m in answer if m.get("method") == "notifications/reminder"]


async def tokens(page) -> float:
    return float(await page.get_attribute('.route[data-route="ci"] .gauge', "data-tokens"))


async def live_feed_budget_and_hidden_bodies(page, bridge: Bridge) -> str:
    """What every browser must show, on a console signed in to a fresh `Bridge` whose route `ci` has
    `rate = 30, burst = 5`: each decision in the feed within 2 s, the budget gauge dropping as
    reminders are charged (a refusal over the burst shown as `rate_limited`) and refilling, and no
    body on the page.  ``page`` is a Playwright page, or anything with the same few coroutines
    (tests/peers/marionette.py's FirefoxPage).  Returns the MCP host session it opened."""
    assert await tokens(page) == 5.0

    # -- every decision shows in the feed within 2 s; the budget gauge drops
    session = await connect_host(bridge.url, "modern-ide", STANDARD_HOST_CAPS)
    for round_ in range(2):
        answer = await remind(bridge.url, session, 2, msg_id=10 + round_)
        for rid in reminder_ids(answer):
            started = time.monotonic()
            await page.wait_for_selector(f'#feed tbody tr[data-reminder-id="{rid}"]', timeout=2000)
            assert time.monotonic() - started < 2.0
    await eventually(lambda: _below(page, 2.5), timeout=3)
    await remind(bridge.url, session, 3, msg_id=20)  # over the burst: refused by the budget, and shown as such
    await page.wait_for_selector('#feed tbody tr[data-action="rate_limited"]', timeout=2000)
    low = await eventually(lambda: _below(page, 1.5), timeout=3)
    # ... and recovers as the bucket refills (30/min: a token every 2 s)
    await eventually(lambda: _above(page, low + 2), timeout=8)

    # -- bodies stay hidden by default (the peer's bodies are "reminder N")
    assert "reminder 0" not in await page.content()
    assert await page.is_hidden("th.body-col")
    assert "hidden" in await page.inner_text("#bodies-note")
    return session


async def test_the_console_in_chromium(tmp_path):
    bridge = Bridge(tmp_path, budget="rate = 30\nburst = 5", token=TOKEN)  # a token every 2 s
    try:
        async with chromium_page(bridge, height=800) as (page, errors, outside):
            # -- the token is required: a login form, a wrong token refused, the right one in
            await page.goto(bridge.base + "/")
            assert await page.is_visible("form.login-box input[type=password]")
            assert await page.locator("#routes").count() == 0
            await page.fill("#token", "not-the-token")
            await page.click("button[type=submit]")
            await page.wait_for_selector(".login-error")
            assert "Wrong token" in await page.inner_text(".login-error")
            assert await page.locator("#routes").count() == 0
            assert not [c for c in await page.context.cookies() if c["name"] == "reminder_bridge_console"]
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_selector('.route[data-route="ci"]', timeout=5000)
            [cookie] = [c for c in await page.context.cookies() if c["name"] == "reminder_bridge_console"]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] != TOKEN
            assert page.url == bridge.base + "/"
            await page.wait_for_selector('#link[data-state="live"]', timeout=5000)
            errors.clear()  # the login page's 401 answers are logged as failed loads; none from here on
            verdict = page.locator('.route[data-route="ci"] .verdict')
            assert (await verdict.inner_text()).startswith("no traffic yet")
            session = await live_feed_budget_and_hidden_bodies(page, bridge)

            # -- filters and pause
            await page.select_option("#filter-action", "rate_limited")
            visible = page.locator("#feed tbody tr:not([hidden])")
            assert await visible.count() >= 1
            assert {await visible.nth(i).get_attribute("data-action") for i in range(await visible.count())} \
                == {"rate_limited"}
            await page.select_option("#filter-action", "")
            await page.click("#pause")
            rows = await page.locator("#feed tbody tr").count()
            await eventually(lambda: _above(page, 1.0), timeout=4)  # a token for the next one
            answer = await remind(bridge.url, session, 1, msg_id=30)
            await eventually(lambda: _text_is_not(page, "#buffered", "0"), timeout=3)
            assert await page.locator("#feed tbody tr").count() == rows
            await page.click("#pause")
            await page.wait_for_selector(f'#feed tbody tr[data-reminder-id="{reminder_ids(answer)[0]}"]',
                                         timeout=2000)
            assert await page.inner_text("#lost") == "0"

            # -- the readiness verdict changes when a legacy host connects
            await connect_host(bridge.url, "legacy-ide", LEGACY_HOST_CAPS)
            await page.wait_for_function(
                "() => document.querySelector('.route[data-route=\"ci\"] .verdict').textContent"
                ".startsWith('ready for enforce: no')", timeout=3000)
            assert await verdict.inner_text() == \
                "ready for enforce: no — 1 legacy host seen since start-up (legacy-ide)"
            assert await page.locator('.route[data-route="ci"] .bar[data-side="host"] .seg.legacy').count() == 1


            # -- a host name with control characters shows them escaped, never raw (issue 19)
            await connect_host(bridge.url, "evil\x1b]0;owned\x07\u202e", LEGACY_HOST_CAPS)
            await page.wait_for_function(
                "() => document.querySelector('.route[data-route=\"ci\"] .verdict').textContent"
                ".includes('evil')", timeout=3000)
            shown = await verdict.inner_text() + await page.inner_text('.route[data-route="ci"] .clients')
            assert r"evil\x1b]0;owned\x07\u202e" in shown and r"evil\x1b]0;owned\x07\u202e (legacy)" in shown
            assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
            assert not errors, errors
            assert not outside, f"the page loaded something from elsewhere: {outside}"
    finally:
        bridge.stop()


async def test_the_charts_in_chromium_update_while_the_page_is_open(tmp_path):
    """Issue 22, "a console with time in it": per-minute charts drawn as inline <svg> by the page
    itself, changing with more traffic without a reload; the official SDK's stateless 2026-07-28
    client shown as one host however many requests it makes; "no traffic yet" on a route nothing
    reached; "since" stamps; labels a newcomer reads; and the screenshot docs/console.md shows."""
    from mcp import Client
    from mcp.types import Implementation

    from tests.peers.mcp_host import Reminders

    bridge = Bridge(tmp_path, budget='rate = 30\nburst = 5\nover = "coalesce"', idle=("docs",),
                    upstream="tests.peers.mcp_legacy_http")
    try:
        async with chromium_page(bridge, height=900) as (page, errors, outside):
            answer = await page.goto(bridge.base + "/")
            policy = (await answer.all_headers())["content-security-policy"]  # the charts draw under it
            assert "default-src 'none'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
            ci, docs = '.route[data-route="ci"]', '.route[data-route="docs"]'
            await page.wait_for_selector(f"{docs} .verdict", timeout=5000)
            for card in (ci, docs):
                assert await page.inner_text(f"{card} .verdict") == (
                    "no traffic yet — no host has connected and no reminder has passed since the route started")
                assert await page.get_attribute(f"{card} .verdict", "class") == "verdict unseen"
            # "since" stamps on every count: the proxy, the hosts, the reminders, the charts, the feed
            assert re.fullmatch(r"\d\d:\d\d \(\d+ s\)", await page.inner_text("#since"))
            assert re.fullmatch(r"seen since \d\d:\d\d:\d\d \(start-up\), each counted once",
                                await page.inner_text(f"{ci} .mixes .since"))
            assert re.fullmatch(r"reminders since \d\d:\d\d:\d\d \(the route's start\)",
                                await page.inner_text(f"{ci} .col > .since"))
            assert "counting since" in await page.inner_text(f"{ci} .charts h4")
            assert re.fullmatch(r"\d\d:\d\d:\d\d", await page.inner_text("#opened"))
            # the charts are the page's own inline <svg>, with text alternatives
            actions = f'{ci} figure[data-series="actions"] svg.chart'
            refusals = f'{ci} figure[data-series="refusals"] svg.chart'
            budget = f'{ci} figure[data-series="budget-server"] svg.chart'
            assert "no reminder in the last hour" in await page.get_attribute(actions, "aria-label")
            assert await page.locator(f"{actions} rect.stack").count() == 0
            await page.evaluate("window.sameDocument = true")  # gone if the page ever reloads

            # -- the official SDK pinned to 2026-07-28: every request is a handshake, and one host
            sdk = Reminders()
            async with Client(bridge.url, mode="2026-07-28", extensions=[sdk], cache=None,
                              client_info=Implementation(name="sdk-host", version="2.3.0")) as client:
                for path in ("a.py", "b.py", "c.py"):
                    await client.call_tool("touch_file", {"path": path})
            assert len(sdk.received) == 3
            await eventually(lambda: _chart_total(page, actions, at_least=3), timeout=5)
            assert await page.locator(f"{actions} rect.stack").count() >= 1
            assert "Reminders per minute, by action, the last 60 minutes: rewritten 3" in \
                await page.get_attribute(actions, "aria-label")
            assert await page.locator(f"{budget} circle.point").count() >= 2  # read at start-up, and now
            standard = f'{ci} .bar[data-side="host"] .seg.standard'
            assert await page.get_attribute(standard, "data-count") == "1"
            handshakes = re.search(r"^standard: 1 host in the window \((\d+) handshakes\)",
                                   await page.get_attribute(standard, "title"))
            assert handshakes and int(handshakes[1]) >= 4  # discovery and three calls: one host
            assert (await page.inner_text(f"{ci} .verdict")).startswith(
                "ready for enforce: yes — no legacy host since start-up: 1 host (1 standard)")

            # -- more traffic from a 2025-11-25 host, over the burst: every chart moves, on the same page
            session = await connect_host(bridge.url, "modern-ide", STANDARD_HOST_CAPS)
            for n in range(6):
                await rpc(bridge.url, 10 + n, "tools/call", {"name": "touch_file", "arguments": {"path": f"{n}.py"}},
                          session)
            await eventually(lambda: _chart_total(page, actions, at_least=9), timeout=5)
            await eventually(lambda: _chart_total(page, refusals, at_least=1), timeout=5)
            assert "server budget" in await page.get_attribute(refusals, "aria-label")
            assert await page.locator(f"{refusals} rect.stack").count() >= 1
            await eventually(lambda: _now_below(page, budget, 2.0), timeout=5)  # the budget line fell
            assert await page.evaluate("window.sameDocument") is True
            held = await eventually(lambda: _held(page, ci, "over budget, waiting for tokens"), timeout=5)
            assert re.fullmatch(r"held now: \d+ over budget, waiting for tokens.*", held), held
            assert await page.inner_text(f"{docs} .pending") == "held now: nothing"
            assert (await page.inner_text(f"{docs} .verdict")).startswith("no traffic yet")
            feed = await page.inner_text("#feed tbody")
            assert "– → –" not in feed and "the handshake's capabilities" in feed, feed  # modern-ide's initialize
            reminders = await page.locator("#feed tbody td:nth-child(6)").all_inner_texts()  # the reminder column
            assert "–" not in reminders, reminders

            # -- the era mix (issue 21): one host on each MCP revision, passed as they came (no bridge)
            await page.wait_for_function(
                "() => document.querySelector('.route[data-route=\"ci\"] .era-verdict').textContent"
                ".includes('(1 on 2025-11-25, 1 on 2026-07-28)')", timeout=3000)
            assert await page.inner_text(f"{ci} .era-verdict") == (
                "no era bridge on this route — 2 hosts since start-up (1 on 2025-11-25, 1 on 2026-07-28), each "
                "passed to the server in its own era")
            assert await page.get_attribute(f"{ci} .era-verdict", "class") == "era-verdict idle"
            for era in ("2025-11-25", "2026-07-28"):
                assert await page.get_attribute(f'{ci} .bar[data-era-side="host"] .seg.era-{era}', "data-count") == "1"
            # the server answered modern-ide's initialize (a pinned 2026-07-28 host asks no discover)
            assert await page.get_attribute(f'{ci} .bar[data-era-side="server"] .seg.era-2025-11-25',
                                            "data-count") == "1"
            assert "requests bridged since the route's start: none" in await page.inner_text(f"{ci} .bridged")
            assert await page.inner_text(f"{docs} .era-verdict") == "no era bridge on this route — no host seen " \
                "since start-up"

            # -- a screenshot for docs/console.md, with a little of everything on it
            await connect_host(bridge.url, "legacy-ide", LEGACY_HOST_CAPS)
            await page.wait_for_function(
                "() => document.querySelector('.route[data-route=\"ci\"] .verdict').textContent"
                ".startsWith('ready for enforce: no')", timeout=3000)
            shot = DOCS_SCREENSHOT if os.environ.get("REMINDER_BRIDGE_SCREENSHOT") == "1" else tmp_path / "console.png"
            await page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000  # a page was drawn
            assert not errors, errors
            assert not outside, f"the page loaded something from elsewhere: {outside}"
    finally:
        bridge.stop()
    assert DOCS_SCREENSHOT.stat().st_size < 1_000_000  # the picture in the docs stays small


async def _chart_total(page, selector: str, at_least: int) -> bool:
    """Whether the chart's bars add up to ``at_least`` (its `data-total`)."""
    return int(await page.get_attribute(selector, "data-total")) >= at_least


async def _now_below(page, chart: str, limit: float) -> bool:
    """Whether the budget chart's level now (its hollow point) is under ``limit``."""
    return float(await page.get_attribute(f"{chart} circle.point.now", "data-value")) < limit


async def _held(page, card: str, words: str) -> str | None:
    text = await page.inner_text(f"{card} .pending")
    return text if words in text else None


async def _below(page, limit: float) -> float | None:
    value = await tokens(page)
    return value if value < limit else None


async def _above(page, limit: float) -> float | None:
    value = await tokens(page)
    return value if value >= limit else None


async def _text_is_not(page, selector: str, text: str) -> bool:
    return (await page.inner_text(selector)) != text
