"""The command line's manners (issue 22, point 2): a mistake gets argparse's usage block and ONE line
naming the option (never a traceback or a raw pydantic error), options are never abbreviated,
every `--help` shows examples that really parse, and `status` finds the documented admin port and
says when it was pointed at something else."""
from __future__ import annotations

import asyncio
import os
import re
import shlex
import socket
import subprocess
import sys

import pytest
from aiohttp import web

from bridge.cli import build_parser
from bridge.console.cli import DEFAULT_ADMIN
from tests.peers.processes import free_port, peer, proxy
from tests.paths import ROOT
from tests.unit.cli.test_cli import UPSTREAM

COMMANDS = ("translate", "check", "demo", "stdio", "serve", "status")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, text=True, timeout=30,
                          cwd=ROOT, env={**os.environ, **(env or {})})


def the_one_line(stderr: str) -> str:
    """What argparse prints after its usage block (whose lines start with `usage:` or are indented)."""
    rest = [line for line in stderr.splitlines() if not line.startswith(("usage:", " "))]
    assert len(rest) == 1, stderr
    return rest[0]


@pytest.mark.parametrize("args, line", [
    (["serve", "--protocol", "mcp", "--upstream", "127.0.0.1:3000"],
     'serve: error: argument --upstream: must be an http(s):// or ws(s):// URL (got "127.0.0.1:3000"); did you mean '
     '"http://127.0.0.1:3000"?'),
    (["serve", *UPSTREAM, "--listen", "nope"],
     'serve: error: argument --listen: must be HOST:PORT with a port 0-65535, e.g. "127.0.0.1:9464" (got "nope")'),
    (["serve", *UPSTREAM, "--admin", "127.0.0.1:99999"],
     'serve: error: argument --admin: must be HOST:PORT with a port 0-65535, e.g. "127.0.0.1:9464" '
     '(got "127.0.0.1:99999")'),
    (["serve", *UPSTREAM, "--max-connections", "-1"],
     "serve: error: argument --max-connections: must be an integer >= 0 (got -1)"),
    (["serve", *UPSTREAM, "--header-timeout", "soon"],
     "serve: error: argument --header-timeout: must be a number > 0 (got soon)"),
    (["serve", *UPSTREAM, "--upstream-timeout", "0"],
     "serve: error: argument --upstream-timeout: must be a number of seconds > 0 (got 0)"),
    (["serve", *UPSTREAM, "--workers", "100"], "serve: error: argument --workers: must be a number from 1 to 64 (got 100)"),
    (["serve", *UPSTREAM, "--allowed-origin", "app.example"],
     'serve: error: argument --allowed-origin: must be "*", "loopback" or an origin such as "https://app.example:8443" '
     '(got "app.example")'),
    (["serve", *UPSTREAM, "--header", "Bearer s3cret-token"],
     "serve: error: argument --header: must be 'Name: value', e.g. 'Authorization: Bearer ${TOKEN}' (there is no ':')"),
    (["serve", *UPSTREAM, "--header", "Host: evil.example"],
     "serve: error: argument --header: Host is set per request by the host or by the proxy itself; a route cannot "
     "set it"),
    (["serve", *UPSTREAM, "--header", "Authorization: Bearer ${NOT_SET_FOR_THIS_TEST}"],
     "serve: error: argument --header: ${NOT_SET_FOR_THIS_TEST}: the environment variable NOT_SET_FOR_THIS_TEST is "
     "not set"),
    (["serve", *UPSTREAM, "--state", "memcached://cache"],
     "serve: error: argument --state: must be \"memory\", redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS) "
     "or unix:///PATH/TO/redis.sock[?db=N] (got 'memcached://cache': unknown scheme 'memcached')"),
    (["stdio", "--env", "LOG_LEVEL", "--", "true"],
     "stdio: error: argument --env: must be NAME=VALUE, e.g. LOG_LEVEL=debug (there is no '=')"),
    (["stdio", "--env", "1X=y", "--", "true"],
     "stdio: error: argument --env: a variable name must be letters, digits and _, not first a digit"),
    (["stdio", "--cwd", "/no/such/dir", "--", "true"], "stdio: error: argument --cwd: '/no/such/dir' is not a directory"),
    (["stdio", "--admin", "nope", "--", "true"],
     'stdio: error: argument --admin: must be HOST:PORT with a port 0-65535, e.g. "127.0.0.1:9464" (got "nope")'),
    (["demo", "--width", "10"], "demo: error: argument --width: must be a number of columns, at least 60 (got 10)"),
])
def test_a_mistake_gets_one_line_naming_the_option(args, line):
    done = cli(*args)
    assert done.returncode == 2
    assert the_one_line(done.stderr) == f"reminder-bridge {line}"
    assert "Traceback" not in done.stderr and "pydantic" not in done.stderr
    assert "s3cret-token" not in done.stderr  # a header value is never echoed, even a malformed one


@pytest.mark.parametrize("args, unknown", [
    (["serve", *UPSTREAM, "--header-t", "5"], "--header-t"),  # once read as --header-timeout
    (["serve", *UPSTREAM, "--up", "http://x"], "--up"),  # once read as --upstream or --upstream-timeout
    (["stdio", "--rou", "fs", "--", "true"], "--rou"),
    (["--vers", "check", "rules/default.toml"], "--vers"),
])
def test_options_are_never_abbreviated(args, unknown):
    done = cli(*args)
    assert done.returncode == 2
    assert the_one_line(done.stderr).startswith("reminder-bridge: error: unrecognized arguments: " + unknown)


def examples(command: str) -> list[str]:
    """The example command lines in `reminder-bridge COMMAND --help`."""
    text = cli(command, "--help").stdout
    assert "examples:" in text, text
    return [line.strip() for line in text.split("examples:")[1].splitlines() if line.startswith("  reminder-bridge ")]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_text_shows_examples_that_parse(command, monkeypatch, tmp_path):
    found = examples(command)
    assert found, f"no example in `{command} --help`"
    monkeypatch.setenv("HOME", str(tmp_path))  # `--cwd ~/src` in an example
    (tmp_path / "src").mkdir()
    for name in ("GH_TOKEN", "TOKEN"):
        monkeypatch.setenv(name, "example-value")
    for line in found:
        argv = shlex.split(re.split(r"\s[|<]\s", line)[0])[1:]  # the proxy's own part of a pipeline
        assert argv[0] == command, line
        build_parser().parse_args(argv)  # exits (and fails the test) on an example that does not parse


def test_the_top_level_help_shows_examples():
    assert "examples:" in cli("--help").stdout


def status_lines(*args: str) -> tuple[int, list[str], list[str]]:
    done = cli("status", *args)
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


def test_status_reads_the_admin_port_and_asks_whether_the_proxy_port_is_it():
    """One real `serve` with both ports: `status` at the admin port prints the table; at the proxy's
    own port (whose requests go to the upstream) it says, in one line, that this is not it."""
    server = peer("tests.peers.mcp_legacy_http")
    admin = free_port()
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{server.port}/mcp",
                   "--admin", f"127.0.0.1:{admin}")
    try:
        at_admin = status_lines("--admin", f"127.0.0.1:{admin}")
        at_proxy = status_lines("--admin", f"127.0.0.1:{bridge.port}")
    finally:
        bridge.stop()
        server.stop()
    code, table, errors = at_admin
    assert (code, errors) == (0, []) and table[0].startswith("ROUTE ") and table[1].startswith("default "), table
    code, out, [line] = at_proxy
    assert (code, out) == (2, [])
    assert line.startswith(f"reminder-bridge status: http://127.0.0.1:{bridge.port}/api/status: HTTP 404, no "
                           "reminder-bridge status; is this the admin port?"), line


async def test_status_at_a_proxy_whose_upstream_wants_a_login_asks_about_the_port_not_the_token():
    """An OAuth-protected MCP server answers every request 401: through the proxy's port, that is
    not the admin port asking for its token."""
    async def login_first(_: web.Request) -> web.Response:
        return web.Response(status=401, headers={"WWW-Authenticate": 'Bearer resource_metadata="http://x/.well-known"'})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", login_first)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    upstream = runner.addresses[0][1]
    bridge = proxy("--protocol", "mcp", "--upstream", f"http://127.0.0.1:{upstream}/mcp")
    try:
        code, _, [line] = await asyncio.to_thread(status_lines, "--admin", f"127.0.0.1:{bridge.port}")
    finally:
        bridge.stop()
        await runner.cleanup()
    assert code == 2
    assert "HTTP 401, no reminder-bridge status; is this the admin port?" in line and "token" not in line, line


def test_status_defaults_to_the_documented_admin_address(tmp_path):
    """`serve` with an `[admin]` table and no `listen` serves the admin port where the docs say;
    `status` with no `--admin` reads it there."""
    assert f"`{DEFAULT_ADMIN}`" in (ROOT / "docs" / "console.md").read_text()
    host, port = DEFAULT_ADMIN.rsplit(":", 1)
    with socket.socket() as probe:
        if probe.connect_ex((host, int(port))) == 0:
            pytest.skip(f"another process listens on {DEFAULT_ADMIN}, the documented admin address")
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[admin]\n[routes.files]\nprotocol = "mcp"\nupstream = "http://127.0.0.1:{free_port()}/mcp"\n')
    bridge = proxy("--rules", str(rules))
    try:
        code, table, errors = status_lines()
    finally:
        bridge.stop()
    assert (code, errors) == (0, []) and table[1].startswith("files "), (table, errors)
