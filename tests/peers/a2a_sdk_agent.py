"""An A2A v1.0 agent built with the official a2a-sdk, in one of three reminder dialects.

  legacy    reads `metadata.harn.reminder(s)` on incoming messages and decorates its WORKING
            status event with `metadata.harn.reminder` (the SDK cannot put `_meta` on a card,
            so tests name the peer dialect instead of relying on the card)
  standard  the SDK server plus the proposed `InjectTaskReminder` method (answered in front of
            the SDK's JSON-RPC handler, checking the task in the SDK's task store)
  none      no reminder support at all

The agent echoes every text part of the message back as an artifact, so a test sees exactly what
reached it. A turn leaves the task input-required (open for the next message), unless the
message's last text part names another ending: `complete`, `fail` or `reject` end the task in that
terminal state, and `hold` keeps it working until `POST /release` (a test acts while it works).
`CancelTask` cancels. `/stats` reports what arrived and the address every request was sent to
(X-Forwarded-Host, else Host: a request that bypassed the proxy shows the agent's own address).
Prints `PORT <n>`.

Usage: python -m tests.peers.a2a_sdk_agent legacy|standard|none
"""
import asyncio
import json
import socket
import sys
from collections import Counter
from datetime import datetime, timezone

import uvicorn
from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse

MODE = sys.argv[1] if len(sys.argv) > 1 else "none"
STATS = {"hosts": Counter(), "reminders": [], "injects": [], "texts": []}
#: the last text part of a message that ends its task in a terminal state, and the updater's way to say it
ENDINGS = {"complete": "complete", "fail": "failed", "reject": "reject"}
#: set by `POST /release`: a `hold` turn keeps its task working until then
HOLD = asyncio.Event()
BUDGET_REMINDER = {"id": "rem-budget", "body": "Your last action exceeded the configured cost budget.",
                   "tags": ["budget"], "dedupeKey": "budget", "ttlTurns": 1}


def carried(metadata: dict) -> list:
    harn = (metadata or {}).get("harn") or {}
    return ([harn["reminder"]] if "reminder" in harn else []) + list(harn.get("reminders") or [])


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None:
            await event_queue.enqueue_event(new_task(context.task_id, context.context_id,
                                                     TaskState.TASK_STATE_SUBMITTED, history=[context.message]))
        message = MessageToDict(context.message)
        STATS["reminders"] += carried(message.get("metadata")) + carried(dict(context.metadata or {}))
        texts = [part.get("text", "") for part in message.get("parts", [])]
        STATS["texts"].append(texts)
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        decoration = {"harn": {"reminder": BUDGET_REMINDER}} if MODE == "legacy" else None
        await up.update_status(TaskState.TASK_STATE_WORKING, metadata=decoration)
        await up.add_artifact(parts=[Part(text=" | ".join(texts))], artifact_id="echo")
        ending = texts[-1] if texts else ""
        if ending == "hold":
            HOLD.clear()
            await HOLD.wait()
        else:
            await asyncio.sleep(0.05)  # the agent's work takes a moment (behaviour, not synchronisation)
        if ending in ENDINGS:
            await getattr(up, ENDINGS[ending])()
        else:  # input-required, not completed: the task stays open for the next message (reminders ride on it)
            await up.update_status(TaskState.TASK_STATE_INPUT_REQUIRED)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    card = AgentCard(
        name="sdk-echo", description="echoes text parts", version="1.0.0",
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/a2a", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])])
    store = InMemoryTaskStore()
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=store, agent_card=card)
    sdk = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/a2a")])

    async def app(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if scope["path"] == "/stats":
                return await JSONResponse({**STATS, "hosts": dict(STATS["hosts"])})(scope, receive, send)
            if scope["path"] == "/release":
                HOLD.set()
                return await JSONResponse({})(scope, receive, send)
            # the address the caller used: a proxy names it in X-Forwarded-Host (its Host is the agent's own)
            STATS["hosts"][headers.get(b"x-forwarded-host", headers.get(b"host", b"")).decode()] += 1
            if MODE == "standard" and scope["method"] == "POST":
                body = b""
                more = True
                while more:
                    chunk = await receive()
                    body += chunk.get("body", b"")
                    more = chunk.get("more_body", False)
                msg = json.loads(body or b"{}")
                if msg.get("method") == "InjectTaskReminder":
                    return await inject(msg)(scope, receive, send)
                replayed = False

                async def replay():
                    nonlocal replayed
                    if replayed:
                        return await receive()
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}

                return await sdk(scope, replay, send)
        return await sdk(scope, receive, send)

    def inject(msg: dict) -> JSONResponse:
        params = msg.get("params") or {}
        STATS["injects"].append(params)
        return JSONResponse({"jsonrpc": "2.0", "id": msg.get("id"), "result": {
            "reminderId": (params.get("reminder") or {}).get("id", "generated"), "dedupedCount": 0,
            "acceptedAt": datetime.now(timezone.utc).isoformat()}})

    print(f"PORT {port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
