"""The built-in route settings in plain form (bridge/defaults.py, what `stdio -- CMD` runs on
without pydantic) are `RouteSettings()`, key for key, and its two derived answers agree."""
from __future__ import annotations

import pytest

from bridge.defaults import ROUTE, RouteDefaults, Plain
from bridge.rules import RouteSettings


def _plain(value):
    return vars(value) if isinstance(value, Plain) else value


def test_the_plain_defaults_are_route_settings_key_for_key():
    assert list(vars(ROUTE)) == list(RouteSettings.model_fields)
    assert {name: _plain(value) for name, value in vars(ROUTE).items()} == RouteSettings().model_dump()


def test_identity_and_bridged_era_read_the_same_on_both():
    for update in ({}, {"server_era": "2025-11-25"}, {"host_era": "2026-07-28", "server_era": "2025-11-25"},
                   {"host_era": "2025-11-25", "server_era": "2025-11-25"}):
        plain, validated = ROUTE.replace(**update), RouteSettings(**update)
        assert isinstance(plain, RouteDefaults)
        assert (plain.bridged_server_era, plain.identity) == (validated.bridged_server_era, validated.identity)


def test_the_plain_defaults_are_read_only():
    with pytest.raises(AttributeError):
        ROUTE.stage = "observe"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ROUTE.replace(stagee="observe")
    assert ROUTE.stage == "translate"
