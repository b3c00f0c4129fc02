"""Era bridging (issue 21): a bridged `tools/call`'s added latency against a same-era route.

Both routes are `reminder-bridge stdio` in front of the same child, bench/echo_child.py, which
answers every request at once as a 2025-11-25 server answers a warm session's `tools/call`; both
hosts declare standard reminders (the proxy's ordinary case: a call that needs no rewrite). The
same-era route is plain `stdio`, with a 2025-11-25 host (`initialize`, `notifications/initialized`,
then plain calls). The bridged route is `stdio --host-era 2026-07-28 --server-era 2025-11-25`, with a
2026-07-28 host whose every call carries the `_meta` envelope: the proxy opens the 2025-11-25 session
at the first call (a warm-up trip), strips the envelope before the server and adds `resultType` to
each result. Both proxies are alive at once and their trips alternate one by one, as the
`stdio added round-trip latency` row does, so noise on the machine hits both alike.

The same over `serve`, in front of the bench's aiohttp MCP server (bench/peers.py `mcp-http`, a
2025-11-25 session server): a 2026-07-28 host's POSTs (its headers and envelope, no session)
through `serve --host-era 2026-07-28 --server-era 2025-11-25`, which keeps one upstream session for
them, against a 2025-11-25 host's warm session through plain `serve`; batches alternate round by
round. And the other way round: a 2025-11-25 host's warm session through `serve --host-era
2025-11-25 --server-era 2026-07-28` (the proxy's own session; each call a POST of its own upstream,
with the envelope), against the same host's warm session through plain `serve`, in front of the
same server (it answers 2026-07-28 requests too).
"""
from __future__ import annotations

import asyncio
import statistics
from contextlib import ExitStack

from bench.mcp_http import CALL as HTTP_CALL
from bench.mcp_http import (
    HEADERS,
    call_latencies,
    open_session,
    request_maker,
    session_headers,
)
from bench.procs import bridge, pct, peer, proxy_serve
from bench.stdio import CALL, ECHO, Peer

MODERN, LEGACY = "2026-07-28", "2025-11-25"
ENVELOPE = (b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
            b'"io.modelcontextprotocol/clientCapabilities":{"experimental":{"reminders":{}}},'
            b'"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}')
#: a 2026-07-28 host's `tools/call`: the same call, with the envelope every request carries
MODERN_CALL = CALL.replace(b'{"text":"hello"}}', b'{"text":"hello"},' + ENVELOPE + b"}")
#: ... over HTTP, with the headers 2026-07-28 wants on every request
MODERN_HTTP_CALL = HTTP_CALL.replace(b'bench"}}', b'bench"},' + ENVELOPE + b"}")
MODERN_HEADERS = {**HEADERS, "Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
INITIALIZE = (b'{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
              b'"capabilities":{"experimental":{"reminders":{}}},"clientInfo":{"name":"bench","version":"1"}}}\n')
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
WARM_UP = 200
#: each transport's goal: a bridged call costs no more over a same-era one than the proxy's own
#: budget for adding a hop (stdio: +150 µs p50; serve: +0.5 ms p50, as `mcp_http`)
GOALS = {"stdio": ("<= +150 µs p50 over a same-era route", 150), "serve": ("<= +500 µs p50 over a same-era route", 500)}


def same_era() -> Peer:
    """Plain `stdio` with a 2025-11-25 host, its session open."""
    peer = Peer(bridge("stdio", "--") + ECHO, INITIALIZE)
    peer.trip(0)
    peer.call = CALL
    peer.send(INITIALIZED)
    return peer


def bridged() -> Peer:
    """The era bridge with a 2026-07-28 host, its first trip made: it opened the upstream session."""
    peer = Peer(bridge("stdio", "--host-era", MODERN, "--server-era", LEGACY, "--") + ECHO, MODERN_CALL)
    peer.trip(0)
    if b'"resultType":"complete"' not in peer.answer:
        raise RuntimeError(f"the era bridge did not answer as a {MODERN} server: {peer.answer[:200]!r}")
    return peer


def latency(count: int, rounds: int) -> dict:
    through: list[float] = []
    plain: list[float] = []
    for _ in range(rounds):
        same, era = same_era(), bridged()
        for i in range(1, count + WARM_UP + 1):
            first, second = (same, era) if i % 2 else (era, same)
            a, b = first.trip(i), second.trip(i)
            if i > WARM_UP:
                plain.append(a if first is same else b)
                through.append(b if first is same else a)
        same.close()
        era.close()
    return row("stdio", through, plain, f"`stdio --host-era {MODERN} --server-era {LEGACY}` (a {MODERN} host) and "
               f"plain `stdio` (a {LEGACY} host), in front of the same echo child; trips interleaved one by one, "
               f"{rounds} rounds")


def serve_latency(count: int, rounds: int, reverse: bool = False) -> dict:
    """A 2026-07-28 host's POSTs through the bridge toward a 2025-11-25 server, or (``reverse``) a
    2025-11-25 host's session through the bridge toward a 2026-07-28 one, against plain `serve`."""
    host, server_era = (LEGACY, MODERN) if reverse else (MODERN, LEGACY)
    with ExitStack() as stack:
        server = stack.enter_context(peer("mcp-http"))
        upstream = f"http://127.0.0.1:{server.port}"
        plain = stack.enter_context(proxy_serve("--protocol", "mcp", "--upstream", upstream))
        era = stack.enter_context(proxy_serve("--protocol", "mcp", "--upstream", upstream, "--host-era", host,
                                              "--server-era", server_era))
        through, same = asyncio.run(_serve_rounds(plain.port, era.port, count, rounds, reverse))
    bridged = f"a {LEGACY} host's warm session, the proxy's own" if reverse else f"a {MODERN} host, one connection"
    return row("serve", through, same, f"`serve --host-era {host} --server-era {server_era}` ({bridged}) and plain "
               f"`serve` (a {LEGACY} host's warm session), in front of the bench's aiohttp MCP server; batches of "
               f"{count} alternating, {rounds} rounds", direction=f"{LEGACY} hosts" if reverse else "")


async def _serve_rounds(plain_port: int, era_port: int, count: int, rounds: int,
                        reverse: bool = False) -> tuple[list[float], list[float]]:
    """Bridged and same-era trips in alternating batches: a 2026-07-28 host's POSTs on the bridge, or
    (``reverse``) a 2025-11-25 host's session there too."""
    session = await open_session(plain_port)
    bridged = (request_maker(era_port, session_headers(await open_session(era_port))) if reverse
               else request_maker(era_port, MODERN_HEADERS, MODERN_HTTP_CALL))
    sides = {"same": request_maker(plain_port, session_headers(session)), "bridged": bridged}
    ports = {"same": plain_port, "bridged": era_port}
    for side, make in sides.items():  # warm-up: the bridge's upstream session, connections, caches
        await call_latencies(ports[side], make, WARM_UP)
    got: dict[str, list[float]] = {"same": [], "bridged": []}
    for r in range(rounds):
        for side in (("same", "bridged") if r % 2 == 0 else ("bridged", "same")):
            got[side] += await call_latencies(ports[side], sides[side], count)
    return got["bridged"], got["same"]


def row(transport: str, through: list[float], plain: list[float], detail: str, direction: str = "") -> dict:
    added50 = statistics.median(through) - statistics.median(plain)
    added99 = pct(through, 0.99) - pct(plain, 0.99)
    bridged = f"{transport}, {direction}" if direction else transport
    return {"scenario": f"era bridge ({bridged}): added tools/call latency", "unit": "µs",
            "proxy": f"p50 {statistics.median(through):.0f} / p99 {pct(through, 0.99):.0f}",
            "direct": f"p50 {statistics.median(plain):.0f} / p99 {pct(plain, 0.99):.0f} (same-era route)",
            "ratio": f"{added50:+.0f} p50 / {added99:+.0f} p99", "goal": GOALS[transport][0],
            "met": added50 <= GOALS[transport][1],
            "values": {"bridged_p50_us": statistics.median(through), "bridged_p99_us": pct(through, 0.99),
                       "same_era_p50_us": statistics.median(plain), "same_era_p99_us": pct(plain, 0.99),
                       "added_p50_us": added50, "added_p99_us": added99},
            "detail": f"{len(through)} tools/call round trips per route through {detail}"}


def run(quick: bool) -> list[dict]:
    rounds, trips, calls = (3, 1000, 400) if quick else (5, 3000, 2000)
    return [latency(trips, rounds), serve_latency(calls, rounds), serve_latency(calls, rounds, reverse=True)]

