"""Flows for tests that feed frames by hand, with no event loop and no driver.

`make_flow` is the route factory's, except that what the flow asks of in-process state
(`Perform` on memory: a budget charge, an A2A task queue) is performed at once, as a driver would
(`bridge.pipeline.waiting.at_once`), so a test sees the commands that reach a wire.  The
playbook tests (tests/unit/pipeline/test_pipeline_playbooks.py) use the plain factory to see each Perform.
"""
from __future__ import annotations

from typing import Any

from bridge.assembly import make_flow as _make_flow
from bridge.pipeline.waiting import at_once

#: the entries a transport feeds; each gives commands that may hold a Perform
ENTRIES = ("from_host", "from_peer", "wake", "written", "resume")


def inline(flow: Any) -> Any:
    """``flow``, its entries giving what follows their in-process Performs."""
    for name in ENTRIES:
        entry = getattr(flow, name)
        setattr(flow, name, lambda *args, _entry=entry, **kwargs: at_once(_entry(*args, **kwargs)))
    return flow


def make_flow(*args: Any, **kwargs: Any) -> Any:
    return inline(_make_flow(*args, **kwargs))
