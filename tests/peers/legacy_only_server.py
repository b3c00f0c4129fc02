"""An MCP server written with the official `mcp` SDK that speaks only 2025-11-25 on stdio: the SDK's
handshake-only loop (`serve_loop`), so `server/discover` is an unknown method and a request before
`initialize` is refused, as a server that never moved to 2026-07-28 behaves.

    python -m tests.peers.legacy_only_server SEEN_FILE

Every message it receives is appended to SEEN_FILE (one JSON object a line), so a test can check
what reached it and in which order. Tools: `echo {text}`; `remind {path}` sends a legacy Harn
reminder (`notifications/message` with `_meta.harn.reminder`), then answers; `log {text}` sends a
plain log line (logger "legacy"), then answers; `ask {question}` asks its client to sample
(`sampling/createMessage`) and answers with the text, or the refusal; `confirm {question}` asks
(`elicitation/create`) for a yes or no and answers with the action and the answer, or the refusal;
`nudge {question, path}` asks as `ask` does, sends a Harn reminder for `before/<path>` on the
call's stream while the question waits, one for `after/<path>` once it is answered, then answers;
`ponder {question}` asks as `ask` does, reports progress 1 of 2 while the question waits and 2 of
2 once it is answered, then answers;
`count {n}` reports progress 1..n of n (to the call's progressToken), then answers; `hold` reports
progress 0 and answers never (until cancelled);
`consult {question}` the same as `ask` through the SDK's
resolvers, which ask in the era's way (at 2026-07-28: an `input_required` result); `where` the
client's roots (`roots/list`) the same way; `touch {path}` answers, then (ambient, after its
answer, as a GET stream's messages are) sends the three `list_changed`, `resources/updated` for
`file:///notes.txt`, a Harn reminder for `path` and a log line "ambient" (served at 2026-07-28, it
publishes the tools change and the update to listen streams instead; built for HTTP, it sends them
unrelated to the call, which puts them on the session's GET stream). A resource
`file:///notes.txt` (subscribable) and a prompt `greet`.
"""
from __future__ import annotations

import json
import sys
import warnings
from typing import Annotated, TextIO

import anyio
import mcp_types as types
import pydantic
from mcp.server import MCPServer
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, ListRoots, Resolve, Sample
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import SessionMessage

from tests.peers import sdk_tools

NOTES = "remember the milk"
#: the tools it lists, as a test expects them
TOOLS = frozenset({"echo", "remind", "log", "touch", "ask", "nudge", "count", "hold", "confirm", "consult", "where",
                   "ponder"})
TAGS = ("workspace", "file_changed")
#: what a `touch` sends once its answer is written: request id (as text) → notifications
AFTER: dict[str, list[dict]] = {}
NOTIFICATION = pydantic.TypeAdapter(types.ServerNotification)


def harn_reminder(path: str) -> types.LoggingMessageNotification:
    return sdk_tools.harn_reminder(path, TAGS)


class Confirmation(pydantic.BaseModel):
    """What `confirm` elicits."""

    ok: bool


def sampling(question: str) -> Sample:
    """`consult`'s resolver (module level: the SDK reads its annotation by name)."""
    return Sample([types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
                  max_tokens=16)


def roots() -> ListRoots:
    """`where`'s resolver."""
    return ListRoots()


def build(http: bool = False) -> MCPServer:
    server = MCPServer("legacy-only", instructions="A server that never moved past 2025-11-25.")

    sdk_tools.add_echo_and_remind(server, TAGS)

    @server.tool()
    async def log(text: str, ctx: Context) -> str:
        await ctx.session.send_notification(types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level="info", logger="legacy", data=text)),
            related_request_id=ctx.request_id)
        return "logged"

    @server.tool()
    async def touch(path: str, ctx: Context) -> str:
        await ctx.notify_tools_changed()  # to 2026-07-28 listen streams (tests.peers.modern_only_server)
        await ctx.notify_resource_updated("file:///notes.txt")
        after = [
            {"method": "notifications/tools/list_changed"}, {"method": "notifications/resources/list_changed"},
            {"method": "notifications/prompts/list_changed"},
            {"method": "notifications/resources/updated", "params": {"uri": "file:///notes.txt"}},
            {k: v for k, v in dumped(harn_reminder(path)).items() if k in ("method", "params")},
            {"method": "notifications/message", "params": {"level": "info", "logger": "legacy", "data": "ambient"}}]
        if not http:
            AFTER[ctx.request_id] = after
            return f"touched {path}"
        for extra in after:  # no related request: the SDK writes them on the session's GET stream
            await ctx.session.send_notification(NOTIFICATION.validate_python(extra))
        return f"touched {path}"

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        try:
            sampled = await ctx.session.create_message(  # the server asks its client (2025-11-25)
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
                max_tokens=16, related_request_id=ctx.request_id)
        except Exception as exc:  # noqa: BLE001 - the client's refusal is the answer
            return f"refused: {exc}"
        return f"sampled: {sampled.content.text}"

    async def asking(question: str, ctx: Context, meanwhile) -> str:
        """The client's sample for ``question``, with ``meanwhile()`` sent once the question is written."""
        answer: list[str] = []

        async def sample() -> None:
            sampled = await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
                max_tokens=16, related_request_id=ctx.request_id)
            answer.append(sampled.content.text)

        async with anyio.create_task_group() as group:
            group.start_soon(sample)
            await anyio.wait_all_tasks_blocked()  # the question is written: what follows comes after it
            await meanwhile()
        return answer[0]

    @server.tool()
    async def nudge(question: str, path: str, ctx: Context) -> str:
        answer = await asking(question, ctx, lambda: ctx.session.send_notification(
            harn_reminder(f"before/{path}"), related_request_id=ctx.request_id))
        await ctx.session.send_notification(harn_reminder(f"after/{path}"), related_request_id=ctx.request_id)
        return f"sampled: {answer}"

    @server.tool()
    async def ponder(question: str, ctx: Context) -> str:
        """Asks its client, reports progress while the question waits, and again once answered."""
        answer = await asking(question, ctx, lambda: ctx.report_progress(1, 2, "pondering"))
        await ctx.report_progress(2, 2, "answered")
        return f"pondered: {answer}"

    @server.tool()
    async def count(n: int, ctx: Context) -> str:
        for step in range(1, n + 1):
            await ctx.report_progress(step, n, f"step {step}")
        return f"counted {n}"

    @server.tool()
    async def hold(ctx: Context) -> str:
        await ctx.report_progress(0, None, "holding")
        await anyio.sleep_forever()
        return "never"

    @server.tool()
    async def confirm(question: str, ctx: Context) -> str:
        try:
            answered = await ctx.elicit(question, Confirmation)  # the server asks its client (2025-11-25)
        except Exception as exc:  # noqa: BLE001 - the client's refusal is the answer
            return f"refused: {exc}"
        return f"{answered.action}: {answered.data.ok}" if answered.action == "accept" else answered.action

    @server.tool()
    def consult(question: str, sampled: Annotated[types.CreateMessageResult, Resolve(sampling)]) -> str:
        return f"sampled: {sampled.content.text}"

    @server.tool()
    def where(found: Annotated[types.ListRootsResult, Resolve(roots)]) -> str:
        return " ".join(str(root.uri) for root in found.roots)

    async def subscribed(ctx, params) -> types.EmptyResult:
        return types.EmptyResult()

    server._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribed)
    server._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, subscribed)

    @server.resource("file:///notes.txt")
    def notes() -> str:
        return NOTES

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    return server


def dumped(message) -> dict:
    inner = getattr(message, "root", message)
    return inner.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main(seen: TextIO) -> None:
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging is fine at 2025-11-25
    low = build()._lowlevel_server
    async with stdio_server() as (read, write):
        send, receive = anyio.create_memory_object_stream(64)

        async def tee() -> None:
            async with send:
                async for item in read:
                    if isinstance(item, SessionMessage):
                        seen.write(json.dumps(dumped(item.message)) + "\n")
                    await send.send(item)

        out, written = anyio.create_memory_object_stream(64)

        async def then() -> None:  # a `touch`'s notifications follow its answer on the wire
            async for item in written:
                await write.send(item)
                answered = dumped(item.message)
                for extra in AFTER.pop(str(answered.get("id")), []) if "result" in answered else []:
                    await write.send(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", **extra)))

        async with anyio.create_task_group() as group:
            group.start_soon(tee)
            group.start_soon(then)
            async with low.lifespan(low) as state:
                changed = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
                await serve_loop(low, receive, out, lifespan_state=state,
                                 init_options=low.create_initialization_options(changed))
            group.cancel_scope.cancel()


if __name__ == "__main__":
    with open(sys.argv[1], "a", buffering=1) as record:
        anyio.run(main, record)
