"""`Scope`: every key of reminder state names its owner, and two owners never share a key."""
from __future__ import annotations

from bridge.state.scope import ACP_SESSION, STDIO, Scope


def test_keys_of_different_owners_never_meet_whatever_ids_clients_send():
    owners = [Scope.mcp_session("fs", "s1"), Scope.mcp_session("fs", "s2"), Scope.mcp_session("git", "s1"),
              Scope.task("fs", "s1"), Scope.identity("fs", "header:authorization", "s1"),
              Scope.connection("fs", STDIO), Scope.connection("fs"), Scope.connection("fs"), Scope.request("fs"),
              Scope.connection("fs", STDIO).within(ACP_SESSION, "s1"), Scope.connection("fs").within(ACP_SESSION, "s1")]
    keys = [owner.key("budget") for owner in owners]
    assert len(set(keys)) == len(keys)
    assert Scope.mcp_session("fs", "s1").key("budget") == Scope.mcp_session("fs", "s1").key("budget")  # stable


def test_credentials_and_huge_ids_never_reach_a_key():
    secret = "Bearer sk-live-" + "x" * 10_000
    for scope in (Scope.identity("fs", "header:authorization", secret), Scope.mcp_session("fs", secret),
                  Scope.task("fs", secret)):
        assert "sk-live" not in scope.key("queue") and len(scope.key("queue")) < 120
    assert Scope.mcp_session("fs", secret).shown == Scope.mcp_session("fs", secret).id[:12]  # shown: a digest
    assert Scope.task("fs", "t-1").shown == "t-1"  # the agent's own name for its task may be shown


def test_only_requests_are_nobodys_beyond_their_answer():
    assert not Scope.request("fs").lasting
    assert all(s.lasting for s in (Scope.connection("fs"), Scope.mcp_session("fs", "a"),
                                   Scope.identity("fs", "header:authorization", "a")))


def test_ids_shaped_like_keys_or_hostile_reach_only_their_own_state():
    """Separators, NUL, a lone surrogate, a megabyte: every id gets a key of its own, short and
    printable, and never one another id (or another kind, route or what) already has."""
    hostile = ["", "x", "x:budget", "x/acp-session:y", "\x00", "\x1b[2J", "\ud800", "i" * 1_000_000,
               "fs:task:x", "task", "mcp-session"]
    keys = set()
    for given in hostile:
        for scope in (Scope.task("fs", given), Scope.mcp_session("fs", given),
                      Scope.identity("fs", "header:authorization", given),
                      Scope.connection("fs", STDIO).within(ACP_SESSION, given)):
            for what in ("budget", "queue", "outbox:bridge://reminders"):
                key = scope.key(what)
                assert key.isprintable() and len(key) < 200, key[:80]
                keys.add(key)
    assert len(keys) == len(hostile) * 4 * 3
    assert len(Scope.task("fs", "t" * 1000).shown) <= 64  # what a user is shown is bounded too
