"""A fleet of `serve` replicas on one real Redis (spec §12): a client that lands on a different
replica request by request sees one proxy: one budget, one task queue, one session, one dedupe.

Every test starts two proxy processes with the same rules file (`[state] url` naming the test's
redis-server, a key prefix of its own) and alternates between them.
"""
from __future__ import annotations

import math
import time
import uuid

import aiohttp
import pytest

from tests.fault.test_serve import body, faulty, initialize, messages, metrics, post, sample
from tests.integration.test_http_a2a import agent_stats, message, rpc
from tests.integration.test_policy_stdio import FLOOD, PROXY, STANDARD_HOST as STDIO_HOST, flood
from tests.peers.flood_server import log_line
from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.peers.processes import Running, eventually, free_port, peer, proxy

STANDARD_HOST = {"reminders": {}}


def fleet(tmp_path, route: str, state: str, replicas: int = 2, admin: bool = False,
          on_unavailable: str = "open", key_prefix: str | None = None) -> list[Running]:
    rules = tmp_path / "rules.toml"
    key_prefix = key_prefix or f"rb-fleet-{uuid.uuid4().hex[:8]}:"
    rules.write_text(route + f'\n[state]\nurl = "{state}"\nkey_prefix = "{key_prefix}"\n'
                     f'timeout_ms = 200\non_unavailable = "{on_unavailable}"\n')
    out = []
    for _ in range(replicas):
        extra = ["--admin", f"127.0.0.1:{free_port()}"] if admin else []
        out.append(proxy("--rules", str(rules), *extra))
    return out


def admin_port(replica: Running) -> int:
    return int(replica.proc.args[replica.proc.args.index("--admin") + 1].rsplit(":", 1)[1])


def stop(*running: Running) -> None:
    for r in running:
        r.stop()


@pytest.fixture
def upstream():
    running = faulty()
    yield running
    running.stop()


def mcp_route(upstream: Running, extra: str = "") -> str:
    return (f'[routes.mcp]\nprotocol = "mcp"\npath = "/"\nupstream = "http://127.0.0.1:{upstream.port}"\n'
            f'{extra}')


async def open_session(port: int) -> dict:
    status, headers, _ = await post(port, initialize(0, STANDARD_HOST))
    assert status == 200
    return {"Mcp-Session-Id": headers["Mcp-Session-Id"]}


async def remind(port: int, session: dict, msg_id: int, count: int) -> list[dict]:
    status, _, raw = await post(port, body(msg_id, "remind", count=count), session)
    assert status == 200
    return messages(raw)


async def test_a_budget_is_one_budget_across_replicas_and_the_session_follows_the_client(tmp_path, upstream,
                                                                                          redis_url):
    """rate 60/min, burst 10: whichever replica a call lands on, the fleet lets through what one
    proxy would (burst plus what refilled meanwhile, within one token); and a session initialised
    on replica 1 gets standard reminders on replica 2, which never saw its handshake."""
    one, two = fleet(tmp_path, mcp_route(upstream, '[routes.mcp.budget]\nrate = 60\nburst = 10\nkey = "server"\n'),
                     redis_url, admin=True)
    try:
        session = await open_session(one.port)
        started = time.monotonic()
        delivered = 0
        for i in range(8):
            frames = await remind((one, two)[i % 2].port, session, i + 1, 3)
            assert frames[-1]["result"]["content"][0]["text"] == "reminded"  # ordinary traffic always flows
            standard = [f for f in frames if f.get("method") == "notifications/reminder"]
            legacy = [f for f in frames if f.get("method") == "notifications/message"]
            assert not legacy  # rewritten on both replicas: replica 2 knows the host speaks standard
            delivered += len(standard)
        refilled = int(time.monotonic() - started)  # one token a second
        assert 10 + refilled - 1 <= delivered <= 10 + refilled + 1, (delivered, refilled)
        assert delivered < 24  # without a shared budget each replica would have let 10+ through
        async with aiohttp.ClientSession() as http:  # each replica's console shows the fleet's bucket
            async with http.get(f"http://127.0.0.1:{admin_port(one)}/api/status") as r:
                [gauge] = (await r.json())["routes"][0]["budgets"]
        assert gauge["scope"] == "server:mcp" and gauge["tokens"] < 3 and gauge["limit"] == 10
    finally:
        stop(one, two)


async def test_a_session_id_no_replica_knows_still_starts_afresh(tmp_path, upstream, redis_url):
    """Shared records never merge sessions: an unknown id gets isolated state (host `none`)."""
    one, two = fleet(tmp_path, mcp_route(upstream), redis_url)
    try:
        await open_session(one.port)
        made_up = {"Mcp-Session-Id": "never-initialized"}
        frames = await remind(two.port, made_up, 1, 1)
        assert [f for f in frames if "method" in f] == []  # host `none`: held for the next tool result
    finally:
        stop(one, two)


@pytest.fixture
def legacy_agent():
    running = peer("tests.peers.a2a_sdk_agent", "legacy")
    yield running
    running.stop()


async def test_a2a_inject_on_one_replica_rides_on_the_message_another_forwards_once_fleet_wide(
        tmp_path, legacy_agent, redis_url):
    route = (f'[routes.agent]\nprotocol = "a2a"\npath = "/"\nupstream = "http://127.0.0.1:{legacy_agent.port}"\n'
             'host_dialect = "standard"\npeer_dialect = "legacy"\n')
    one, two = fleet(tmp_path, route, redis_url)
    try:
        task_id = (await rpc(one.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        inject = {"taskId": task_id, "reminder": {"body": "Tests are red on main.", "dedupeKey": "ci"}}
        first = (await rpc(one.port, "InjectTaskReminder", inject))[0]["result"]
        second = (await rpc(two.port, "InjectTaskReminder", {**inject, "reminder": {
            **inject["reminder"], "body": "Tests are green again."}}))[0]["result"]
        assert first["dedupedCount"] == 0 and second["dedupedCount"] == 1  # the dedupe key is fleet-wide
        assert (await agent_stats(legacy_agent))["reminders"] == []  # queued in Redis, not yet sent
        await rpc(two.port, "SendMessage", {"message": message("next", task_id)})
        received = (await agent_stats(legacy_agent))["reminders"]
        assert [r["body"] for r in received] == ["Tests are green again."]
        await rpc(one.port, "SendMessage", {"message": message("again", task_id)})
        assert len((await agent_stats(legacy_agent))["reminders"]) == 1  # delivered once, fleet-wide
    finally:
        stop(one, two)


# -- Redis away mid-run ------------------------------------------------------------------------------
async def readyz(port: int) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
            return r.status, await r.text()


async def test_open_mode_keeps_reminders_flowing_on_memory_budgets_and_recovers(tmp_path, upstream, redis_server):
    route = mcp_route(upstream, '[routes.mcp.budget]\nrate = 60\nburst = 100\nkey = "server"\n')
    one, two = fleet(tmp_path, route, redis_server.url, admin=True)
    try:
        session = await open_session(one.port)
        assert len([f for f in await remind(two.port, session, 1, 2) if f.get("method")]) == 2
        redis_server.kill()
        for i, replica in enumerate((one, two, one, two)):
            frames = await remind(replica.port, session, 10 + i, 2)
            assert frames[-1]["result"]["content"][0]["text"] == "reminded"  # no ordinary message lost
            assert [f["method"] for f in frames if f.get("method")] == ["notifications/reminder"] * 2
        status, text = await readyz(admin_port(one))
        assert status == 200 and "degraded" in text and "per-replica memory" in text
        scraped = await metrics(admin_port(one))
        assert sample(scraped, "reminder_bridge_state_degraded") == 1
        assert sample(scraped, "reminder_bridge_state_unavailable_ops_total", served_by="memory") >= 2
        assert any('"state_unavailable"' in line for line in one.stderr)
        assert sum('"state_unavailable"' in line for line in one.stderr) == 1  # logged once
        redis_server.start()  # same port, empty

        async def recovered() -> bool:
            texts = [(await readyz(admin_port(r)))[1] for r in (one, two)]
            return not any("degraded" in text for text in texts)
        await eventually(recovered, timeout=5)
        frames = await remind(two.port, session, 20, 1)
        assert [f["method"] for f in frames if f.get("method")] == ["notifications/reminder"]
    finally:
        stop(one, two)


async def test_closed_mode_refuses_reminder_requests_with_scope_state_and_never_ordinary_traffic(
        tmp_path, legacy_agent, redis_server):
    route = (f'[routes.agent]\nprotocol = "a2a"\npath = "/"\nupstream = "http://127.0.0.1:{legacy_agent.port}"\n'
             'host_dialect = "standard"\npeer_dialect = "legacy"\n[routes.agent.budget]\nrate = 600\nburst = 50\n')
    one, two = fleet(tmp_path, route, redis_server.url, on_unavailable="closed")
    try:
        task_id = (await rpc(one.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        inject = {"taskId": task_id, "reminder": {"body": "Deploy freeze from 5pm."}}
        assert "result" in (await rpc(two.port, "InjectTaskReminder", inject))[0]
        redis_server.kill()
        refused = (await rpc(one.port, "InjectTaskReminder", inject))[0]
        assert refused["error"]["code"] == -32000 and refused["error"]["data"] == {"scope": "state"}
        assert refused["error"]["message"] == "reminder state unavailable"
        answer = (await rpc(two.port, "SendMessage", {"message": message("carry on", task_id)}))[0]
        # ordinary traffic is never blocked: answered, not refused (a killed Redis refuses at once, so
        # a clock would tell nothing here, and load could break it)
        assert "result" in answer
        redis_server.start()

        async def injected() -> bool:
            return "result" in (await rpc(one.port, "InjectTaskReminder", inject))[0]
        await eventually(injected, timeout=5)
    finally:
        stop(one, two)


async def test_closed_mode_drops_reminder_notifications_per_over_and_keeps_the_answers(tmp_path, upstream,
                                                                                     redis_server):
    route = mcp_route(upstream, '[routes.mcp.budget]\nrate = 60\nburst = 100\nkey = "server"\nover = "drop"\n')
    one, two = fleet(tmp_path, route, redis_server.url, admin=True, on_unavailable="closed")
    try:
        session = await open_session(one.port)
        redis_server.kill()
        frames = await remind(one.port, session, 1, 3)  # the replica that holds the session: host standard
        assert frames[-1]["result"]["content"][0]["text"] == "reminded"
        assert [f for f in frames if f.get("method")] == []  # over = "drop": nothing unbudgeted reaches the host
        scraped = await metrics(admin_port(one))
        assert sample(scraped, "reminder_bridge_reminders_total", action="dropped") == 3
        assert sample(scraped, "reminder_bridge_state_unavailable_ops_total", served_by="refused") >= 3
    finally:
        stop(one, two)


def test_stdio_sidecars_share_one_budget_and_keep_every_other_frame_in_order(tmp_path, redis_url):
    """Two sidecars (`stdio --state`) around two copies of a flooding server: one bucket between
    them; every ordinary log line still arrives, byte for byte and in order, although each
    reminder waits on Redis and the frames behind it queue."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 60\nburst = 10\nkey = "server"\n'
                     f'[state]\nurl = "{redis_url}"\nkey_prefix = "rb-sidecars-{uuid.uuid4().hex[:8]}:"\n')
    pipes = [JsonRpcPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD) for _ in range(2)]
    try:
        for pipe in pipes:
            pipe.request("initialize", STDIO_HOST)
        started = time.monotonic()
        reminders = 0
        for round_ in range(3):
            for n, pipe in enumerate(pipes):
                frames, result = flood(pipe, 10 + round_, 1000 * n + 100 * round_, 100)
                logs = [f for f in frames if b'"logger":"flood"' in f]
                seqs = range(1000 * n + 100 * round_, 1000 * n + 100 * round_ + 100)
                assert logs == [log_line(seq).encode() for seq in seqs]
                reminders += sum(b"notifications/reminder" in f for f in frames)
                assert "result" in result
        refilled = math.floor(time.monotonic() - started)
    finally:
        for pipe in pipes:
            pipe.close()
    assert 10 <= reminders <= 10 + refilled + 1, (reminders, refilled)
