"""The deployment examples (docs/deploy.md) hold together without Docker or a cluster: the Compose and
Kubernetes files parse, run the same image with the same ports, probes and state URL, point at
services that exist, pass arguments the CLI accepts, and the Compose example server really answers.

And they are safe as shipped (issue 19, finding 16): the image has a numeric non-root user that
every manifest runs as; an admin port off loopback always has a bearer token from a Secret (or a
required Compose variable), which the probes send; sessions stay on the replica that holds their
state. Each manifest's own command line is run with a real proxy: the project's `admin_exposed`
check stays quiet, and the manifest's probe passes with the token and fails without it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra: pip install -e '.[test]'")

from bridge.admin import split_hostport  # noqa: E402
from bridge.state import StateSettings  # noqa: E402
from bridge.urls import is_loopback  # noqa: E402
from tests.paths import ROOT
from tests.peers.processes import Running, peer

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
    assert server["image"] == IMAGE  # which holds the bundled example server
    assert server["entrypoint"] == ["python", "-m", "bridge.examples.mcp_legacy_http"]
    assert int(flag(server["command"], "--port")) == urlsplit(flag(bridges[0]["command"], "--upstream")).port
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
    assert container["livenessProbe"]["exec"]["command"] == probe_of(ports["admin"], "/healthz")
    assert container["readinessProbe"]["exec"]["command"] == probe_of(ports["admin"], "/readyz")
    return args


def probe_of(port: int, path: str) -> list[str]:
    """The health check that sends the admin token (bridge/probe.py)."""
    return ["python", "-m", "bridge.probe", f"http://127.0.0.1:{port}{path}"]


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


def test_the_compose_example_server_answers_mcp_and_health(compose):
    server = compose["services"]["mcp-server"]
    argv = server["entrypoint"][2:] + [a for a in server["command"] if a not in ("0.0.0.0", "3000")]
    assert argv == ["bridge.examples.mcp_legacy_http", "--host", "--port", "--any-session"]
    proc = subprocess.Popen([sys.executable, "-m", "bridge.examples.mcp_legacy_http", "--host", "127.0.0.1",
                             "--port", "0", "--any-session"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), proc.stderr.read() if proc.poll() is not None else line
        base = f"http://127.0.0.1:{int(line.split()[1].rstrip(':'))}"
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


# -- safe as shipped (issue 19, finding 16) ---------------------------------------------------------------
TOKEN = "REMINDER_BRIDGE_ADMIN_TOKEN"


def image_user() -> tuple[int, int]:
    """The Dockerfile's USER, which must be numeric (`runAsNonRoot` can only check a number)."""
    user = re.findall(r"^USER\s+(\S+)\s*$", (ROOT / "Dockerfile").read_text(), re.M)[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit(), f"USER {user} is not numeric"
    return int(uid), int(gid)


def test_the_image_runs_as_a_numeric_user_that_is_not_root():
    uid, gid = image_user()
    assert uid != 0 and gid != 0
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"--uid {uid}" in dockerfile and f"--gid {gid}" in dockerfile  # the user exists, with a home


def _pods(k8s: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    return [(f"{file}/{name}", d["spec"]["template"]["spec"]) for file, docs in k8s.items()
            for name, d in _by_kind(docs, "Deployment").items()]


def test_every_k8s_container_runs_as_non_root_and_the_proxy_as_the_images_user(k8s):
    uid, gid = image_user()
    for where, pod in _pods(k8s):
        for container in pod["containers"]:
            effective = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
            assert effective.get("runAsNonRoot") is True, f"{where}/{container['name']}"
            assert effective.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
            if container["image"] != IMAGE and container["image"].startswith("registry.example.com"):
                continue  # the user's own server: its uid is its image's
            assert isinstance(effective.get("runAsUser"), int) and effective["runAsUser"] != 0, where
            if container["image"] == IMAGE:
                assert (effective["runAsUser"], effective["runAsGroup"]) == (uid, gid), where
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, where
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], where


def _bridges(compose: dict, k8s: dict[str, list[dict]]) -> list[tuple[str, list[str], Any, list[str]]]:
    """(where, args, how the token reaches the process, its readiness check) of every proxy the
    examples run."""
    out = []
    for name in ("bridge-1", "bridge-2"):
        service = compose["services"][name]
        out.append((f"compose/{name}", service["command"], service.get("environment", {}).get(TOKEN),
                    service["healthcheck"]["test"][1:]))
    for where, pod in _pods(k8s):
        for container in pod["containers"]:
            if container["image"] == IMAGE:
                env = {e["name"]: e for e in container.get("env", [])}
                out.append((where, container["args"], env.get(TOKEN), container["readinessProbe"]["exec"]["command"]))
    return out


def test_an_admin_port_off_loopback_takes_its_token_from_a_secret(compose, k8s):
    bridges = _bridges(compose, k8s)
    assert len(bridges) == 4
    for where, args, token, _ in bridges:
        host, _ = split_hostport(flag(args, "--admin"))
        if is_loopback(host):
            continue
        assert token is not None, f"{where}: --admin {host} without {TOKEN}"
        if where.startswith("compose/"):  # a required variable (deploy/.env): `up` refuses without it
            assert isinstance(token, str) and token.startswith("${" + TOKEN + ":?"), where
        else:  # from a Secret, never a literal in the manifest
            assert "value" not in token and token["valueFrom"]["secretKeyRef"]["key"], where
    for name in ("bridge-1", "bridge-2"):
        assert compose["services"][name]["healthcheck"]["test"][1:] == probe_of(ADMIN_PORT, "/readyz")
        assert compose["services"][name]["user"] == "%d:%d" % image_user()


def test_sessions_reach_the_replica_that_holds_their_state(k8s, compose):
    """A Service in front of several proxies keeps a client on one Pod where the state of its session
    is not shared: always with a server per Pod (the sidecar: its sessions live in that server), and
    on the gateway too (streams and reminders held for a tool result stay on their replica)."""
    for file, docs in k8s.items():
        deployments = _by_kind(docs, "Deployment")
        for service in _by_kind(docs, "Service").values():
            target = next((d for d in deployments.values() if service["spec"]["selector"].items()
                           <= d["spec"]["template"]["metadata"]["labels"].items()), None)
            if target is None or not any(c["image"] == IMAGE for c in target["spec"]["template"]["spec"]["containers"]):
                continue
            args = _bridge_container(target)["args"]
            assert StateSettings(url=flag(args, "--state")).shared, file  # budgets and session records
            assert target["spec"]["replicas"] > 1
            assert service["spec"]["sessionAffinity"] == "ClientIP", f"{file}: {service['metadata']['name']}"
            timeout = service["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"]
            assert timeout >= 3600  # as long as the proxy keeps an idle session (session_idle_s)
    for name in ("bridge-1", "bridge-2"):  # two replicas on two ports: a client picks one; state is shared
        assert StateSettings(url=flag(compose["services"][name]["command"], "--state")).shared


def _run_as_shipped(args: list[str], upstream: Running, redis_url: str) -> tuple[Running, int]:
    """A manifest's proxy command line, run here: the same hosts and flags, with the ports (chosen
    by the proxy), the upstream and the state URL replaced by local ones; and its admin port."""
    args = list(args)
    for name in ("--listen", "--admin"):
        args[args.index(name) + 1] = args[args.index(name) + 1].rpartition(":")[0] + ":0"
    args[args.index("--upstream") + 1] = f"http://127.0.0.1:{upstream.port}"
    args[args.index("--state") + 1] = redis_url
    bridge = Running([sys.executable, "-m", "bridge", *args], "stderr")
    # logged before the `listening` line Running waited for (the shipped --log-level info shows it)
    admin = next(json.loads(line)["port"] for line in bridge.stderr if '"admin_listening"' in line)
    return bridge, admin


def _probe(command: list[str], admin: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [sys.executable if part == "python" else part.replace(f":{ADMIN_PORT}/", f":{admin}/")
               for part in command]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, env=env, cwd=ROOT)


def test_each_shipped_command_line_keeps_its_admin_port_closed_and_its_probes_pass(compose, k8s, redis_url,
                                                                                   monkeypatch):
    upstream = peer("tests.peers.faulty_http")
    secret = "t0ken-from-the-secret"
    seen: set[tuple[str, ...]] = set()
    try:
        for where, args, _, readiness in _bridges(compose, k8s):
            if tuple(args) in seen:
                continue
            seen.add(tuple(args))
            monkeypatch.setenv(TOKEN, secret)  # what the Secret (or deploy/.env) gives the container
            bridge, admin = _run_as_shipped(args, upstream, redis_url)
            try:
                # logged (or not) before the `listening` line Running waited for
                assert not [line for line in bridge.stderr if '"admin_exposed"' in line], where
                with_token = _probe(readiness, admin, dict(os.environ))
                assert with_token.returncode == 0, (where, with_token.stderr)
                without = _probe(readiness, admin, {k: v for k, v in os.environ.items() if k != TOKEN})
                assert without.returncode == 1 and "HTTP 401" in without.stderr, (where, without.stderr)
                assert secret not in without.stderr + with_token.stderr
            finally:
                bridge.stop()
        assert len(seen) == 3  # compose (both replicas alike), the gateway, the sidecar
        # the check these runs rely on is live: the same command line without a token trips it
        monkeypatch.delenv(TOKEN)
        bridge, _ = _run_as_shipped(compose["services"]["bridge-1"]["command"], upstream, redis_url)
        try:
            assert [line for line in bridge.stderr if '"admin_exposed"' in line], bridge.stderr[-5:]
        finally:
            bridge.stop()
    finally:
        upstream.stop()
