"""bridge/cli/options.py and the rules keys it overrides: `host_era` / `server_era` (issue 21, point 2),
the `--host-era` / `--server-era` flags, and what `check` says of them."""
import argparse
import subprocess
import sys

import pytest

from bridge.cli import build_parser
from bridge.cli.options import with_eras
from bridge.rules import RouteSettings, RulesError, parse_rules_text

ROUTE = '[routes.fs]\nprotocol = "mcp"\ncommand = ["srv"]\n'


def problems(text: str):
    with pytest.raises(RulesError) as exc:
        parse_rules_text(text, "r.toml")
    return exc.value.problems


def test_default_is_auto_and_bridges_nothing():
    settings = RouteSettings()
    assert (settings.host_era, settings.server_era) == ("auto", "auto")
    assert settings.bridged_server_era is None


@pytest.mark.parametrize("host,server,bridges", [
    ("2026-07-28", "2025-11-25", "2025-11-25"), ("auto", "2025-11-25", "2025-11-25"),
    ("2025-11-25", "2026-07-28", "2026-07-28"), ("auto", "2026-07-28", "2026-07-28"),
    ("2025-11-25", "2025-11-25", None), ("2026-07-28", "2026-07-28", None), ("2026-07-28", "auto", None),
    ("auto", "auto", None),
])
def test_era_pairs_that_load(host, server, bridges):
    route = parse_rules_text(f'{ROUTE}host_era = "{host}"\nserver_era = "{server}"\n').route("fs")
    assert (route.host_era, route.server_era, route.bridged_server_era) == (host, server, bridges)


def test_a_bad_value_names_the_key_and_the_line():
    [p] = problems(f'{ROUTE}host_era = "2026-07-28"\nserver_era = "2025-11"\n')
    assert (p.line, p.key) == (5, "routes.fs.server_era")
    assert p.message == 'must be one of auto, 2025-11-25, 2026-07-28 (got "2025-11")'


def test_an_era_on_a_route_of_another_protocol():
    [p] = problems('[routes.p]\nprotocol = "a2a"\nupstream = "http://x:1"\nhost_era = "2026-07-28"\n')
    assert p.key == "routes.p.host_era" and 'protocol is "a2a"' in p.message


def test_defaults_carry_the_eras_to_routes():
    rules = parse_rules_text('[defaults]\nserver_era = "2025-11-25"\n' + ROUTE)
    assert rules.route("fs").server_era == "2025-11-25" and rules.route("fs").bridged_server_era


@pytest.mark.parametrize("command", ["stdio", "serve"])
def test_the_flags_parse_on_stdio_and_serve(command):
    args = build_parser().parse_args([command, "--host-era", "2026-07-28", "--server-era", "2025-11-25"])
    settings = with_eras(args, RouteSettings())
    assert (settings.host_era, settings.server_era) == ("2026-07-28", "2025-11-25")


def test_no_flags_leave_the_settings_as_they_are():
    settings = RouteSettings(server_era="2025-11-25")
    assert with_eras(argparse.Namespace(host_era=None, server_era=None), settings) is settings


def test_flags_over_a_route_that_cannot_take_them():
    with pytest.raises(ValueError, match="protocol is a2a"):
        with_eras(argparse.Namespace(host_era="2026-07-28", server_era=None), RouteSettings(protocol="a2a"))


def test_a_bad_flag_value_is_argparse_s_one_line():
    done = subprocess.run([sys.executable, "-m", "bridge", "stdio", "--server-era", "2025", "--", "true"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "argument --server-era: invalid choice: '2025'" in done.stderr


def test_check_names_the_key(tmp_path):
    rules = tmp_path / "r.toml"
    rules.write_text(f'{ROUTE}host_era = "modern"\n')
    done = subprocess.run([sys.executable, "-m", "bridge", "check", str(rules)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode != 0
    assert f"{rules}:4: routes.fs.host_era: must be one of auto, 2025-11-25, 2026-07-28" in done.stdout + done.stderr


@pytest.mark.parametrize("host, server", [("2026-07-28", "2025-11-25"), ("2025-11-25", "2026-07-28")])
def test_serve_bridges_an_http_upstream_and_a_command_both_ways_but_not_a_shared_child(host, server):
    from bridge.cli.serve import build_routes

    bridged = build_parser().parse_args(["serve", "--protocol", "mcp", "--upstream", "http://127.0.0.1:9/mcp",
                                         "--host-era", host, "--server-era", server])
    [route] = build_routes(bridged, None)
    assert route.settings.bridged_server_era == server
    command = build_parser().parse_args(["serve", "--upstream-command", "--server-era", server, "--", "python3"])
    [route] = build_routes(command, None)
    assert route.settings.bridged_server_era == server
    shared = build_parser().parse_args(["serve", "--upstream-command", "--upstream-command-mode", "shared",
                                        "--server-era", server, "--", "python3"])
    with pytest.raises(ValueError, match='`command_mode = "shared"` is not bridged'):
        build_routes(shared, None)


def test_stdio_refuses_a_2026_07_28_server_over_2024_11_05_sse():
    """A 2026-07-28 server speaks Streamable HTTP only: the era bridge over --upstream refuses the
    older transport by name (the other era is bridged: tests/integration/test_stdio_upstream_era_bridge.py)."""
    done = subprocess.run([sys.executable, "-m", "bridge", "stdio", "--upstream", "http://127.0.0.1:9/mcp",
                           "--server-era", "2026-07-28", "--upstream-transport", "sse"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and "not the 2024-11-05 SSE transport" in done.stderr


@pytest.mark.parametrize("command", ["stdio", "serve"])
def test_input_wait_is_a_flag_over_the_route_s_key(command):
    args = build_parser().parse_args([command, "--input-wait", "2.5"])
    assert with_eras(args, RouteSettings()).input_wait_s == 2.5
    assert RouteSettings().input_wait_s == 300.0
    assert parse_rules_text(f"{ROUTE}input_wait_s = 9\n").route("fs").input_wait_s == 9
    [p] = problems(f"{ROUTE}input_wait_s = 0\n")
    assert p.key == "routes.fs.input_wait_s"


def test_a_zero_input_wait_is_refused_naming_the_flag():
    done = subprocess.run([sys.executable, "-m", "bridge", "stdio", "--input-wait", "0", "--", "true"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--input-wait: must be a number of seconds > 0 (got 0)" in done.stderr
