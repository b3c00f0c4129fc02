"""Whose polls (`bridge.outbox.owners`): the flows of one 2026-07-28 request each hand what they see of
the host, and what their answers carried, to their scope's keeper, which alone polls; frame by frame
with a hand-driven clock."""
from __future__ import annotations

import json

from bridge.outbox.owners import HostedPull, PullOwners
from bridge.pipeline.commands import Defer, Send
from bridge.pipeline.waiting import at_once
from bridge.pipeline.subscriptions import Subscriptions
from bridge.state.scope import Scope
from bridge.transports.driver import run_blocking
from tests.unit.outbox.link import MODERN, PULL, UNLISTENING, Link, event, only_poll, query

ADA = Scope.identity("r", "header:authorization", "Bearer ada")
BOB = Scope.identity("r", "header:authorization", "Bearer bob")


def keeper_of(tmp_path, scope: Scope, owners: PullOwners, book: Subscriptions, beside: Link | None = None) -> Link:
    return Link(tmp_path, PULL, host_caps={}, scope=scope, beside=beside, owners=owners, keeper=True, subscriptions=book)


def request_of(keeper: Link, tmp_path, owners: PullOwners, book: Subscriptions, msg: dict) -> Link:
    """One request of the keeper's scope: its own flow, which sees ``msg``; the keeper goes on with
    what it settled (as `Session.kept` does)."""
    request = Link(tmp_path, PULL, host_caps={}, scope=keeper.flow.scope, beside=keeper, owners=owners,
                   subscriptions=book)
    request.now = keeper.now
    request.host(msg)
    keeper.flow.restore(request.flow.negotiated())
    return request


def tools_call(msg_id: int) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": "t", "_meta": UNLISTENING}}


def test_the_keeper_polls_for_its_requests_and_an_answer_after_the_request_ended_still_counts(tmp_path):
    owners, book = PullOwners(), Subscriptions()
    keeper = keeper_of(tmp_path, ADA, owners, book)
    first = request_of(keeper, tmp_path, owners, book, tools_call(1))
    assert [type(a) for a in first.flow.addons][:1] == [HostedPull] and first.tick() == []  # it polls nothing
    poll = only_poll(keeper.tick())
    assert poll["params"]["_meta"] == UNLISTENING  # the envelope the request showed
    first.flow.close("a 2026-07-28 request is over once answered")  # before the poll's answer comes
    assert keeper.answer(poll, [event("mail-1")], cursor="c1") == []  # held for the identity's next tool result
    source = keeper.pull.source
    assert keeper.pull.store.cursor(source, "acme://n") == "c1"  # stored: the next read goes on from it
    later = request_of(keeper, tmp_path, owners, book, tools_call(2))
    [(_, result)] = later.peer({"jsonrpc": "2.0", "id": 2, "result": {"content": []}})
    assert "domain.active" in result["result"]["content"][0]["text"]  # mail-1, in a later request's result
    assert len(keeper.pull.store.undelivered(source)) == 1  # written; the keeper marks it at its next wake
    keeper.tick()
    assert keeper.pull.store.undelivered(source) == []
    keeper.now += 1.0
    assert query(only_poll(keeper.tick()))["cursor"] == "c1"
    again = request_of(keeper, tmp_path, owners, book, tools_call(3))
    [(_, result)] = again.peer({"jsonrpc": "2.0", "id": 3, "result": {"content": []}})
    assert result["result"]["content"] == []  # once


def test_each_scope_has_its_own_owner_and_a_second_keeper_of_one_scope_polls_only_once_the_first_is_gone(tmp_path):
    owners, book = PullOwners(), Subscriptions()
    ada = keeper_of(tmp_path, ADA, owners, book)
    bob = keeper_of(tmp_path, BOB, owners, book, beside=ada)
    assert owners.of(ADA) is ada.pull and owners.of(BOB) is bob.pull
    request_of(bob, tmp_path, owners, book, tools_call(1))
    assert ada.tick() == []  # bob's request readied bob's keeper alone
    assert only_poll(bob.tick())["method"] == "resources/read"
    twin = keeper_of(tmp_path, ADA, owners, book, beside=ada)  # another upstream session of ada's (the era bridge)
    request_of(ada, tmp_path, owners, book, tools_call(2))
    twin.pull.noted({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": UNLISTENING}})
    twin.flow.restore(ada.flow.negotiated())
    assert owners.of(ADA) is ada.pull and twin.tick() == []  # ada's polls are its first keeper's
    assert only_poll(ada.tick())["method"] == "resources/read"
    ada.flow.close("its upstream session ended")
    twin.now += 2.0
    assert owners.of(ADA) is None and only_poll(twin.tick())["method"] == "resources/read"
    assert owners.of(ADA) is twin.pull


def test_what_the_keeper_finds_goes_to_a_listen_stream_of_its_scope_that_opted_in(tmp_path):
    owners, book = PullOwners(), Subscriptions()
    keeper = keeper_of(tmp_path, ADA, owners, book)
    listening = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN}}  # declares reminders
    request_of(keeper, tmp_path, owners, book, listening)
    book.opened(ADA, "stream-of-ada", "l1")  # a listen of ada's that took reminders (another request's flow)
    book.opened(BOB, "stream-of-bob", "l9")
    poll = only_poll(keeper.tick())
    commands = keeper.flow.from_peer(json.dumps({"jsonrpc": "2.0", "id": poll["id"], "result": {"contents": [
        {"uri": poll["params"]["uri"], "text": json.dumps({"events": [event("mail-1")], "cursor": "c1"})}]}}).encode())
    sends = [c for c in unwound(commands) if isinstance(c, Send)]
    assert [(s.stream, json.loads(s.data)["method"]) for s in sends] == [("stream-of-ada", "notifications/reminder")]
    assert json.loads(sends[0].data)["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "l1"


def unwound(commands) -> list:
    """The commands, deferred work run at once (as `link.perform` does, keeping each command)."""
    out = []
    for command in commands:
        if isinstance(command, Defer):
            out += unwound(at_once(command.done(run_blocking(command))))
        else:
            out.append(command)
    return out
