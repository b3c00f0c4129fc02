"""The one registry of host adapters (spec §11): every reader of host dialects gets them from it."""
from bridge.dialects.claude_channel import ClaudeChannel
from bridge.dialects.hosts import HOST_ADAPTERS, codecs_toward_host, host_dialect_problem, protocol_of
from bridge.dialects.mcp import HOST_CODECS
from bridge.rules import HOST_DIALECTS, RouteSettings


def test_claude_channel_is_registered_for_mcp_with_its_codec():
    adapter = HOST_ADAPTERS["claude-channel"]
    assert (adapter.protocol, adapter.title, adapter.codec) == ("mcp", "Claude Code channels", ClaudeChannel)
    assert protocol_of("claude-channel") == "mcp" and protocol_of("standard") is None and protocol_of(None) is None


def test_the_rules_and_the_mcp_codecs_read_the_registry():
    assert set(HOST_ADAPTERS) <= set(HOST_DIALECTS)
    assert codecs_toward_host("mcp").items() <= HOST_CODECS.items()
    assert codecs_toward_host("acp") == {} and codecs_toward_host("a2a") == {}
    assert RouteSettings(protocol="mcp", host_dialect="claude-channel").host_dialect == "claude-channel"


def test_an_adapter_on_another_protocol_is_refused_with_its_title():
    assert host_dialect_problem("claude-channel", "acp") == (
        '"claude-channel" is a host dialect for MCP only (Claude Code channels), not for acp')
    assert host_dialect_problem("claude-channel", "mcp") is None
    assert host_dialect_problem("claude-channel", None) is None  # a stdio route left to detect it
    assert host_dialect_problem("standard", "acp") is None


def test_adapter_of_finds_an_adapter_on_its_own_protocol_only():
    from bridge.dialects.hosts import adapter_of
    assert adapter_of("claude-channel", "mcp") is HOST_ADAPTERS["claude-channel"]
    assert adapter_of("claude-channel", "acp") is None
    assert adapter_of("standard", "mcp") is None and adapter_of(None, "mcp") is None


def test_the_mcp_flow_reaches_the_channel_adapter_through_the_registry_only():
    import bridge.pipeline.mcp as flow
    assert not any(getattr(v, "__module__", "") == "bridge.dialects.claude_channel" for v in vars(flow).values())
    result = ClaudeChannel.offer({"capabilities": {}}, "srv")
    assert "claude/channel" in result["capabilities"]["experimental"] and "srv" in result["instructions"]
    assert ClaudeChannel.label("a\nb") == "a b" and ClaudeChannel.label("<>") is None
