"""`reminder-bridge serve`: HTTP (MCP Streamable HTTP in both eras, the 2024-11-05 HTTP+SSE
transport, A2A JSON-RPC + SSE) and WebSocket routes in front of remote servers and agents.

Built on aiohttp (server and client) and websockets. Like the stdio transport, it knows frames
and HTTP, never dialects: every JSON-RPC message goes through a sans-I/O pipeline, SSE is relayed
one event at a time, and bytes the pipeline passes are forwarded unchanged.

Which pipeline: one per MCP 2025-11-25 session (`Mcp-Session-Id`, held in a bounded table with
sliding idle expiry), one per request otherwise (a 2026-07-28 request is self-contained; an A2A
request shares only the route's per-task reminder queues).  No reminder state is ever shared
between two sessions or two requests (spec §10).

One module a job: `server` (the aiohttp app and dispatch), `routes` (each route's sessions and
their records in shared state), `bodies` (size and time limits), `own_calls` (what the proxy sends
upstream itself), `relay` (one request upstream and its answer back), `sse_streams`,
`json_streams`, `agent_card`, `websocket`, with `passthrough` and `upstream_errors` beneath them;
`command` and `children` for a route whose upstream is a stdio server the proxy runs.
"""
