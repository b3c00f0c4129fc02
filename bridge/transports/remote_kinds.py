"""The upstream transports `stdio --upstream` speaks, by the names `--upstream-transport` takes.
Apart from `remote_session` (which imports the JSON-RPC codec and the SSE reader) so that
building `stdio`'s parser, before its child starts, imports neither (issue 23: the cold start)."""

AUTO, STREAMABLE, LEGACY_SSE = "auto", "streamable-http", "sse"
TRANSPORTS = (AUTO, STREAMABLE, LEGACY_SSE)
