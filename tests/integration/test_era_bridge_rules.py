"""A route's reminder rules across the era bridge (issue 21, point 3), real processes: budgets,
trust limits, stages, the fallback and the outbox do on a bridged route what they do on a route of
one era, in both directions, over `stdio -- COMMAND` and over `serve` at an http upstream.

The host is an `mcp` 2.3.0 SDK client forced to its era; the server speaks only the other
(tests.peers.legacy_only_server / modern_only_server over stdio, legacy_only_http /
modern_only_http over HTTP, all of one `build()`). Where a test compares with a route of one era,
the same host talks to the server of its own era (`route(..., bridged=False)`), the same rules, no
bridge. The counts are read from the proxy's `/metrics`."""
from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.integration.test_console import wait_listening
from tests.integration.test_outbox import event
from tests.peers import outbox_server
from tests.peers.mcp_host import Reminders
from tests.peers.processes import eventually, free_port, peer, proxy

MODERN, LEGACY = "2026-07-28", "2025-11-25"
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # 2025-11-25 hosts

#: the server of each era, by transport
STDIO_SERVERS = {LEGACY: "tests.peers.legacy_only_server", MODERN: "tests.peers.modern_only_server"}
HTTP_SERVERS = {LEGACY: "tests.peers.legacy_only_http", MODERN: "tests.peers.modern_only_http"}


@dataclass(frozen=True)
class Case:
    """One transport and one direction: the host's era, and the server's across the bridge."""

    transport: str  # "stdio" or "serve"
    host: str

    @property
    def server(self) -> str:
        return LEGACY if self.host == MODERN else MODERN

    @property
    def mode(self) -> str:
        """How the SDK host is forced to its era."""
        return MODERN if self.host == MODERN else "legacy"

    def __str__(self) -> str:
        return f"{self.transport}, {self.host} host, {self.server} server"


CASES = [Case(transport, host) for transport in ("stdio", "serve") for host in (MODERN, LEGACY)]
bridged_cases = pytest.mark.parametrize("case", CASES, ids=str)


@pytest.fixture(scope="module")
def http_servers():
    """The two HTTP servers, started once each, at the first test that needs them."""
    started: dict[str, object] = {}

    def of(era: str):
        if era not in started:
            started[era] = peer(HTTP_SERVERS[era])
        return started[era]

    yield of
    for server in started.values():
        server.stop()


@dataclass
class Route:
    """A running proxy's way in: a host (``client``) and its admin port (``metrics``)."""

    case: Case
    target: str | StdioServerParameters  # the proxy's URL, or how to start it
    admin: int

    def client(self, headers: dict[str, str] | None = None, **options) -> Client:
        """An SDK host of the case's era (over HTTP with ``headers`` on every request)."""
        target = self.target
        if headers is not None:
            target = streamable_http_client(target, http_client=create_mcp_http_client(headers=headers))
        return Client(target, mode=self.case.mode, **options)

    async def metrics(self) -> str:
        """`/metrics` (stdio: while a host is connected, the proxy lives with its host)."""
        await asyncio.get_running_loop().run_in_executor(None, wait_listening, self.admin)
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{self.admin}/metrics") as r:
            return await r.text()


@pytest.fixture
def route(tmp_path, http_servers):
    """``route(case, rules)``: the proxy of ``case`` with the route tables ``rules`` (TOML, with
    `[route.budget]` for `[routes.r.budget]`), bridging to the server of the other era;
    ``bridged=False``: the same in front of the server of the host's era. ``server(era)``: another
    server's module and arguments (over HTTP, given `--http`) in place of the tools'."""
    @contextlib.contextmanager
    def start(case: Case, rules: str = "", bridged: bool = True, server=None):
        era = case.server if bridged else case.host
        admin = free_port()
        keys = [f'host_era = "{case.host}"', f'server_era = "{case.server}"'] if bridged else []
        with contextlib.ExitStack() as stack:
            if case.transport == "stdio":
                argv = server(era) if server else [STDIO_SERVERS[era], str(tmp_path / f"seen-{era}.jsonl")]
                keys.append(f"command = {json.dumps([sys.executable, '-m', *argv])}")
            else:
                upstream = peer(*server(era), "--http") if server else http_servers(era)
                if server:
                    stack.callback(upstream.stop)
                keys += ['path = "/mcp"', f'upstream = "http://127.0.0.1:{upstream.port}/mcp"']
            path = tmp_path / f"rules-{era}.toml"
            path.write_text("\n".join(["[defaults]", "require_declaration = false", "[routes.r]", 'protocol = "mcp"',
                                       *keys, rules.replace("[route.", "[routes.r."), ""]))
            options = ["--rules", str(path), "--admin", f"127.0.0.1:{admin}"]
            if case.transport == "stdio":
                yield Route(case, StdioServerParameters(command=sys.executable,
                                                        args=["-m", "bridge", "stdio", *options]), admin)
                return
            running = proxy(*options)
            stack.callback(running.stop)
            yield Route(case, f"http://127.0.0.1:{running.port}/mcp", admin)

    return start


def counted(metrics: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for line in metrics.splitlines():
        found = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if found and all(f'{k}="{v}"' in found.group(1) for k, v in labels.items()):
            total += float(found.group(2))
    return total


def texts(result) -> list[str]:
    return [c.text for c in result.content]


# -- budgets ------------------------------------------------------------------------------------

@bridged_cases
async def test_a_budget_drops_what_is_over_it_and_counts_it(case, route):
    """`burst = 1`, no refill to speak of, `over = "drop"`: of three reminders the first reaches the
    host, once, the two others are dropped and counted `rate_limited`; the calls are untouched."""
    budget = '[route.budget]\nrate = 0.001\nburst = 1\nover = "drop"\n'
    with route(case, budget) as bridged:
        ext = Reminders()
        async with bridged.client(extensions=[ext]) as client:
            answers = [texts(await client.call_tool("remind", {"path": p})) for p in ("a.py", "b.py", "c.py")]
            await client.call_tool("echo", {"text": "sync"})
            metrics = await bridged.metrics()
    assert answers == [["touched a.py"], ["touched b.py"], ["touched c.py"]]
    assert [r["id"] for r in ext.received] == ["r-a.py"]
    assert counted(metrics, "reminder_bridge_reminders_total", action="rate_limited", route="r") == 2
    assert counted(metrics, "reminder_bridge_budget_rejections_total", scope="server", shadow="false") == 2
    assert counted(metrics, "reminder_bridge_era_bridged_requests_total", route="r") >= 4


@bridged_cases
async def test_coalesce_holds_what_is_over_budget_and_delivers_it_as_a_route_of_one_era_does(case, route):
    """`over = "coalesce"`: the second reminder waits for the token (two seconds: longer than its
    call takes) and is delivered then; a 2026-07-28 request over `serve` ends with its answer, and
    what its flow held is dropped with it, counted. Across the bridge exactly what a route of one
    era does."""
    budget = '[route.budget]\nrate = 30\nburst = 1\nover = "coalesce"\n'
    actions = ("rewritten", "coalesced", "dropped")

    async def run(bridged: bool) -> tuple[list[str], dict[str, float]]:
        with route(case, budget, bridged=bridged) as proxied:
            ext = Reminders()
            async with proxied.client(extensions=[ext]) as client:
                for path in ("a.py", "b.py"):
                    await client.call_tool("remind", {"path": path})

                async def decided() -> str | None:  # the held one delivered, or dropped with its request
                    metrics = await proxied.metrics()
                    done = sum(counted(metrics, "reminder_bridge_reminders_total", action=a) for a in actions[::2])
                    return metrics if done == 2 else None

                metrics = await eventually(decided, timeout=20)
                await client.call_tool("echo", {"text": "sync"})
        return [r["id"] for r in ext.received], {a: counted(metrics, "reminder_bridge_reminders_total", action=a)
                                                 for a in actions}

    alone = await run(bridged=False)
    across = await run(bridged=True)
    assert across == alone
    if (case.transport, case.host) == ("serve", MODERN):
        assert across == (["r-a.py"], {"rewritten": 1, "coalesced": 1, "dropped": 1})
    else:
        assert across == (["r-a.py", "r-b.py"], {"rewritten": 2, "coalesced": 1, "dropped": 0})


# -- trust --------------------------------------------------------------------------------------

@bridged_cases
async def test_a_trust_limit_refuses_the_reminder_and_counts_the_limit(case, route):
    """The server's bodies are 50 bytes and more: `max_body_bytes = 16` refuses every one, counted
    by the limit; the call's own answer still reaches the host."""
    with route(case, "[route.trust]\nmax_body_bytes = 16\n") as bridged:
        ext = Reminders()
        async with bridged.client(extensions=[ext]) as client:
            answer = texts(await client.call_tool("remind", {"path": "a.py"}))
            await client.call_tool("echo", {"text": "sync"})
            metrics = await bridged.metrics()
    assert answer == ["touched a.py"] and ext.received == []
    assert counted(metrics, "reminder_bridge_reminders_total", action="refused", route="r") == 1
    assert counted(metrics, "reminder_bridge_trust_refusals_total", limit="max_body_bytes") == 1


# -- the fallback -------------------------------------------------------------------------------

@bridged_cases
async def test_a_host_without_reminder_support_gets_the_reminder_in_a_tool_result_once(case, route):
    with route(case) as bridged:
        async with bridged.client() as client:
            results = [texts(await client.call_tool("remind", {"path": "f.py"})),
                       texts(await client.call_tool("echo", {"text": "next"}))]
    shown = [t for result in results for t in result if "f.py changed externally" in t]
    assert len(shown) == 1 and shown[0].startswith('<system-reminder id="r-f.py"')
    assert results[0][0] == "touched f.py" and results[1][0] == "next"


class Heard:
    """Every notification the SDK host hears (its `message_handler`), as method and params."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict]] = []

    async def __call__(self, message) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None):
            params = root.params.model_dump(by_alias=True, mode="json", exclude_none=True) if root.params else {}
            self.messages.append((root.method, params))


async def heard_on(route: Route) -> tuple[list[dict], list[tuple[str, dict]], list[str], str]:
    """What the host is told of one `remind`: the standard reminders, every other notification, and
    the texts of that call's and the next call's results."""
    ext, heard = Reminders(), Heard()
    async with route.client(extensions=[ext], message_handler=heard) as client:
        results = texts(await client.call_tool("remind", {"path": "s.py"}))
        results += texts(await client.call_tool("echo", {"text": "sync"}))
        metrics = await route.metrics()
    return ext.received, heard.messages, results, metrics


@pytest.mark.parametrize("stage", ["observe", "dual", "translate", "enforce"])
@bridged_cases
async def test_each_stage_shows_the_host_what_a_route_of_one_era_shows_it(case, route, stage):
    """`observe`: the server's Harn log line, untouched, and no standard reminder; the other stages:
    the standard reminder, once, and no log line (MCP has no message that carries both forms, so
    `dual` sends the one; `enforce` is `translate` for MCP). The host hears exactly what it hears
    from a server of its own era, and the decision is counted under the stage."""
    with route(case, f'stage = "{stage}"\n', bridged=False) as direct:
        alone = await heard_on(direct)
    with route(case, f'stage = "{stage}"\n') as bridged:
        across = await heard_on(bridged)
    assert across[:3] == alone[:3]
    reminders, others, results, metrics = across
    assert results == ["touched s.py", "sync"]
    legacy = {"id": "r-s.py", "body": "s.py changed externally; re-read it before editing.",
              "tags": ["workspace", "file_changed"], "dedupeKey": "file_changed:s.py", "ttlTurns": 2}
    if stage == "observe":
        assert reminders == []
        [(method, params)] = others
        assert method == "notifications/message" and params == {
            "level": "info", "logger": "harn.reminder", "data": legacy["body"], "_meta": {"harn": {"reminder": legacy}}}
    else:
        assert reminders == [legacy] and others == []
    assert counted(metrics, "reminder_bridge_reminders_total", route="r", stage=stage) >= 1


# -- the outbox ---------------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def outboxed(case: Case, route, tmp_path: Path):
    """A host through the bridge in front of tests.peers.era_outbox_server, the route polling its
    outbox (`[routes.r.outbox]`; over `serve` a 2026-07-28 host's outbox is its identity's); yields
    the server's database, the host's reminders and ``asking(found, text)``: echo calls until
    ``found(their texts)`` (a 2026-07-28 request over `serve` is what polls)."""
    db = str(tmp_path / "server.db")
    outbox_server.connect(db).close()
    rules = ('[route.outbox]\nresource = "acme://notifications"\nstore = "proxy.sqlite3"\n'
             'poll_floor_ms = 100\npoll_ceiling_ms = 300\n')
    headers = None
    if case.transport == "serve" and case.host == MODERN:
        rules += 'identity = "header:authorization"\n'
        headers = {"Authorization": "Bearer ada"}
    with route(case, rules, server=lambda era: ["tests.peers.era_outbox_server", db, era]) as bridged:
        ext = Reminders()
        async with bridged.client(headers, extensions=[ext]) as client:
            async def asking(found, text: str):
                with anyio.fail_after(20):
                    while not (got := found(texts(await client.call_tool("echo", {"text": text})))):
                        pass
                return got

            yield db, ext, asking


@bridged_cases
async def test_the_proxy_s_outbox_reads_cross_the_bridge_in_the_server_s_era(case, route, tmp_path):
    """The proxy's own `resources/read` of the outbox reaches a server that refuses anything of the
    other era (with `Mcp-Method`/`Mcp-Name` of its own toward a 2026-07-28 server): the first read,
    with no cursor, as on a route of one era."""
    async with outboxed(case, route, tmp_path) as (db, _, asking):
        await asking(lambda _: outbox_server.reads(db), "the bootstrap read")
    assert outbox_server.reads(db)[0] == ("resources/read", None, 100, 86_400_000)


@bridged_cases
async def test_an_outbox_event_reaches_the_host_once_through_the_bridge(case, route, tmp_path):
    """An event written to the server's outbox reaches the host once: pushed to a 2025-11-25 host; to
    a 2026-07-28 host (no listen stream that takes reminders: the SDK's cannot ask) in a tool result,
    as on a route of one era (tests/integration/test_outbox.py). Over `serve` a 2026-07-28 host's
    requests end before their polls would be answered: its identity's keeper polls for them."""
    async with outboxed(case, route, tmp_path) as (db, ext, asking):
        await asking(lambda _: any(cursor is not None for _, cursor, *_ in outbox_server.reads(db)), "the next read")
        outbox_server.write_event(db, event("m1", title="mail from Ada"))
        if case.host == LEGACY:
            await asking(lambda _: ext.received, "the pushed reminder")
        else:
            shown = await asking(lambda got: [t for t in got if "mail from Ada" in t], "new?")
        after = await asking(lambda got: got, "after")
    if case.host == LEGACY:
        [reminder] = ext.received
        assert reminder["body"] == "mail from Ada"
        assert reminder["_meta"]["reminder-bridge/event"]["event"]["eventId"] == "m1"
    else:
        assert ext.received == [] and len(shown) == 1 and shown[0].startswith('<system-reminder id="')
    assert after == ["after"]  # once: not again in the next result
