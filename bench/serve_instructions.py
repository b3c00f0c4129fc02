"""Instructions per proxied `tools/call`: `reminder-bridge serve` against the bare aiohttp relay,
under callgrind, which counts instructions whatever else the machine is doing (the CPU-per-call
rows of bench.mcp_http move ±10% with the load of a shared machine; this does not).

Usage: python -m bench.serve_instructions [--calls N] [--clients N]   (needs valgrind)

Each side runs under `valgrind --tool=callgrind --instr-atstart=no` in front of the same MCP server
(`bench.peers mcp-http`): a warm 2025-11-25 session and 300 calls first, then instrumentation on
for ``--calls`` calls over ``--clients`` keep-alive connections, then a dump.
"""
from __future__ import annotations

import argparse
import asyncio
import glob
import shutil
import subprocess
import tempfile

from bench.mcp_http import _maker, call_latencies, open_session
from bench.procs import Process, bridge, peer, relay_http


def instructions_per_call(argv: list[str], port_from: str, calls: int, clients: int) -> float:
    out = tempfile.mkdtemp(prefix="callgrind-")
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p"]
    with Process(valgrind + argv, port_from) as side:
        async def drive() -> None:
            session = await open_session(side.port)
            await call_latencies(side.port, _maker(side.port, session), 300)
            subprocess.run(["callgrind_control", "-i", "on", str(side.pid)], check=True, capture_output=True)
            await asyncio.gather(*(call_latencies(side.port, _maker(side.port, session), calls // clients)
                                   for _ in range(clients)))
            subprocess.run(["callgrind_control", "-d", str(side.pid)], check=True, capture_output=True)

        asyncio.run(drive())
    totals = [int(line.split()[1]) for name in glob.glob(f"{out}/cg.*.1") for line in open(name)
              if line.startswith(("summary:", "totals:"))]
    shutil.rmtree(out, ignore_errors=True)
    return max(totals) / (calls // clients * clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--clients", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    with peer("mcp-http") as server:
        upstream = f"http://127.0.0.1:{server.port}"
        proxy = instructions_per_call(bridge("serve", "--listen", "127.0.0.1:0", "--protocol", "mcp", "--upstream",
                                             upstream), "stderr", args.calls, args.clients)
        relay = instructions_per_call(relay_http(upstream), "stdout", args.calls, args.clients)
    print(f"serve: {proxy:,.0f} instructions per call; bare aiohttp relay: {relay:,.0f}; ratio {proxy / relay:.2f}x")


if __name__ == "__main__":
    main()
