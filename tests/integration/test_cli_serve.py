"""`reminder-bridge serve` as its peers' users expect it (issue 22, point 2): an endpoint-style
`--upstream http://host:3000/mcp`, `--header` and a route's `headers` (secrets read from the
environment, never shown), and one line per route saying where it answers. Real proxy processes
in front of a real upstream that reports what it was sent (tests/peers/faulty_http.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import aiohttp
import pytest

from tests.peers.processes import Running, peer, proxy, wait_until
from tests.paths import ROOT


@pytest.fixture(scope="module")
def upstream():
    running = peer("tests.peers.faulty_http")
    yield running
    running.stop()


async def sent(url: str, headers: dict[str, str] | None = None) -> dict:
    """What the upstream saw of one JSON-RPC request posted to ``url``: its path, query and headers."""
    async with aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "headers", "params": {}}
        async with http.post(url, json=body, headers=headers or {}) as response:
            assert response.status == 200, await response.text()
            return (await response.json())["result"]


def route_lines(running: Running, count: int) -> list[str]:
    """The lines `serve` printed on stdout, one per route."""
    wait_until(lambda: len(running.stdout) >= count)
    return running.stdout


async def test_an_endpoint_upstream_is_served_at_the_same_path(upstream):
    """`--upstream http://host:3000/mcp`, as mcp-proxy and supergateway take it: the host posts to
    the proxy's /mcp and reaches the upstream's /mcp (not /mcp/mcp), and any other path goes to the
    same path on the upstream (OAuth discovery, say)."""
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{upstream.port}/mcp?tenant=t1")
    try:
        seen = await sent(f"http://127.0.0.1:{bridge.port}/mcp")
        assert (seen["path"], seen["query"]) == ("/mcp", "tenant=t1")
        assert route_lines(bridge, 1) == [f"MCP route default at http://127.0.0.1:{bridge.port}/mcp → "
                                          f"http://127.0.0.1:{upstream.port}/mcp?tenant=***"]
    finally:
        bridge.stop()
    base = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{upstream.port}")  # the base form still works
    try:
        assert route_lines(base, 1) == [f"MCP route default at http://127.0.0.1:{base.port}/ → "
                                        f"http://127.0.0.1:{upstream.port}"]
        assert (await sent(f"http://127.0.0.1:{base.port}/mcp"))["path"] == "/mcp"
    finally:
        base.stop()


async def test_a_route_path_stands_for_its_upstream_url_and_a_route_without_one_serves_every_path(upstream, tmp_path):
    rules = tmp_path / "routes.toml"
    rules.write_text(f'[routes.github]\nprotocol = "mcp"\npath = "/github"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n'
                     f'[routes.a2a]\nprotocol = "a2a"\nupstream = "http://127.0.0.1:{upstream.port}/a2a"\n')
    bridge = proxy("--rules", str(rules))
    try:
        assert sorted(route_lines(bridge, 2)) == [
            f"A2A route a2a at http://127.0.0.1:{bridge.port}/a2a → http://127.0.0.1:{upstream.port}/a2a",
            f"MCP route github at http://127.0.0.1:{bridge.port}/github → http://127.0.0.1:{upstream.port}/mcp"]
        assert (await sent(f"http://127.0.0.1:{bridge.port}/github"))["path"] == "/mcp"
        async with aiohttp.ClientSession() as http:  # the route without a path: every other path, unchanged
            async with http.get(f"http://127.0.0.1:{bridge.port}/.well-known/agent-card.json") as response:
                card = await response.json()
        assert card["name"] == "faulty" and card["supportedInterfaces"][0]["url"] == f"http://127.0.0.1:{bridge.port}"
    finally:
        bridge.stop()


async def test_headers_from_the_flag_and_the_rules_reach_every_upstream_request_and_stay_secret(upstream, tmp_path):
    rules = tmp_path / "github.toml"
    rules.write_text(f'[routes.github]\nprotocol = "mcp"\npath = "/github"\nupstream = "http://127.0.0.1:{upstream.port}/mcp"\n'
                     '[routes.github.headers]\nAuthorization = "Bearer ${GITHUB_TOKEN}"\nX-Route = "github"\n'
                     'X-Both = "from the rules"\n')
    secret = "ghp-T0KEN-never-shown"
    bridge = Running([sys.executable, "-m", "bridge", "serve", "--listen", "127.0.0.1:0", "--rules", str(rules),
                      "--log-level", "debug", "--header", "X-Both: from ${WHO}", "--header", "X-Flag: on"], "stderr",
                     env={**os.environ, "GITHUB_TOKEN": secret, "WHO": "the flag"})
    try:
        seen = (await sent(f"http://127.0.0.1:{bridge.port}/github",
                           {"Authorization": "Bearer the-clients-own", "X-Client": "kept"}))["headers"]
        assert seen["Authorization"] == f"Bearer {secret}"  # the route's, in place of the client's
        assert (seen["X-Route"], seen["X-Both"], seen["X-Flag"], seen["X-Client"]) == \
            ("github", "from the flag", "on", "kept")
    finally:
        bridge.stop()
    logged = "\n".join(bridge.stderr)
    assert "listening" in logged and secret not in logged and "ghp-T0KEN" not in logged


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "serve", *args], capture_output=True, text=True,
                          timeout=30, cwd=ROOT, env={**os.environ, **(env or {})})


def test_check_names_a_header_variable_that_is_not_set_and_never_shows_a_value(tmp_path):
    rules = tmp_path / "github.toml"
    rules.write_text('[routes.github]\nprotocol = "mcp"\npath = "/github"\nupstream = "https://mcp.example/mcp"\n'
                     'headers.Authorization = "Bearer ${GITHUB_TOKEN_FOR_TEST}"\nheaders.X-Literal = "lit-s3cret"\n'
                     'headers.Host = "evil.example"\n')
    check = [sys.executable, "-m", "bridge", "check", str(rules)]
    done = subprocess.run(check, capture_output=True, text=True, timeout=30,
                          env={k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN_FOR_TEST"})
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{rules}:5: routes.github.headers.Authorization: ${{GITHUB_TOKEN_FOR_TEST}}: the environment variable "
        "GITHUB_TOKEN_FOR_TEST is not set",
        f"{rules}:7: routes.github.headers.Host: Host is set per request by the host or by the proxy itself; a route "
        "cannot set it"]
    assert "lit-s3cret" not in done.stdout and "evil.example" not in done.stdout
    refused = serve("--rules", str(rules))  # serve refuses the same file the same way
    assert refused.returncode == 2 and "GITHUB_TOKEN_FOR_TEST is not set" in refused.stderr
