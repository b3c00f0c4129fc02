"""Flows put together from a route's rules: the protocol's pipeline and its add-ons.

The one place that knows both the pipelines and the add-ons, so that neither imports the other.
It sits above `pipeline` and `outbox` (the transports, the command line and the demo call it),
so the pipeline never imports an add-on, lazily or not.
"""
from __future__ import annotations

from typing import Any

from bridge.outbox.addon import outbox_for
from bridge.pipeline.a2a import A2AFlow
from bridge.pipeline.acp import AcpFlow
from bridge.pipeline.flow import Flow
from bridge.pipeline.mcp import McpFlow
from bridge.rules import RouteSettings
from bridge.telemetry import Recorder

PROTOCOLS: dict[str, type[Flow]] = {"mcp": McpFlow, "acp": AcpFlow, "a2a": A2AFlow}


def make_flow(protocol: str, settings: RouteSettings | None = None, recorder: Recorder | None = None, *,
              outbox: bool = True, **kwargs: Any) -> Flow:
    """The pipeline for one connection or session of ``protocol``. ``outbox=False``: no outbox
    add-on even if the route declares one (a request that is its own session has nowhere to
    deliver polled events later)."""
    settings = settings or RouteSettings()
    recorder = recorder or Recorder()
    addons: tuple[Any, ...] = ()
    if protocol == "mcp" and outbox and (settings.outbox is not None or settings.serve_outbox is not None):
        addons = outbox_for(settings, recorder)
    return PROTOCOLS[protocol](settings, recorder, addons=addons, **kwargs)
