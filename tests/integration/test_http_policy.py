"""Policy over HTTP (spec §7): budgets answer with Retry-After, and `serve` reloads its rules
without dropping sessions."""
from __future__ import annotations


import aiohttp
import pytest
from mcp import Client

from tests.peers.processes import eventually, peer, proxy
from tests.integration.test_http_a2a import message, rpc
from tests.peers.mcp_host import Reminders


@pytest.fixture
def a2a_agent():
    running = peer("tests.peers.a2a_sdk_agent", "none")  # pushes no reminders of its own
    yield running
    running.stop()


async def test_request_over_budget_gets_the_structured_error_and_retry_after(tmp_path, a2a_agent):
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.agent]\nprotocol = "a2a"\npath = "/"\nupstream = "http://127.0.0.1:{a2a_agent.port}"\n'
                     'host_dialect = "standard"\npeer_dialect = "none"\n'
                     '[routes.agent.budget]\nrate = 6\nburst = 1\nkey = "server"\n')
    bridge = proxy("--rules", str(rules))
    try:
        task_id = (await rpc(bridge.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        inject = {"jsonrpc": "2.0", "id": 1, "method": "InjectTaskReminder",
                  "params": {"taskId": task_id, "reminder": {"body": "one"}}}
        async with aiohttp.ClientSession(headers={"A2A-Version": "1.0"}) as http:
            async with http.post(f"http://127.0.0.1:{bridge.port}/a2a", json=inject) as first:
                assert "result" in await first.json()
            async with http.post(f"http://127.0.0.1:{bridge.port}/a2a", json={**inject, "id": 2}) as second:
                answer = await second.json()
                retry_after = second.headers.get("Retry-After")
        error = answer["error"]
        assert error["code"] == -32000 and error["message"] == "reminder budget exceeded"
        assert error["data"]["limit"] == 1 and error["data"]["remaining"] == 0
        assert 9000 <= error["data"]["retryAfterMs"] <= 10000  # 6 per minute: one token every 10 s
        assert retry_after == "10"
    finally:
        bridge.stop()


async def logged(bridge, event: str) -> bool:
    return any(event in line for line in bridge.stderr)


async def test_serve_reload_flips_observe_to_translate_without_dropping_the_session(tmp_path):
    server = peer("tests.peers.mcp_legacy_http")
    rules = tmp_path / "rules.toml"
    route = f'[routes.mcp]\nprotocol = "mcp"\npath = "/"\nupstream = "http://127.0.0.1:{server.port}"\n'
    rules.write_text(route + 'stage = "observe"\n')
    bridge = proxy("--rules", str(rules))
    try:
        ext = Reminders()
        async with Client(f"http://127.0.0.1:{bridge.port}/mcp", mode="legacy", extensions=[ext]) as client:
            await client.call_tool("touch_file", {"path": "before.py"})
            await client.call_tool("echo", {"text": "sync"})
            assert ext.received == []  # observe: the legacy log message went through untouched
            rules.write_text(route + 'stage = "translate"\n')
            await eventually(lambda: logged(bridge, "rules_reloaded"))
            await client.call_tool("touch_file", {"path": "after.py"})  # same session, same connection
            await client.call_tool("echo", {"text": "sync"})
        assert [r["dedupeKey"] for r in ext.received] == ["file_changed:after.py"]
        rules.write_text(route + 'stage = "translat"\n')
        await eventually(lambda: logged(bridge, "reload_refused"))
        refused = next(line for line in bridge.stderr if "reload_refused" in line)
        assert "routes.mcp.stage" in refused and "translat" in refused
    finally:
        bridge.stop()
        server.stop()
