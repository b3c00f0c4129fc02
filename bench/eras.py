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
"""
from __future__ import annotations

import statistics

from bench.procs import bridge, pct
from bench.stdio import CALL, ECHO, Peer

MODERN, LEGACY = "2026-07-28", "2025-11-25"
ENVELOPE = (b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
            b'"io.modelcontextprotocol/clientCapabilities":{"experimental":{"reminders":{}}},'
            b'"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}')
#: a 2026-07-28 host's `tools/call`: the same call, with the envelope every request carries
MODERN_CALL = CALL.replace(b'{"text":"hello"}}', b'{"text":"hello"},' + ENVELOPE + b"}")
INITIALIZE = (b'{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
              b'"capabilities":{"experimental":{"reminders":{}}},"clientInfo":{"name":"bench","version":"1"}}}\n')
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
WARM_UP = 200


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
    added50 = statistics.median(through) - statistics.median(plain)
    added99 = pct(through, 0.99) - pct(plain, 0.99)
    return {"scenario": "era bridge: added tools/call latency", "unit": "µs",
            "proxy": f"p50 {statistics.median(through):.0f} / p99 {pct(through, 0.99):.0f}",
            "direct": f"p50 {statistics.median(plain):.0f} / p99 {pct(plain, 0.99):.0f} (same-era route)",
            "ratio": f"{added50:+.0f} p50 / {added99:+.0f} p99", "goal": "<= +150 µs p50 over a same-era route",
            "met": added50 <= 150,
            "values": {"bridged_p50_us": statistics.median(through), "bridged_p99_us": pct(through, 0.99),
                       "same_era_p50_us": statistics.median(plain), "same_era_p99_us": pct(plain, 0.99),
                       "added_p50_us": added50, "added_p99_us": added99},
            "detail": f"{len(through)} tools/call round trips per route through `stdio --host-era {MODERN} "
                      f"--server-era {LEGACY}` (a {MODERN} host) and plain `stdio` (a {LEGACY} host), in front of "
                      f"the same echo child; trips interleaved one by one, {rounds} rounds"}


def run(quick: bool) -> list[dict]:
    rounds, trips = (3, 1000) if quick else (5, 3000)
    return [latency(trips, rounds)]

