"""The outbox on `serve` against several hosts, proxy kills and a locked store (issue 19, findings
1, 2, 5 and 11): real `reminder-bridge serve` processes, real upstream MCP servers (the bundled
legacy server behind Streamable HTTP, the SDK outbox server keeping one outbox per session), and
raw aiohttp hosts that hold their own `Mcp-Session-Id` (so one can resume it after a restart
without initialising again, as a host whose proxy died does).

Each test failed before the fix: the served outbox and the pulled rows were the route's, a new
session took the undelivered rows of any other, rows counted as delivered when handed to a session
with no stream open, and a tool call waited on a locked store for SQLite's 5 s timeout per reminder.
"""
from __future__ import annotations

import asyncio
import collections
import json
import random
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.paths import ROOT
from tests.peers import outbox_server as upstream_outbox
from tests.peers.processes import Running, eventually, free_port, peer, proxy

pytestmark = pytest.mark.fault

ACCEPT = "application/json, text/event-stream"
OUTBOX = "bridge://reminders"


class Host:
    """One MCP 2025-11-25 host over raw HTTP: its session id, the messages it got (on answers and
    on its GET stream, which it opens and closes at will), and nothing shared with any other."""

    def __init__(self, port: int, capabilities: dict | None = None, name: str = "host"):
        self.port = port
        self.capabilities = capabilities if capabilities is not None else {}
        self.name = name
        self.session: str | None = None
        self.received: list[dict] = []
        self.ids = iter(range(1, 1_000_000))
        self._listening: asyncio.Task | None = None
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def headers(self, **extra: str) -> dict[str, str]:
        out = {"Accept": ACCEPT, "Content-Type": "application/json", **extra}
        if self.session is not None:
            out |= {"Mcp-Session-Id": self.session, "Mcp-Protocol-Version": "2025-11-25"}
        return out

    async def start(self) -> None:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": self.capabilities,
            "clientInfo": {"name": self.name, "version": "1"}}}
        async with self.http.post(self.url, json=init, headers=self.headers()) as r:
            assert r.status == 200, await r.text()
            self.session = r.headers["Mcp-Session-Id"]
            self._keep(await r.read())
        await self.notify("notifications/initialized")

    async def notify(self, method: str) -> None:
        async with self.http.post(self.url, json={"jsonrpc": "2.0", "method": method}, headers=self.headers()) as r:
            assert r.status in (200, 202), await r.text()

    async def request(self, method: str, timeout: float | None = None, **params) -> dict:
        """The answer to one request; what came before it on its stream is kept in ``received``."""
        msg_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        async with self.http.post(self.url, json=body, headers=self.headers(),
                                  timeout=aiohttp.ClientTimeout(total=timeout or 60)) as r:
            got = self._keep(await r.read())
        [answer] = [m for m in got if m.get("id") == msg_id]
        return answer

    async def tool(self, name: str, timeout: float | None = None, **arguments) -> dict:
        return await self.request("tools/call", timeout, name=name, arguments=arguments)

    async def read(self, query: str = "") -> dict:
        answer = await self.request("resources/read", uri=OUTBOX + query)
        if "error" in answer:
            return answer
        return json.loads(answer["result"]["contents"][0]["text"])

    def listen(self) -> None:
        """Open the session's GET stream (unless one is open): what the proxy pushes on its own arrives there."""
        if self._listening is None or self._listening.done():
            self._listening = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        try:
            async with self.http.get(self.url, headers={k: v for k, v in self.headers().items()
                                                        if k != "Content-Type"}) as r:
                assert r.status == 200, await r.text()
                async for line in r.content:
                    if line.startswith(b"data:"):
                        self.received.append(json.loads(line[5:]))
        except (aiohttp.ClientError, ConnectionError):
            pass  # the proxy died under the stream

    async def stream_ended(self) -> None:
        """The GET stream's end, once the proxy went away: everything it carried has been read."""
        if self._listening is not None:
            await asyncio.wait_for(self._listening, 10)
            self._listening = None

    async def stop_listening(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            await asyncio.gather(self._listening, return_exceptions=True)
            self._listening = None

    def _keep(self, raw: bytes) -> list[dict]:
        text = raw.strip()
        found = [json.loads(text)] if text.startswith(b"{") else \
            [json.loads(line[5:]) for line in raw.splitlines() if line.startswith(b"data:")]
        self.received += [m for m in found if "method" in m]
        return found

    def reminders(self) -> list[dict]:
        """Reminders pushed to this host (`notifications/reminder`), in order."""
        return [m["params"]["reminder"] for m in self.received if m.get("method") == "notifications/reminder"]

    def event_ids(self) -> list[str]:
        """The outbox events among them, by their event id."""
        return [r["_meta"]["reminder-bridge/event"]["event"]["eventId"] for r in self.reminders()]

    async def close(self) -> None:
        await self.stop_listening()
        await self.http.close()


def event(event_id: str) -> dict:
    return {"eventId": event_id, "name": "mail.received", "timestamp": "2026-09-01T18:42:10Z",
            "data": {"id": event_id}, "_meta": {"ai.nimblebrain/notification": {"title": f"mail {event_id}"}}}


def in_tool_result(answer: dict) -> list[str]:
    """The outbox events rendered into a tool result (a host with no reminder support gets them there)."""
    texts = [c["text"] for c in answer["result"]["content"] if c.get("type") == "text"]
    return [t.split("mail ", 1)[1].split("<", 1)[0] for text in texts for t in text.split("\n") if "mail " in t]


def bridge(rules: Path, *args: str) -> Running:
    return proxy("--rules", str(rules), *args)


async def until(check, timeout: float = 20.0):
    """The first truthy ``check()`` (it reads what the hosts received so far)."""
    async def probe():
        return check()

    return await eventually(probe, timeout)


# -- finding 1: the served outbox -------------------------------------------------------------------
def serve_rules(tmp_path: Path, port: int, extra: str = "") -> Path:
    rules = tmp_path / "serve.toml"
    rules.write_text(f'[routes.fs]\nprotocol = "mcp"\npath = "/mcp"\nupstream = "http://127.0.0.1:{port}/mcp"\n'
                     f'[routes.fs.serve_outbox]\nresource = "{OUTBOX}"\nstore = "{tmp_path / "proxy.sqlite3"}"\n'
                     + extra)
    return rules


async def test_two_sessions_on_a_route_never_read_each_others_served_outbox(tmp_path):
    upstream = peer("tests.peers.mcp_legacy_http")
    admin = free_port()
    proxied = bridge(serve_rules(tmp_path, upstream.port), "--admin", f"127.0.0.1:{admin}")
    a, b = Host(proxied.port, name="a"), Host(proxied.port, name="b")
    try:
        await a.start()
        await b.start()
        a_boot, b_boot = (await a.read())["cursor"], (await b.read())["cursor"]
        assert (await a.tool("touch_file", path="a-secret.py"))["result"]["content"][0]["text"] == "touched a-secret.py"
        everything = a_boot.rpartition(".")[0] + ".0"  # the store's own id, from the start of time
        for cursor in (b_boot, everything):
            seen = await b.read(f"?cursor={cursor}")
            assert seen["events"] == [], seen
        mine = await a.read(f"?cursor={a_boot}")
        assert [e["data"]["reminder"]["dedupeKey"] for e in mine["events"]] == ["file_changed:a-secret.py"]
        assert (await a.read(f"?cursor={everything}"))["events"] == mine["events"]
        for n in range(20):  # session ids nobody was given: each an empty outbox of its own, holding no room
            b.session = f"made-up-{n}"
            assert (await b.read(f"?cursor={everything}"))["events"] == []
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{admin}/api/status") as r:
                assert (await r.json())["routes"][0]["sessions"] == 2
    finally:
        await a.close()
        await b.close()
        proxied.stop()
        upstream.stop()


async def modern_call(port: int, method: str, params: dict, headers: dict | None = None) -> dict:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers={
                "Accept": ACCEPT, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, **(headers or {})}) as r:
            raw = await r.read()
    found = [json.loads(raw)] if raw.strip().startswith(b"{") else \
        [json.loads(line[5:]) for line in raw.splitlines() if line.startswith(b"data:")]
    return next(m for m in found if m.get("id") == 7)


async def test_a_request_with_no_session_reads_only_its_identitys_outbox_or_is_told_what_to_configure(tmp_path):
    upstream = peer("tests.peers.mcp_legacy_http")
    unnamed = bridge(serve_rules(tmp_path, upstream.port))
    try:
        refused = await modern_call(unnamed.port, "resources/read", {"uri": OUTBOX})
        assert refused["error"]["code"] == -32600
        assert 'routes.fs.serve_outbox.identity = "header:<name>"' in refused["error"]["message"]
    finally:
        unnamed.stop()
    (tmp_path / "proxy.sqlite3").unlink()
    named = bridge(serve_rules(tmp_path, upstream.port, 'identity = "header:authorization"\n'))
    alice, bob = {"Authorization": "Bearer alice"}, {"Authorization": "Bearer bob"}
    try:
        start = json.loads((await modern_call(named.port, "resources/read", {"uri": OUTBOX}, alice))
                           ["result"]["contents"][0]["text"])["cursor"]
        touched = await modern_call(named.port, "tools/call", {"name": "touch_file", "arguments": {"path": "a.py"}},
                                    alice)
        assert touched["result"]["content"][0]["text"] == "touched a.py"
        everything = f"{OUTBOX}?cursor={start.rpartition('.')[0]}.0"
        for who, expected in ((bob, []), (alice, ["file_changed:a.py"])):
            answer = await modern_call(named.port, "resources/read", {"uri": everything}, who)
            events = json.loads(answer["result"]["contents"][0]["text"])["events"]
            assert [e["data"]["reminder"]["dedupeKey"] for e in events] == expected
        nobody = await modern_call(named.port, "resources/read", {"uri": OUTBOX})
        assert "does not carry the authorization header" in nobody["error"]["message"]
    finally:
        named.stop()
        upstream.stop()


# -- finding 2: pulled events -----------------------------------------------------------------------
class Outboxes:
    """The SDK outbox server, one outbox per MCP session, on a port of its own."""

    def __init__(self, tmp_path: Path):
        self.db = str(tmp_path / "upstream.db")
        upstream_outbox.connect(self.db).close()
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.peers.outbox_server", self.db, "--http",
                                      str(self.port), "--per-session"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=str(ROOT))

    async def ready(self) -> None:
        async def listening() -> bool:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return False
            writer.close()
            return True

        await eventually(listening, timeout=30)

    def write(self, host: Host, event_id: str) -> None:
        upstream_outbox.write_event(self.db, event(event_id), session=host.session)

    async def stored(self, host: Host, event_id: str) -> None:
        """Until the proxy has stored ``event_id`` for ``host``: its cursor for the session moved past it."""
        seq = upstream_outbox.seq_of(self.db, event_id)

        async def past() -> bool:
            return any(c is not None and int(c) >= seq for c in upstream_outbox.cursors(self.db, host.session))

        await eventually(past, timeout=20)

    async def polled(self, host: Host, times: int = 2) -> None:
        """Until the proxy has read ``host``'s outbox ``times`` more times."""
        before = len(upstream_outbox.cursors(self.db, host.session))

        async def more() -> bool:
            return len(upstream_outbox.cursors(self.db, host.session)) >= before + times

        await eventually(more, timeout=20)

    async def held(self, host: Host, event_id: str) -> None:
        """``host`` starts, and the proxy stores ``event_id`` for it (a host with no reminder support
        gets it with its next tool result: until then it is held)."""
        await host.start()
        await self.polled(host)
        self.write(host, event_id)
        await self.stored(host, event_id)

    async def pushed(self, host: Host, event_id: str) -> None:
        """``host`` starts, listens, and the proxy pushes it ``event_id``."""
        await host.start()
        host.listen()
        await self.polled(host)
        self.write(host, event_id)
        await until(host.reminders)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
async def outboxes(tmp_path):
    running = Outboxes(tmp_path)
    await running.ready()
    yield running
    running.stop()


def pull_rules(tmp_path: Path, port: int, extra: str = "") -> Path:
    rules = tmp_path / "pull.toml"
    rules.write_text(f'[routes.acme]\nprotocol = "mcp"\npath = "/mcp"\nupstream = "http://127.0.0.1:{port}/mcp"\n'
                     + extra + '[routes.acme.outbox]\nresource = "acme://notifications"\n'
                     f'store = "{tmp_path / "proxy.sqlite3"}"\npoll_floor_ms = 100\npoll_ceiling_ms = 200\n')
    return rules


async def test_pulled_events_reach_only_the_session_whose_upstream_produced_them(tmp_path, outboxes):
    proxied = bridge(pull_rules(tmp_path, outboxes.port))
    a = Host(proxied.port, name="a")  # no reminder support: its events wait for its next tool result
    b = Host(proxied.port, {"reminders": {}}, name="b")  # listens on its GET stream
    try:
        await outboxes.held(a, "for-a")
        await outboxes.pushed(b, "for-b")  # b starts while a's event waits in the store
        assert b.event_ids() == ["for-b"]
        assert in_tool_result(await a.tool("echo", text="hi")) == ["for-a"]  # a still gets its own
    finally:
        await a.close()
        await b.close()
        proxied.stop()


async def test_after_a_kill_a_session_that_resumes_its_id_gets_its_own_held_events_and_no_one_else_does(
        tmp_path, outboxes):
    rules = pull_rules(tmp_path, outboxes.port)
    proxied = bridge(rules)
    a = Host(proxied.port, name="a")
    b = Host(proxied.port, {"reminders": {}}, name="b")
    try:
        await outboxes.held(a, "held-for-a")
        proxied.proc.kill()
        proxied.proc.wait(10)
        proxied = bridge(rules)
        b.port = a.port = proxied.port
        await outboxes.pushed(b, "for-b")  # a new session on the restarted proxy
        # a never initialises again: it goes on with its Mcp-Session-Id, and its event comes with its next answer
        assert in_tool_result(await a.tool("echo", text="back")) == ["held-for-a"]
        assert b.event_ids() == ["for-b"]
    finally:
        await a.close()
        await b.close()
        proxied.stop()


async def test_two_2026_07_28_identities_each_get_their_own_pulled_events_once_and_never_the_others(
        tmp_path, outboxes):
    """A 2026-07-28 request has no session and ends with its answer: each identity's outbox is polled
    by that identity's keeper, with that identity's credentials, and what it finds reaches a later
    tool result of that identity alone, once (before, each request's poll was answered after the
    request ended, so no cursor was ever stored)."""
    rules = tmp_path / "identity.toml"
    rules.write_text(pull_rules(tmp_path, outboxes.port).read_text() + 'identity = "header:authorization"\n')
    proxied = bridge(rules)
    ada, bob = {"Authorization": "Bearer ada"}, {"Authorization": "Bearer bob"}

    async def echo(who: dict, text: str) -> list[str]:
        answer = await modern_call(proxied.port, "tools/call", {"name": "echo", "arguments": {"text": text}},
                                   {**who, "Mcp-Name": "echo"})
        assert answer["result"]["content"][0]["text"] == text
        return in_tool_result(answer)

    def polled_on(who: dict) -> bool:  # a read that goes on from a stored cursor, with the identity's credentials
        return any(c is not None for c in upstream_outbox.cursors(outboxes.db, who["Authorization"]))

    try:
        for who in (ada, bob):
            assert await echo(who, "hello") == []
        await until(lambda: polled_on(ada) and polled_on(bob))
        for who, event_id in ((ada, "for-ada"), (bob, "for-bob")):
            upstream_outbox.write_event(outboxes.db, event(event_id), session=who["Authorization"])
        got = {"ada": [], "bob": []}
        for _ in range(200):
            for name, who in (("ada", ada), ("bob", bob)):
                got[name] += await echo(who, "anything new?")
            if got["ada"] and got["bob"]:
                break
        assert got == {"ada": ["for-ada"], "bob": ["for-bob"]}
        assert await echo(ada, "again") == [] and await echo(bob, "again") == []  # once each
        # one keeper per identity, whatever its requests: one bootstrap read each
        assert [upstream_outbox.cursors(outboxes.db, who["Authorization"]).count(None) for who in (ada, bob)] == [1, 1]
    finally:
        proxied.stop()


# -- finding 5: exactly once across kill -9 ---------------------------------------------------------
async def test_many_kills_at_random_points_lose_and_repeat_no_pulled_event(tmp_path, outboxes):
    """A listening host whose proxy is killed again and again: events are written for its session
    while its stream is open (the kill lands at a random point of their delivery), while it has no
    stream (the proxy holds what it pulled for the host's next answer, and is killed holding it), and
    while the proxy is down.  After each restart the host resumes its session, never `initialize`:
    its next tool call, and a GET stream when it keeps one.  Every event arrives exactly once."""
    rules = pull_rules(tmp_path, outboxes.port, 'host_dialect = "standard"\n')  # resumed sessions push too
    proxied = bridge(rules)
    host = Host(proxied.port, {"reminders": {}}, name="survivor")
    written: list[str] = []
    rng = random.Random(19)
    try:
        await host.start()
        host.listen()
        await outboxes.polled(host)
        for round_ in range(12):
            streaming = round_ % 3 != 1
            for n in range(rng.randint(1, 4)):
                written.append(f"r{round_}e{n}")
                outboxes.write(host, written[-1])
            if streaming:
                await asyncio.sleep(rng.uniform(0.0, 0.4))  # a kill at a random point of the delivery
            else:
                await outboxes.stored(host, written[-1])  # pulled, and held in memory: no stream to write to
            proxied.proc.kill()
            proxied.proc.wait(10)
            await host.stream_ended()  # what reached the host's socket before the kill is read to its end
            written.append(f"r{round_}down")
            outboxes.write(host, written[-1])  # while the proxy is down
            proxied = bridge(rules)
            host.port = proxied.port
            if (round_ + 1) % 3 != 1:
                host.listen()
            answer = await host.tool("echo", text=f"round {round_}")
            assert answer["result"]["content"][0]["text"] == f"round {round_}"
        host.listen()
        try:
            await until(lambda: set(host.event_ids()) >= set(written), timeout=30)
        except AssertionError:
            raise AssertionError(f"lost: {sorted(set(written) - set(host.event_ids()))}") from None
        seen = host.event_ids()
        repeated = [e for e, n in collections.Counter(seen).items() if n > 1]
        assert not repeated, f"delivered more than once: {repeated}"
        assert sorted(seen) == sorted(written)
    finally:
        await host.close()
        proxied.stop()


# -- finding 11: a locked store ---------------------------------------------------------------------
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("begin exclusive")
print("locked", flush=True)
sys.stdin.readline()
db.execute("rollback")
"""


async def readyz(port: int) -> str:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as r:
            return await r.text()


async def test_a_locked_store_delays_no_answer_and_its_reminders_are_served_once_it_is_free(tmp_path):
    upstream = peer("tests.peers.mcp_legacy_http")
    admin = free_port()
    proxied = bridge(serve_rules(tmp_path, upstream.port), "--admin", f"127.0.0.1:{admin}")
    host = Host(proxied.port, name="reader")
    locker = None
    try:
        await host.start()
        boot = (await host.read())["cursor"]
        locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(tmp_path / "proxy.sqlite3")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert locker.stdout.readline().strip() == "locked"
        # SQLite alone would hold each answer 5 s per reminder; the proxy holds it at most a moment,
        # so each answer comes well within a deadline far below that, with the lock still held
        for path in ("a.py", "b.py", "c.py"):
            answer = await host.tool("touch_file", timeout=2.5, path=path)
            assert answer["result"]["content"][0]["text"] == f"touched {path}"
        assert locker.poll() is None  # still held

        async def degraded() -> str:
            said = await readyz(admin)
            return said if "degraded: outbox store" in said else ""

        assert "database is locked" in await eventually(degraded, timeout=20)
        locker.stdin.write("\n")
        locker.stdin.flush()
        locker.wait(10)

        async def served() -> list[str]:
            events = (await host.read(f"?cursor={boot}"))["events"]
            return [e["data"]["reminder"]["dedupeKey"] for e in events] if len(events) == 3 else []

        assert await eventually(served, timeout=20) == ["file_changed:a.py", "file_changed:b.py", "file_changed:c.py"]
        await eventually(lambda: _ready(admin), timeout=20)  # and ready again
    finally:
        if locker is not None and locker.poll() is None:
            locker.kill()
        await host.close()
        proxied.stop()
        upstream.stop()


async def _ready(admin: int) -> bool:
    return (await readyz(admin)).strip() == "ready"
