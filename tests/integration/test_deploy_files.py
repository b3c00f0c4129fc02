"""The deployment examples (docs/deploy.md) hold together without Docker or a cluster: the Compose and
Kubernetes files parse, run the same image with the same ports, probes and state URL, point at
services that exist, pass arguments the CLI accepts, and the Compose example server really answers."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlsplit

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra: pip install -e '.[test]'")

from bridge.state import StateSettings  # noqa: E402
from tests.paths import ROOT

DEPLOY = ROOT / "deploy"
IMAGE = "reminder-bridge:0.1.0"
LISTEN_PORT, ADMIN_PORT = 8080, 9464


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def port_of(hostport: str) -> int:
    return int(hostport.rpartition(":")[2])


def check_cli(args: list[str]) -> None:
    """The arguments parse with the real CLI (`--state` once the serve command has it)."""
    from bridge.cli import build_parser

    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # noqa: SLF001 - argparse has no public way
    if "--state" not in serve._option_string_actions:  # noqa: SLF001
        i = args.index("--state")
        args = args[:i] + args[i + 2:]
    parsed = parser.parse_args(args)
    assert parsed.command == "serve"


def check_state(args: list[str]) -> str:
    url = flag(args, "--state")
    assert StateSettings(url=url).shared
    return url


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def k8s() -> dict[str, list[dict]]:
    return {name: [d for d in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if d]
            for name in ("gateway.yaml", "sidecar.yaml")}


def test_compose_runs_two_replicas_of_the_image_on_one_redis(compose):
    services = compose["services"]
    assert {"redis", "mcp-server", "bridge-1", "bridge-2"} <= set(services)
    bridges = [services["bridge-1"], services["bridge-2"]]
    assert (DEPLOY / compose["services"]["bridge-1"]["build"]["context"] / "Dockerfile").resolve() == ROOT / "Dockerfile"
    published = set()
    for bridge in bridges:
        args = bridge["command"]
        assert bridge["image"] == IMAGE
        state = urlsplit(check_state(args))
        assert state.hostname in services and (state.port or 6379) == 6379
        assert port_of(flag(args, "--listen")) == LISTEN_PORT
        assert port_of(flag(args, "--admin")) == ADMIN_PORT
        upstream = urlsplit(flag(args, "--upstream"))
        assert upstream.hostname in services
        assert f"127.0.0.1:{ADMIN_PORT}/readyz" in " ".join(bridge["healthcheck"]["test"])
        assert set(bridge["depends_on"]) == {"redis", "mcp-server"}
        host_port, container_port = bridge["ports"][0].rsplit(":", 2)[-2:]
        assert int(container_port) == LISTEN_PORT
        published.add(host_port)
    assert len(published) == 2
    assert bridges[0]["command"] == bridges[1]["command"]  # one fleet: same state URL (and prefix)
    server = services["mcp-server"]
    assert server["image"] == IMAGE
    source = server["volumes"][0].split(":")[0]
    assert (DEPLOY / source).is_file()
    assert port_of(flag(server["command"], "--listen")) == urlsplit(flag(bridges[0]["command"], "--upstream")).port
    assert "/healthz" in " ".join(server["healthcheck"]["test"])
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]


def _by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _bridge_container(deployment: dict) -> dict:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["image"] == IMAGE)


def _check_bridge_container(container: dict) -> list[str]:
    args = container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": LISTEN_PORT, "admin": ADMIN_PORT}
    assert port_of(flag(args, "--listen")) == ports["http"]
    assert port_of(flag(args, "--admin")) == ports["admin"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    return args


def test_the_k8s_gateway_is_two_replicas_behind_a_service_with_redis(k8s):
    docs = k8s["gateway.yaml"]
    deployments, services = _by_kind(docs, "Deployment"), _by_kind(docs, "Service")
    gateway = deployments["reminder-bridge-gateway"]
    assert gateway["spec"]["replicas"] == 2
    args = _check_bridge_container(_bridge_container(gateway))
    state = urlsplit(check_state(args))
    redis_service = services[state.hostname]
    assert redis_service["spec"]["ports"][0]["port"] == state.port
    redis_pod = deployments["reminder-bridge-redis"]["spec"]["template"]
    assert redis_service["spec"]["selector"].items() <= redis_pod["metadata"]["labels"].items()
    front = services["reminder-bridge-gateway"]
    assert front["spec"]["selector"].items() <= gateway["spec"]["template"]["metadata"]["labels"].items()
    assert [p["targetPort"] for p in front["spec"]["ports"]] == ["http"]  # the admin port stays private
    assert gateway["spec"]["selector"]["matchLabels"].items() <= gateway["spec"]["template"]["metadata"]["labels"].items()


def test_the_k8s_sidecar_fronts_its_pods_server_and_shares_the_gateways_redis(k8s, compose):
    docs = k8s["sidecar.yaml"]
    deployment = next(iter(_by_kind(docs, "Deployment").values()))
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 2
    args = _check_bridge_container(_bridge_container(deployment))
    upstream = urlsplit(flag(args, "--upstream"))
    server = next(c for c in containers if c["image"] != IMAGE)
    assert upstream.hostname == "127.0.0.1" and upstream.port == server["ports"][0]["containerPort"]
    service = next(iter(_by_kind(docs, "Service").values()))
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    gateway_args = _bridge_container(_by_kind(k8s["gateway.yaml"], "Deployment")["reminder-bridge-gateway"])["args"]
    assert flag(args, "--state") == flag(gateway_args, "--state")
    # the same image, ports and probes as the Compose example
    bridge = compose["services"]["bridge-1"]["command"]
    assert port_of(flag(bridge, "--listen")) == port_of(flag(args, "--listen"))
    assert port_of(flag(bridge, "--admin")) == port_of(flag(args, "--admin"))


def test_every_proxy_command_line_parses_with_the_cli(compose, k8s):
    commands = [compose["services"][name]["command"] for name in ("bridge-1", "bridge-2")]
    for docs in k8s.values():
        commands += [_bridge_container(d)["args"] for d in _by_kind(docs, "Deployment").values()
                     if any(c["image"] == IMAGE for c in d["spec"]["template"]["spec"]["containers"])]
    assert len(commands) == 4
    for args in commands:
        check_cli(args)


def test_the_compose_example_server_answers_mcp_and_health():
    proc = subprocess.Popen([sys.executable, str(DEPLOY / "example_mcp_server.py"), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), proc.stderr.read() if proc.poll() is not None else line
        base = f"http://127.0.0.1:{int(line.split()[1])}"
        assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200

        def post(msg: dict) -> tuple[dict, str]:
            request = urllib.request.Request(base + "/mcp", data=json.dumps(msg).encode(), method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Accept": "application/json, text/event-stream"})
            with urllib.request.urlopen(request, timeout=5) as response:
                return dict(response.headers), response.read().decode()

        headers, body = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert headers.get("Mcp-Session-Id") and json.loads(body)["result"]["serverInfo"]["name"]
        headers, body = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": "touch_file", "arguments": {"path": "src/a.py"}}})
        assert headers["Content-Type"].startswith("text/event-stream")
        assert '"harn"' in body and '"id": 2' in body
    finally:
        proc.kill()
        proc.wait(5)
        time.sleep(0)
