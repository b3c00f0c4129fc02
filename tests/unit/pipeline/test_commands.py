"""The vocabulary between a flow and its transport (`bridge/pipeline/commands.py`), in playbook
form: every write has `to` and `data` on one base, a response says which request it answers (its
`id_key`), and what a flow learned of the peer, or its card, is read through typed calls."""
from __future__ import annotations

import io
import json

from bridge.assembly import make_flow
from bridge.jsonrpc import id_key
from bridge.pipeline.commands import HOST, PEER, Call, CardFlow, Defer, Forward, Learned, Reply, Send, Wakeup, Write, writes
from bridge.telemetry import Recorder

LEGACY_CAPS = {"tools": {}, "_meta": {"harn": {"reminders": {"emit": True}}}}


def flow(protocol: str, **kwargs):
    return make_flow(protocol, None, Recorder(log=io.StringIO()), **kwargs)


def test_every_write_shares_one_base_and_nothing_else_does():
    made = [Forward(PEER, b"a"), Send(HOST, b"b"), Reply(HOST, b"c", 1), Call(PEER, b"d", "own-1")]
    assert all(isinstance(c, Write) for c in made)
    assert not isinstance(Wakeup(1.0), Write) and not isinstance(Defer(lambda: None, lambda _: []), Write)
    assert writes([Wakeup(1.0), *made]) == made
    assert [(c.to, c.data) for c in made] == [(PEER, b"a"), (HOST, b"b"), (HOST, b"c"), (PEER, b"d")]


def test_a_forward_carries_the_very_bytes_and_its_key_takes_no_part_in_equality():
    frame = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    forward = Forward(HOST, frame, id_key(1))
    assert forward.data is frame and forward == Forward(HOST, frame)


def test_a_rewritten_answer_says_which_request_it_answers():
    mcp = flow("mcp")
    mcp.from_host(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"experimental": {"reminders": {}}}}}).encode())
    [answer] = mcp.from_peer(json.dumps({"jsonrpc": "2.0", "id": "init", "result": {
        "protocolVersion": "2025-11-25", "capabilities": LEGACY_CAPS}}).encode())
    assert isinstance(answer, Send) and answer.answers == id_key("init")
    assert mcp.send(HOST, {"jsonrpc": "2.0", "method": "notifications/x"}).answers is None


def test_a_reply_answers_the_request_it_names():
    assert Reply(HOST, b"{}", 7).answers == id_key(7) and Reply(HOST, b"{}", None).answers is None


def test_what_a_flow_learned_of_the_peer_is_typed():
    mcp = flow("mcp")
    assert mcp.learned() is None  # nothing seen yet
    mcp.from_host(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}}}).encode())
    mcp.from_peer(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-11-25", "capabilities": LEGACY_CAPS}}).encode())
    assert mcp.learned() == Learned("legacy", True)


def test_only_a_flow_whose_peer_has_a_card_rewrites_one_and_learns_from_it():
    a2a = flow("a2a")
    assert isinstance(a2a, CardFlow) and not isinstance(flow("mcp"), CardFlow)
    card = {"name": "agent", "url": "http://agent/rpc", "capabilities": {"extensions": [
        {"uri": "https://harn.dev/a2a/reminders/v1"}]}}
    a2a.rewrite_card(card, lambda url: url.replace("http://agent", "http://proxy"))
    learned = a2a.learned()
    assert learned is not None and learned.declared is None
