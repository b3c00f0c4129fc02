"""The one capability rule the three flows call: what the peer declared, what the host is told."""
import copy

from bridge.dialects import a2a, acp, mcp
from bridge.pipeline.a2a import CAPABILITIES as A2A
from bridge.pipeline.acp import CAPABILITIES as ACP, HELD_CAPABILITY
from bridge.pipeline.capabilities import CapabilityRule, Declared
from bridge.pipeline.mcp import CAPABILITIES as MCP

STANDARD_CAP = {"emit": True}


def test_the_spoken_dialect_is_the_first_that_declared_anything():
    assert Declared({"standard": None, "legacy": {}}).spoken == "legacy"
    assert Declared({"standard": {}, "legacy": {"a": 1}}).spoken == "standard"
    assert Declared({"standard": None, "legacy": None}).spoken == "none" and not Declared({"x": None}).any


def test_each_flow_names_its_protocols_codecs():
    assert (MCP.codecs, ACP.codecs, A2A.codecs) == (mcp.CODECS, acp.CODECS, a2a.CODECS)


def test_a_host_in_the_peers_dialect_or_with_no_reminder_dialect_is_told_nothing_new():
    declared = MCP.read({"reminders": STANDARD_CAP})
    assert MCP.told(declared, peer="standard", host="standard") is None
    assert MCP.told(declared, peer="standard", host="none") is None
    assert MCP.told(MCP.read({}), peer="none", host="legacy") is None


def test_mcp_tells_a_legacy_host_only_its_own_dialect():
    caps = {"reminders": STANDARD_CAP}
    declared = MCP.read(caps)
    cap = MCP.told(declared, peer="standard", host="legacy")
    assert cap == STANDARD_CAP
    out = copy.deepcopy(caps)
    MCP.write(out, "legacy", cap)
    assert out == {"_meta": {"harn": {"reminders": STANDARD_CAP}}}


def test_borrowing_takes_another_dialects_declaration_when_the_peers_own_said_nothing():
    declared = MCP.read({"_meta": {"harn": {"reminders": STANDARD_CAP}}})
    assert MCP.told(declared, peer="standard", host="standard") == STANDARD_CAP  # a peer configured standard
    no_borrow = CapabilityRule(mcp.CODECS, borrow=False, exclusive=True, replaces=True)
    assert no_borrow.told(declared, peer="standard", host="standard") is None


def test_replaces_overwrites_a_host_dialect_declaration_unlike_the_peers():
    caps = {"reminders": {"emit": False}, "_meta": {"harn": {"reminders": STANDARD_CAP}}}
    assert MCP.told(MCP.read(caps), peer="legacy", host="standard") == STANDARD_CAP
    assert A2A.told(A2A.read(caps), peer="legacy", host="standard") is None  # A2A: the caller's own stands


def test_acp_adds_the_clients_dialect_beside_the_agents_and_offers_what_it_holds():
    caps = {"reminders": {"inject": True, "emit": True}}
    declared = ACP.read(caps)
    cap = ACP.told(declared, peer="standard", host="legacy")
    out = copy.deepcopy(caps)
    ACP.write(out, "legacy", cap)
    assert out["reminders"] == caps["reminders"] and acp.EMITTED in out["_meta"]["harn"]["sessionUpdateExtensions"]
    assert ACP.told(ACP.read({}), peer="none", host="standard") is None
    assert ACP.told(ACP.read({}), peer="none", host="standard", held=HELD_CAPABILITY) == HELD_CAPABILITY


def test_withdraw_removes_every_reminder_capability():
    caps = {"reminders": STANDARD_CAP, "_meta": {"harn": {"reminders": STANDARD_CAP}}, "tools": {}}
    MCP.withdraw(caps)
    assert MCP.read(caps).spoken == "none" and caps["tools"] == {}
