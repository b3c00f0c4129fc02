"""An in-process legacy A2A v1.0 agent that carries reminders in `metadata.harn`.

Harn never shipped its A2A reminder channel (research/harn.md §2.3), so this peer uses
the shape spec §5 assumes: reminders arrive as `metadata.harn.reminder(s)` on
`SendMessage` (or on its message), and the agent sends one back as metadata on a
stream event. No HTTP: callers hand it JSON-RPC dicts and get the responses back,
which keeps it usable both behind a test HTTP app and directly in unit tests.
"""

import copy
import itertools
import uuid

from bridge.examples.rpc import RpcError

#: A2A's `UnsupportedOperationError`: a message to a task in a terminal state (§3.1.1)
UNSUPPORTED_OPERATION = -32004
SEND_METHODS = {"SendMessage", "message/send"}
STREAM_METHODS = {"SendStreamingMessage", "message/stream"}
GET_TASK_METHODS = {"GetTask", "tasks/get"}


def carried_reminders(metadata) -> list[dict]:
    """The legacy reminders in a metadata map: `harn.reminder` (one) and `harn.reminders` (several)."""
    harn = metadata.get("harn") if isinstance(metadata, dict) else None
    if not isinstance(harn, dict):
        return []
    found = [harn["reminder"]] if isinstance(harn.get("reminder"), dict) else []
    if isinstance(harn.get("reminders"), list):
        found.extend(reminder for reminder in harn["reminders"] if isinstance(reminder, dict))
    return found


def budget_reminder() -> dict:
    """The reminder this agent raises on every turn, as a coordinator would after a costly step."""
    return {
        "id": str(uuid.uuid4()),
        "body": "Your last action exceeded the configured cost budget.",
        "tags": ["budget"],
        "dedupeKey": "budget",
        "ttlTurns": 1,
        "source": "coordinator-agent",
    }


class LegacyA2AAgent:
    """Echo agent: each message adds one artifact echoing the text. A task's first turns end
    input-required (the worker waits for its go-ahead); its turn number ``turns_per_task`` completes
    it, and a message to a completed task is refused, as A2A requires."""

    def __init__(self, turns_per_task: int = 2) -> None:
        self.turns_per_task = turns_per_task
        self.tasks: dict[str, dict] = {}
        self.received_reminders: dict[str, list[dict]] = {}  # taskId -> reminders, in arrival order
        self._task_numbers = itertools.count(1)
        self._context_numbers = itertools.count(1)

    def agent_card(self, url: str) -> dict:
        """The public card, declaring the legacy reminder capability under `capabilities._meta.harn`."""
        return {
            "name": "rebase-worker",
            "description": "Rebases branches.",
            "version": "1.0.0",
            "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {
                "streaming": True,
                "_meta": {
                    "harn": {
                        "reminders": {
                            "inject": True,
                            "emit": True,
                            "propagate": ["session", "none"],
                            "roleHints": ["system", "developer"],
                        }
                    }
                },
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }

    def handle(self, msg: dict) -> list[dict]:
        """Answer one JSON-RPC request: one response, or for a stream one response per SSE frame."""
        msg_id = msg.get("id")
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        try:
            if method in SEND_METHODS:
                task, _ = self._run_turn(params)
                return [_response(msg_id, {"task": copy.deepcopy(task)})]
            if method in STREAM_METHODS:
                _, events = self._run_turn(params)
                return [_response(msg_id, event) for event in events]
            if method in GET_TASK_METHODS:
                return [_response(msg_id, copy.deepcopy(self._task(params.get("id"))))]
            raise RpcError(-32601, "Method not found", {"method": method})
        except RpcError as exc:
            return [exc.reply(msg_id)]

    def _task(self, task_id) -> dict:
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            reason = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
                      "domain": "a2a-protocol.org"}
            raise RpcError(-32001, "Task not found", [reason])
        return task

    def _run_turn(self, params: dict) -> tuple[dict, list[dict]]:
        """Create or continue the task, record carried reminders; return the final task and the stream's events."""
        message = params.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            raise RpcError(-32602, "Invalid params", {"reason": "`message` with `parts` is required"})
        task_id = message.get("taskId") or f"task-{next(self._task_numbers)}"
        task = self.tasks.get(task_id)
        if task is None:
            # An unknown taskId is adopted rather than refused, so demos can name their tasks.
            context_id = message.get("contextId") or f"ctx-{next(self._context_numbers)}"
            task = {"id": task_id, "contextId": context_id, "status": {}, "history": [], "artifacts": []}
            self.tasks[task_id] = task
        elif task["status"].get("state") == "TASK_STATE_COMPLETED":
            raise RpcError(UNSUPPORTED_OPERATION, f"Task {task_id} is in terminal state: TASK_STATE_COMPLETED")
        reminders = carried_reminders(params.get("metadata")) + carried_reminders(message.get("metadata"))
        if reminders:
            self.received_reminders.setdefault(task_id, []).extend(copy.deepcopy(reminders))

        ids = {"taskId": task_id, "contextId": task["contextId"]}
        task["history"].append(copy.deepcopy(message))
        task["status"] = {"state": "TASK_STATE_SUBMITTED"}
        events = [{"task": copy.deepcopy(task)}]
        events.append({"statusUpdate": {**ids, "status": {"state": "TASK_STATE_WORKING"},
                                        "metadata": {"harn": {"reminder": budget_reminder()}}}})
        parts = message["parts"]
        text = " ".join(part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str))
        artifact = {"artifactId": f"echo-{len(task['artifacts']) + 1}", "parts": [{"text": "echo: " + text}]}
        task["artifacts"].append(artifact)
        events.append({"artifactUpdate": {**ids, "artifact": copy.deepcopy(artifact), "lastChunk": True}})
        done = len(task["history"]) >= self.turns_per_task
        task["status"] = {"state": "TASK_STATE_COMPLETED" if done else "TASK_STATE_INPUT_REQUIRED"}
        events.append({"statusUpdate": {**ids, "status": dict(task["status"])}})
        return task, events


def _response(msg_id, result: dict) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}
