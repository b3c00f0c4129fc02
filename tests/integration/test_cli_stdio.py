"""`reminder-bridge stdio` as its peers' users expect it (issue 22, points 2 and 3): `--env` and
`--cwd` for the child, and a rules route's own `command`, `env` and `cwd`, with a real proxy and a
real child that says where it runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.peers.jsonrpc_pipe import JsonRpcPipe
from tests.paths import ROOT

PROXY = [sys.executable, "-m", "bridge", "stdio"]
SERVER = [sys.executable, "-m", "tests.peers.environment_server"]
HOST = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}


def where_the_child_runs(argv: list[str], names: list[str], env: dict[str, str] | None = None,
                         cwd: str | None = None) -> dict:
    """Start the proxy as a host would, ask its child for its cwd and the variables named."""
    pipe = JsonRpcPipe(argv, cwd=cwd or str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    try:
        pipe.request("initialize", HOST)
        answer, _ = pipe.request("tools/call", {"name": "environment", "arguments": {"names": names}})
    finally:
        assert pipe.close() == 0, bytes(pipe.stderr).decode(errors="replace")
    return answer["result"]["structuredContent"]


def test_env_and_cwd_flags_reach_the_child_and_read_variables_from_the_proxys_environment(tmp_path):
    seen = where_the_child_runs(
        PROXY + ["--env", "LOG_LEVEL=debug", "--env", "GITHUB_TOKEN=${GH_TOKEN}", "--env", "PRICE=$5, $${HOME}",
                 "--cwd", str(tmp_path), "--"] + SERVER,
        ["LOG_LEVEL", "GITHUB_TOKEN", "PRICE", "INHERITED"], env={"GH_TOKEN": "ghp-s3cret", "INHERITED": "yes"})
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == {"LOG_LEVEL": "debug", "GITHUB_TOKEN": "ghp-s3cret", "PRICE": "$5, ${HOME}",
                           "INHERITED": "yes"}


def test_a_route_runs_its_own_command_in_its_cwd_with_its_env_and_the_flags_win(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[routes.env]\nprotocol = "mcp"\ncommand = {json.dumps(SERVER)}\ncwd = "work"\n'
                     '[routes.env.env]\nFROM_ROUTE = "route"\nTOKEN = "${ROUTE_SECRET}"\nBOTH = "route"\n')
    argv = PROXY + ["--rules", str(rules), "--route", "env"]
    seen = where_the_child_runs(argv, ["FROM_ROUTE", "TOKEN", "BOTH"], env={"ROUTE_SECRET": "s3"})
    assert seen == {"cwd": str(workdir), "env": {"FROM_ROUTE": "route", "TOKEN": "s3", "BOTH": "route"}}

    seen = where_the_child_runs(argv + ["--env", "BOTH=flag", "--cwd", str(tmp_path)], ["BOTH"],
                                env={"ROUTE_SECRET": "s3"})
    assert seen == {"cwd": str(tmp_path), "env": {"BOTH": "flag"}}


def test_a_command_after_the_double_dash_replaces_the_routes_own(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.env]\nprotocol = "mcp"\ncommand = ["no-such-server-anywhere"]\nenv.FROM_ROUTE = "r"\n')
    seen = where_the_child_runs(PROXY + ["--rules", str(rules), "--route", "env", "--"] + SERVER, ["FROM_ROUTE"])
    assert seen["env"] == {"FROM_ROUTE": "r"}  # the route's env still applies to the command given


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(PROXY + list(args), capture_output=True, text=True, timeout=30, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_a_route_without_a_command_and_none_given_says_what_to_do(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.fs]\nprotocol = "mcp"\n')
    done = run("--rules", str(rules), "--route", "fs")
    assert done.returncode == 2
    assert done.stderr == (f"reminder-bridge stdio: no command given: route 'fs' of {rules} has no `command`; "
                           "put one after -- (reminder-bridge stdio [options] -- CMD ARGS)\n")


def test_a_route_whose_env_reads_a_variable_that_is_not_set_is_refused_naming_it(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[routes.env]\nprotocol = "mcp"\ncommand = ["true"]\nenv.TOKEN = "${NOT_SET_HERE}"\n')
    done = run("--rules", str(rules), "--route", "env")
    assert done.returncode == 2
    assert f"{rules}:4: routes.env.env.TOKEN: ${{NOT_SET_HERE}}: the environment variable NOT_SET_HERE is not set" \
        in done.stderr
