"""`bridge.urls`: which hosts are loopback (one answer for the admin port, the console's `Host`
check and the routes' `loopback` origins), and URLs shown without their secrets."""
from __future__ import annotations

import pytest

from bridge.admin import _local_name, exposed
from bridge.transports.forwarding import origin_allowed
from bridge.urls import is_loopback, redact

#: RFC 6761 §6.3: `localhost` and every name below it are this machine's; so are loopback addresses.
LOOPBACK = ["localhost", "LocalHost", "app.localhost", "a.b.localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]"]
#: Names that merely look local, and addresses other machines can reach.
NOT_LOOPBACK = ["", None, "localhost.example", "notlocalhost", "localhost-x", "example.com", "0.0.0.0", "::",
                "10.0.0.1", "192.168.1.2", "[2001:db8::1]", "host.docker.internal"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_localhost_names_and_loopback_addresses_are_loopback(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_other_names_and_addresses_are_not(host):
    assert not is_loopback(host)


@pytest.mark.parametrize("host", ["app.localhost", "localhost", "127.0.0.1", "::1"])
def test_the_admin_port_and_the_routes_agree_on_a_loopback_name(host):
    """The regression: an admin port on `app.localhost` was warned about as exposed (admin.py knew
    only `localhost`) while the routes' `loopback` origins accepted `http://app.localhost`."""
    shown = f"[{host}]" if ":" in host else host
    assert origin_allowed(f"http://{shown}:5173", ["loopback"])
    assert not exposed(host, token="")
    assert _local_name(f"{shown}:8080")


@pytest.mark.parametrize("host", ["example.com", "10.0.0.1", "0.0.0.0"])
def test_the_admin_port_and_the_routes_agree_on_a_name_off_this_machine(host):
    assert not origin_allowed(f"http://{host}:5173", ["loopback"])
    assert exposed(host, token="")
    assert not exposed(host, token="t")  # a token keeps others out, wherever it listens


def test_a_url_is_shown_without_its_secrets():
    assert redact("http://user:pw@host/mcp?api_key=K&flag") == "http://***@host/mcp?api_key=***&flag"
    assert redact("redis://:pw@redis:6379/0") == "redis://***@redis:6379/0"
