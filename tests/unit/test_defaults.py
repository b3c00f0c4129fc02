"""The built-in route settings in plain form (bridge/defaults.py, what `stdio -- CMD` runs on
without pydantic) are `RouteSettings()`, key for key, and its two derived answers agree."""
from __future__ import annotations

import dataclasses

from bridge.defaults import ROUTE, RouteDefaults
from bridge.rules import RouteSettings


def _plain(value):
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


def test_the_plain_defaults_are_route_settings_key_for_key():
    validated = RouteSettings()
    assert [f.name for f in dataclasses.fields(RouteDefaults)] == list(RouteSettings.model_fields)
    assert {name: _plain(getattr(ROUTE, name)) for name in RouteSettings.model_fields} == validated.model_dump()


def test_identity_and_bridged_era_read_the_same_on_both():
    for update in ({}, {"server_era": "2025-11-25"}, {"host_era": "2026-07-28", "server_era": "2025-11-25"},
                   {"host_era": "2025-11-25", "server_era": "2025-11-25"}):
        plain, validated = dataclasses.replace(ROUTE, **update), RouteSettings(**update)
        assert (plain.bridged_server_era, plain.identity) == (validated.bridged_server_era, validated.identity)
