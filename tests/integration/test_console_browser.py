"""The console in a real browser (issue 14): headless Chromium driven by Playwright for Python,
in front of a real `reminder-bridge serve` and real peers.

Chromium is the Debian package (`.ci/run` installs it): $REMINDER_BRIDGE_CHROMIUM, else
`chromium` on the PATH; Playwright never downloads a browser here.  The test takes the
screenshot docs/console.md shows (1280x800): into the test's temporary folder, and into
docs/console.png when REMINDER_BRIDGE_SCREENSHOT=1 (to refresh the picture on purpose).
"""
from __future__ import annotations

import os
import time

import pytest

from tests import components
from tests.integration.test_console import (LEGACY_HOST_CAPS, ROOT, STANDARD_HOST_CAPS, TOKEN, Bridge, connect_host, remind,
                                rpc)
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
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            try:
                page = await browser.new_page(viewport={"width": 1280, "height": 800})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
                outside: list[str] = []
                page.on("request", lambda req: None if req.url.startswith(bridge.base) else outside.append(req.url))

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
                assert (await verdict.inner_text()).startswith("ready for enforce: yes — nothing seen")
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
                    "ready for enforce: no — 1 legacy host seen in the last 24 h (legacy-ide)"
                assert await page.locator('.route[data-route="ci"] .bar[data-side="host"] .seg.legacy').count() == 1

                # -- a screenshot for docs/console.md, with a little of everything on it
                legacy_session = await connect_host(bridge.url, "legacy-ide", LEGACY_HOST_CAPS)
                before = await decisions_counted(page)
                await rpc(bridge.url, 40, "remind", {"count": 2}, legacy_session)
                await eventually(lambda: _counted_at_least(page, before + 2), timeout=5)  # a status poll after them
                shot = DOCS_SCREENSHOT if os.environ.get("REMINDER_BRIDGE_SCREENSHOT") == "1" else tmp_path / "console.png"
                await page.screenshot(path=str(shot), full_page=False)
                assert shot.stat().st_size > 10_000  # a page was drawn

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
                await browser.close()
    finally:
        bridge.stop()
    assert DOCS_SCREENSHOT.stat().st_size < 1_000_000  # the picture in the docs stays small


async def _below(page, limit: float) -> float | None:
    value = await tokens(page)
    return value if value < limit else None


async def _above(page, limit: float) -> float | None:
    value = await tokens(page)
    return value if value >= limit else None


async def decisions_counted(page) -> int:
    """The route's decisions as its action counts show them (the status poll draws them)."""
    return sum(map(int, await page.locator('.route[data-route="ci"] .actions .count b').all_inner_texts()))


async def _counted_at_least(page, n: int) -> bool:
    return await decisions_counted(page) >= n


async def _text_is_not(page, selector: str, text: str) -> bool:
    return (await page.inner_text(selector)) != text
