"""Flows put together from a route's rules: the protocol's pipeline and its add-ons.

The one place that knows both the pipelines and the add-ons, so that neither imports the other.
It sits above `pipeline` and `outbox` (the transports, the command line and the demo call it),
so the pipeline never imports an add-on, lazily or not.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.defaults import ROUTE
from bridge.telemetry import Recorder

if TYPE_CHECKING:
    from bridge.pipeline.flow import Flow
    from bridge.rules import RouteSettings


def flow_class(protocol: str) -> type[Flow]:
    """The flow of ``protocol``, its module imported when a route first makes one: a stdio proxy
    runs one protocol, and it starts (the delay a host sees first) without the others'."""
    if protocol == "mcp":
        from bridge.pipeline.mcp import McpFlow

        return McpFlow
    if protocol == "acp":
        from bridge.pipeline.acp import AcpFlow

        return AcpFlow
    if protocol == "a2a":
        from bridge.pipeline.a2a import A2AFlow

        return A2AFlow
    raise KeyError(protocol)


def make_flow(protocol: str, settings: RouteSettings | None = None, recorder: Recorder | None = None, *,
              owners: Any = None, keeper: bool = False, **kwargs: Any) -> Flow:
    """The pipeline for one connection or session of ``protocol``. ``owners``: the route's book of
    outbox pull owners (`bridge.outbox.owners`), for a flow of one request whose scope's polls its
    keeper owns, or (``keeper``) for that keeper."""
    settings = settings or ROUTE
    recorder = recorder or Recorder()
    addons: tuple[Any, ...] = ()
    if protocol == "mcp" and (settings.outbox is not None or settings.serve_outbox is not None):
        from bridge.outbox.addon import outbox_for  # only a route that declares an outbox pays for one

        addons = outbox_for(settings, recorder, owners=owners, keeper=keeper)
    return flow_class(protocol)(settings, recorder, addons=addons, **kwargs)
