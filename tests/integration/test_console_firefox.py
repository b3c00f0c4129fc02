"""The console in a real Firefox (issue 14: "must work in a current Chromium and Firefox"):
headless Firefox driven over Marionette, its built-in remote protocol (tests/peers/marionette.py),
in front of a real `reminder-bridge serve` and real peers.

Firefox is the Debian package (`.ci/run` installs `firefox-esr`): $REMINDER_BRIDGE_FIREFOX,
else `firefox-esr` or `firefox` on the PATH.  No geckodriver and no Playwright build of Firefox.
The Chromium test (test_console_browser.py) covers the sign-in form, filters, pause and the
readiness verdict; this one signs in with the `?token=` link and checks what any browser must
show: the live feed, the budget gauge and hidden bodies (the shared helper), with no script error.
"""
from __future__ import annotations

import asyncio

import pytest

from tests import components
from tests.integration.test_console import TOKEN, Bridge
from tests.integration.test_console_browser import live_feed_budget_and_hidden_bodies
from tests.peers.marionette import Firefox, FirefoxPage

FIREFOX = components.FIREFOX.path()

pytestmark = pytest.mark.skipif(FIREFOX is None, reason=components.FIREFOX.missing())

# What the page loaded: every resource, with its HTTP status (0 where the browser does not say).
LOADS = "return performance.getEntriesByType('resource').map(e => [e.name, e.responseStatus || 0]);"


async def test_the_console_in_firefox(tmp_path):
    bridge = Bridge(tmp_path, budget="rate = 30\nburst = 5", token=TOKEN)  # a token every 2 s
    try:
        firefox = await asyncio.to_thread(Firefox, FIREFOX, width=1280, height=800)
        try:
            page = FirefoxPage(firefox)
            # -- a `?token=` link to the address from the log signs the browser in, then drops the token
            # from the address bar
            await asyncio.to_thread(firefox.navigate, f"{bridge.console_link()}?token={TOKEN}")
            await page.wait_for_selector('.route[data-route="ci"]', timeout=5000)
            assert firefox.url == bridge.base + "/"
            [cookie] = [c for c in firefox.command("WebDriver:GetCookies") if c["name"] == "reminder_bridge_console"]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] != TOKEN
            await page.wait_for_selector('#link[data-state="live"]', timeout=5000)
            assert (await page.inner_text('.route[data-route="ci"] .verdict')).startswith("no traffic yet")

            await live_feed_budget_and_hidden_bodies(page, bridge)

            assert await page.inner_text("#lost") == "0"
            assert not firefox.page_errors(bridge.base), firefox.page_errors(bridge.base)
            loads = firefox.execute(LOADS)
            assert loads and not [url for url, _ in loads if not url.startswith(bridge.base)], \
                f"the page loaded something from elsewhere: {loads}"
            assert not [(url, code) for url, code in loads if code >= 400], loads
        finally:
            await asyncio.to_thread(firefox.close)
    finally:
        bridge.stop()
