"""What both outbox halves share (`StoreAddOn`): housekeeping at the first wake and then every
`PRUNE_EVERY_S`, and the back-off after store trouble, doubling up to its ceiling and one timer at
a time."""
from __future__ import annotations

from bridge.outbox.base import PRUNE_EVERY_S, RETRY_FIRST_S, RETRY_LAST_S, StoreAddOn
from bridge.outbox.store import Store
from bridge.pipeline.commands import Defer
from bridge.pipeline.mcp import McpFlow
from bridge.state.scope import Scope


class Counting(StoreAddOn):
    def __init__(self, store: Store):
        super().__init__(store, route="r", wall=lambda: 1_800_000_000.0)
        self.done: list[str] = []

    def _prune(self) -> Defer:
        self.done.append("prune")
        return self._defer(lambda: None, lambda _: [])

    def _retry(self) -> list:
        self.done.append("retry")
        return []


def half(tmp_path, now: list[float]) -> Counting:
    addon = Counting(Store(tmp_path / "s.sqlite3"))
    McpFlow(addons=(addon,), clock=lambda: now[0])
    return addon


def test_housekeeping_runs_at_the_first_wake_then_every_prune_period(tmp_path):
    addon = half(tmp_path, [0.0])
    assert addon.next_wake() == 0.0
    [prune] = addon.wake(1.0)
    assert type(prune) is Defer and prune.lane is addon.store.lane  # the store's own thread
    assert addon.next_wake() == 1.0 + PRUNE_EVERY_S and addon.wake(2.0) == [] and addon.done == ["prune"]


def test_the_back_off_doubles_up_to_its_ceiling_and_keeps_one_timer(tmp_path):
    now = [10.0]
    addon = half(tmp_path, now)
    addon.wake(10.0)
    waits = []
    for _ in range(8):
        addon._retry_later()
        addon._retry_later()  # a second failure before the retry: still one timer
        waits.append(addon.retry_at - now[0])
        assert addon.next_wake() == addon.retry_at
        addon.wake(addon.retry_at)
    assert waits == [min(RETRY_LAST_S, RETRY_FIRST_S * 2 ** n) for n in range(8)]
    assert addon.done == ["prune"] + ["retry"] * 8 and addon.retry_at is None


def test_a_request_that_is_nobodys_owns_nothing(tmp_path):
    addon = Counting(Store(tmp_path / "s.sqlite3"))
    McpFlow(addons=(addon,), scope=Scope.request("r"))
    assert addon.owned is False
