"""Shared state that fails takes the configured path (issue 19, findings 3, 4 and 6; spec §12).

Against a real `redis-server` that refuses in the ways operators meet: the ACL docs/deploy.md
recommends (read out of the page, so page and test cannot drift), that ACL without `TIME`, a full
Redis (`maxmemory`) and a read-only replica, at start-up and under traffic, with real `serve` and
`stdio` processes. Whatever Redis answers, a reminder is never passed on untranslated: it is
translated on memory budgets (`open`), or refused or dropped (`closed`), counted, and `/readyz` says
why. And a queued reminder is bounded as a whole before any state is touched.
"""
from __future__ import annotations

import json
import re
import uuid

import pytest
import redis

from bridge.state import BucketCharge, open_state
from tests.paths import ROOT
from tests.fault.test_serve import metrics, sample
from tests.integration.test_fleet import (admin_port, fleet, legacy_agent, open_session, readyz,  # noqa: F401
                                          remind, upstream)  # legacy_agent, upstream: fixtures
from tests.integration.test_http_a2a import message, rpc
from tests.integration.test_policy_stdio import FLOOD, PROXY, STANDARD_HOST, flood
from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.peers.processes import Running, eventually, free_port

pytestmark = pytest.mark.fault

DEPLOY = ROOT / "docs" / "deploy.md"
FAULTS = ("oom", "readonly")


# -- the ACL of docs/deploy.md, applied as the page says -------------------------------------------------

class Acl:
    """The `ACL SETUSER` line docs/deploy.md recommends, and the user, password and key prefix it names."""

    def __init__(self) -> None:
        lines = [line.strip() for line in DEPLOY.read_text().splitlines() if line.strip().startswith("ACL SETUSER ")]
        assert len(lines) == 1, f"docs/deploy.md should recommend one ACL, found {lines}"
        self.args = lines[0].split()[1:]  # SETUSER user rule...
        self.user = self.args[1]
        [self.password] = [a[1:] for a in self.args if a.startswith(">")]
        [pattern] = [a[1:] for a in self.args if a.startswith("~")]
        assert pattern.endswith("*")
        self.prefix = pattern[:-1]

    def apply(self, server, without: str | None = None) -> str:
        """Set the user up on ``server`` (``without``: minus one rule); the URL that logs in as it."""
        args = [a for a in self.args if without is None or a.lower() != without]
        admin = redis.Redis.from_url(server.url)
        admin.execute_command("ACL", "SETUSER", self.user, "reset")
        admin.execute_command("ACL", *args)
        admin.close()
        return f"redis://{self.user}:{self.password}@127.0.0.1:{server.port}/0"


def fault(server, kind: str, on: bool = True) -> None:
    """Make ``server`` refuse writes the way a full Redis (OOM) or a read-only replica (READONLY) does."""
    admin = redis.Redis.from_url(server.url)
    if kind == "oom":
        admin.config_set("maxmemory", 1 if on else 0)
    elif on:  # the replica of a master that is not there: reads are served, writes refused
        admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
    else:
        admin.execute_command("REPLICAOF", "NO", "ONE")
    admin.close()


# -- a `serve` route on the test's Redis ---------------------------------------------------------------

def serve_on(tmp_path, route: str, url: str, mode: str, prefix: str | None = None) -> Running:
    """One `serve` replica with an admin port, its `[state]` on ``url``."""
    [replica] = fleet(tmp_path, route, url, replicas=1, admin=True, on_unavailable=mode, key_prefix=prefix)
    return replica


def budgeted_mcp(upstream: Running, burst: int) -> str:
    return (f'[routes.mcp]\nprotocol = "mcp"\npath = "/"\nupstream = "http://127.0.0.1:{upstream.port}"\n'
            f'[routes.mcp.budget]\nrate = 1\nburst = {burst}\nkey = "server"\n')


def split(frames: list[dict]) -> tuple[list[dict], list[dict], dict]:
    """(standard reminders, legacy reminders, the tool result) of one `remind` answer."""
    standard = [f for f in frames if f.get("method") == "notifications/reminder"]
    legacy = [f for f in frames if f.get("method") == "notifications/message"]
    return standard, legacy, frames[-1]


def state_lines(running: Running, event: str = "state_unavailable") -> list[dict]:
    return [json.loads(line) for line in running.stderr if f'"event": "{event}"' in line
            or f'"event":"{event}"' in line]


async def recovers(bridge: Running, session: dict) -> None:
    """Once Redis serves every command again, /readyz says ready and a reminder is translated."""
    async def ready() -> bool:
        return await readyz(admin_port(bridge)) == (200, "ready\n")
    await eventually(ready, timeout=10)
    standard, legacy, _ = split(await remind(bridge.port, session, 99, 1))
    assert (len(standard), len(legacy)) == (1, 0)


async def failures(running: Running, cause: str | None = None) -> float:
    labels = {"cause": cause} if cause else {}
    return sample(await metrics(admin_port(running)), "reminder_bridge_state_failures_total", **labels)


# -- finding 3: the documented ACL, and that ACL without TIME ------------------------------------------

async def test_the_documented_acl_lets_every_command_the_proxy_needs_run(redis_server, upstream, tmp_path):
    """With the ACL applied as docs/deploy.md writes it, budgets, queues and records all work: the
    start-up check passes, and a budget of 3 lets 3 of 10 reminders through, translated."""
    acl = Acl()
    url = acl.apply(redis_server)
    state = open_state(url, key_prefix=acl.prefix, on_unavailable="closed")
    try:
        assert await state.check(), state.degraded_reason()
        assert await state.charge([BucketCharge("acl:server:x", 60, 3)]) is None
        assert await state.levels([BucketCharge("acl:server:x", 60, 3)]) == [pytest.approx(2.0, abs=0.1)]
        assert await state.queue_push("acl:task:t", "r1", "{}", dedupe_key="k", limit=4, ttl_s=60) == ([], [])
        assert await state.queue_len("acl:task:t") == 1 and await state.queue_take("acl:task:t") == ["{}"]
        await state.put_record("acl:mcp-session:s", {"era": "x"}, 60)
        assert await state.get_record("acl:mcp-session:s", ttl_s=60) == {"era": "x"}
        assert not state.degraded and state.stats()["refused_ops"] == 0
    finally:
        await state.close()

    bridge = serve_on(tmp_path, budgeted_mcp(upstream, 3), url, "closed", acl.prefix)
    try:
        session = await open_session(bridge.port)
        standard, legacy, result = split(await remind(bridge.port, session, 1, 10))
        assert result["result"]["content"][0]["text"] == "reminded"
        assert (len(standard), len(legacy)) == (3, 0)  # the budget holds, and what passes is translated
        assert await readyz(admin_port(bridge)) == (200, "ready\n")
        assert await failures(bridge) == 0
    finally:
        bridge.stop()


async def test_the_documented_acl_lets_the_proxy_load_its_scripts_again_after_redis_lost_them(redis_server):
    """A Redis restart (here `SCRIPT FLUSH`, as an operator would) empties the script cache: the
    next `EVALSHA` gets NOSCRIPT and redis-py's `register_script` sends `SCRIPT LOAD`, which the
    documented ACL must allow. Without that rule the replica is degraded, by cause `noperm`, never
    passed through."""
    acl = Acl()
    state = open_state(acl.apply(redis_server), key_prefix=acl.prefix, on_unavailable="closed")
    bucket = BucketCharge("acl:server:flush", 60, 3)
    try:
        assert await state.charge([bucket]) is None
        admin = redis.Redis.from_url(redis_server.url)
        admin.script_flush()
        assert await state.charge([bucket]) is None and await state.queue_take("acl:task:t") == []
        assert not state.degraded and state.stats()["failures"] == {}

        acl.apply(redis_server, without="+script|load")
        admin.script_flush()
        admin.close()
        assert not await state.check()
        assert state.stats()["failures"] == {"noperm": 1} and "noperm" in state.degraded_reason()
    finally:
        await state.close()


async def test_an_acl_without_time_refuses_budgeted_reminders_and_readyz_stays_degraded(
        redis_server, upstream, tmp_path):
    """The reproduction of finding 3: 10 of 10 reminders went to the host untranslated and uncharged
    while /readyz said ready. Now, under `closed`, none reaches the host, each is counted, and /readyz
    stays degraded for as long as the budget script is refused, then recovers once the ACL is fixed."""
    acl = Acl()
    url = acl.apply(redis_server, without="+time")
    bridge = serve_on(tmp_path, budgeted_mcp(upstream, 3), url, "closed", acl.prefix)
    try:
        session = await open_session(bridge.port)
        standard, legacy, result = split(await remind(bridge.port, session, 1, 10))
        assert result["result"]["content"][0]["text"] == "reminded"  # ordinary traffic flows
        assert (len(standard), len(legacy)) == (0, 0)  # never passed on untranslated
        scraped = await metrics(admin_port(bridge))
        assert sample(scraped, "reminder_bridge_reminders_total", action="dropped") == 10
        assert sample(scraped, "reminder_bridge_state_unavailable_ops_total", served_by="refused") >= 1
        assert sample(scraped, "reminder_bridge_state_degraded") == 1
        seen = await failures(bridge)
        assert seen >= 1
        status, text = await readyz(admin_port(bridge))
        assert status == 200 and text.startswith("ready (degraded: ") and "can't run this command" in text

        async def probed_again() -> bool:  # the recovery probe runs the budget script too, and fails
            return await failures(bridge) >= seen + 2
        await eventually(probed_again, timeout=10)
        assert (await readyz(admin_port(bridge)))[1].startswith("ready (degraded: ")
        [line] = state_lines(bridge)  # one line for the outage, not one per failure
        assert line["on_unavailable"] == "closed" and line["cause"] == "error"

        acl.apply(redis_server)  # the documented ACL: the next probe passes
        await recovers(bridge, session)
    finally:
        bridge.stop()


def a2a_route(agent: Running, budget: bool = True) -> str:
    return (f'[routes.agent]\nprotocol = "a2a"\npath = "/"\nupstream = "http://127.0.0.1:{agent.port}"\n'
            'host_dialect = "standard"\npeer_dialect = "legacy"\n'
            + ('[routes.agent.budget]\nrate = 600\nburst = 50\n' if budget else ''))


@pytest.mark.parametrize("refusal", ["acl-without-time", *FAULTS])
async def test_a_reminder_request_gets_the_state_error_whatever_redis_refuses(
        refusal, redis_server, legacy_agent, tmp_path):
    """`closed`: an `InjectTaskReminder` gets -32000 with `scope = "state"` (it went to the agent
    untranslated before), counted by cause; a `SendMessage` still goes through."""
    acl = Acl()
    url = acl.apply(redis_server, without="+time") if refusal == "acl-without-time" else redis_server.url
    bridge = serve_on(tmp_path, a2a_route(legacy_agent), url, "closed", acl.prefix)
    try:
        task_id = (await rpc(bridge.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        if refusal in FAULTS:
            fault(redis_server, refusal)
        inject = {"taskId": task_id, "reminder": {"body": "Deploy freeze from 5pm."}}
        [answer] = await rpc(bridge.port, "InjectTaskReminder", inject)
        assert answer.get("error") == {"code": -32000, "message": "reminder state unavailable",
                                       "data": {"scope": "state"}}, answer
        assert "result" in (await rpc(bridge.port, "SendMessage", {"message": message("go on", task_id)}))[0]
        assert await failures(bridge, "error" if refusal == "acl-without-time" else refusal) >= 1
    finally:
        bridge.stop()


# -- finding 4: OOM and READONLY, at start-up and under traffic ----------------------------------------

@pytest.mark.parametrize("mode", ["open", "closed"])
@pytest.mark.parametrize("when", ["start", "traffic"])
@pytest.mark.parametrize("kind", FAULTS)
async def test_a_full_or_read_only_redis_takes_the_configured_path(kind, when, mode, redis_server, upstream,
                                                                  tmp_path):
    """A Redis that refuses writes: `serve` starts (it exited with a traceback), logs one clear
    line, /readyz says degraded and why, and 30 reminders are translated on memory budgets (`open`)
    or dropped (`closed`), never passed untouched (30 of 30 were). Lifting the fault recovers."""
    if when == "start":
        fault(redis_server, kind)
    bridge = serve_on(tmp_path, budgeted_mcp(upstream, 1000), redis_server.url, mode)
    try:
        session = await open_session(bridge.port)
        if when == "traffic":
            standard, _, _ = split(await remind(bridge.port, session, 1, 2))
            assert len(standard) == 2 and not state_lines(bridge)
            fault(redis_server, kind)
        standard, legacy, result = split(await remind(bridge.port, session, 2, 30))
        assert result["result"]["content"][0]["text"] == "reminded"
        assert legacy == []
        assert len(standard) == (30 if mode == "open" else 0)

        async def logged() -> list[dict]:  # written before the answer, read off stderr on another thread
            return state_lines(bridge)

        [line] = await eventually(logged, timeout=10)
        assert line["cause"] == kind and line["on_unavailable"] == mode and line["level"] == "error"
        status, text = await readyz(admin_port(bridge))
        assert status == 200 and text.startswith("ready (degraded: shared state unavailable") and kind in text
        assert await failures(bridge, kind) >= 1

        fault(redis_server, kind, on=False)
        await recovers(bridge, session)
    finally:
        bridge.stop()


@pytest.mark.parametrize("mode", ["open", "closed"])
@pytest.mark.parametrize("kind", FAULTS)
def test_stdio_starts_degraded_on_a_full_or_read_only_redis(kind, mode, redis_server, tmp_path):
    """`stdio --state` crashed at start-up; now the child is wrapped as ever, one line says why
    shared state is away, and the child's reminders take the configured path."""
    fault(redis_server, kind)
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.ci]\nprotocol = "mcp"\n[routes.ci.budget]\nrate = 60\nburst = 100\nkey = "server"\n'
                     f'[state]\nurl = "{redis_server.url}"\nkey_prefix = "rb-{uuid.uuid4().hex[:8]}:"\n'
                     f'timeout_ms = 200\non_unavailable = "{mode}"\n')
    pipe = JsonRpcPipe(PROXY + ["--rules", str(rules), "--"] + FLOOD)
    try:
        init, _ = pipe.request("initialize", STANDARD_HOST)
        assert "result" in init
        frames, result = flood(pipe, 2, 0, 5)
        assert result["result"]["content"][0]["text"] == "flooded 0..4"
        assert sum(b'"logger":"flood"' in f for f in frames) == 5  # every ordinary frame
        assert not any(b"harn.reminder" in f for f in frames)  # never a reminder untranslated
        assert sum(b"notifications/reminder" in f for f in frames) == (5 if mode == "open" else 0)
    finally:
        pipe.close()
    lines = [json.loads(line) for line in bytes(pipe.stderr).decode().splitlines()
             if '"state_unavailable"' in line]
    assert len(lines) == 1 and lines[0]["cause"] == kind, bytes(pipe.stderr).decode()[-2000:]
    assert "Traceback" not in bytes(pipe.stderr).decode()


# -- finding 6: a queued reminder is bounded as a whole ------------------------------------------------

def used_memory(server) -> int:
    admin = redis.Redis.from_url(server.url)
    try:
        return int(admin.info("memory")["used_memory"])
    finally:
        admin.close()


@pytest.mark.parametrize("field, limit", [("dedupeKey", "max_dedupe_key_bytes"), ("id", "max_id_bytes"),
                                          ("notes", "max_reminder_bytes")])
async def test_a_huge_field_is_refused_naming_it_before_any_state_is_touched(field, limit, redis_server,
                                                                            legacy_agent, tmp_path):
    """64 injects with 2 MiB dedupe keys grew Redis by 322 MiB for one task. Each now gets -32602
    naming the field and the limit, Redis does not grow, and a normal inject is still queued."""
    bridge = serve_on(tmp_path, a2a_route(legacy_agent, budget=False), redis_server.url, "closed")
    try:
        task_id = (await rpc(bridge.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        before = used_memory(redis_server)
        for i in range(8):
            huge = {"body": "Deploy freeze from 5pm.", "id": f"r{i}", field: f"{i}" + "x" * (2 * 1024 * 1024)}
            [answer] = await rpc(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": huge})
            error = answer.get("error") or {}
            assert error.get("code") == -32602 and f"`{field}`" in error.get("message", ""), answer
            assert error["data"]["limit"] == limit
        assert used_memory(redis_server) - before < 1024 * 1024  # 8 × 2 MiB were never stored
        [ok] = await rpc(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": {
            "body": "Deploy freeze from 5pm.", "dedupeKey": "freeze"}})
        assert ok["result"]["dedupedCount"] == 0
    finally:
        bridge.stop()


def documented_queue_bound() -> int:
    """The most one task queue takes in Redis at the default limits, as docs/deploy.md states it."""
    found = re.search(r"at most \*\*([\d.]+) MiB\*\* per task queue", DEPLOY.read_text())
    assert found, "docs/deploy.md should state what one task queue costs at most"
    return int(float(found.group(1)) * 1024 * 1024)


async def test_a_task_queue_filled_to_every_limit_stays_within_the_size_deploy_md_states(
        redis_server, legacy_agent, tmp_path):
    """64 reminders as large as the default limits allow (id, dedupe key, and unknown fields up to
    the whole-reminder bound) fit in what docs/deploy.md says one task queue costs."""
    from bridge.dialects.a2a import A2AStandard
    from bridge.model import encoded_size
    from bridge.rules import Trust

    trust = Trust()
    prefix = f"rb-{uuid.uuid4().hex[:8]}:"
    bridge = serve_on(tmp_path, a2a_route(legacy_agent, budget=False), redis_server.url, "closed", prefix)
    try:
        task_id = (await rpc(bridge.port, "SendMessage", {"message": message("start")}))[0]["result"]["task"]["id"]
        for i in range(trust.max_pending_per_session):
            reminder = {"id": f"{i:04d}" + "i" * (trust.max_id_bytes - 4), "body": "b" * trust.max_body_bytes,
                        "dedupeKey": f"{i:04d}" + "k" * (trust.max_dedupe_key_bytes - 4), "pad": ""}
            _, decoded = A2AStandard.decode_inject({"taskId": task_id, "reminder": reminder})
            reminder["pad"] = "p" * (trust.max_reminder_bytes - encoded_size(decoded))  # exactly at the bound
            [answer] = await rpc(bridge.port, "InjectTaskReminder", {"taskId": task_id, "reminder": reminder})
            assert "result" in answer, answer
        admin = redis.Redis.from_url(redis_server.url)
        keys = admin.keys(f"{prefix}q*")
        assert len(keys) == 2  # the task's id list and its items
        assert admin.llen(next(k for k in keys if b":qm:" not in k)) == trust.max_pending_per_session
        held = sum(admin.memory_usage(k, samples=0) for k in keys)
        admin.close()
        assert held <= documented_queue_bound(), held
    finally:
        bridge.stop()
