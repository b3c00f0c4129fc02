"""The Harn-like legacy ACP agent, answering `initialize` only when told: it holds the answer until
the client sends the notification `_test/answer_initialize` (an event the test controls), so a test
can put injects on the wire before the agent's dialect is known. It already holds the session
`sess-loaded` (one a client resumes), so those injects have a session to land in.

    python -m tests.peers.late_initialize_agent
"""
from bridge.examples._stdio import serve
from bridge.examples.acp_harn_agent import HarnLikeAgent, Session

LOADED = "sess-loaded"
RELEASE = "_test/answer_initialize"


class LateInitializeAgent(HarnLikeAgent):
    def __init__(self) -> None:
        super().__init__()
        self.sessions[LOADED] = Session()
        self.held: dict | None = None

    def handle(self, msg: dict) -> list[dict]:
        if msg.get("method") == "initialize" and self.held is None:
            self.held = msg
            return []
        if msg.get("method") == RELEASE and self.held is not None:
            held, self.held = self.held, {}
            return super().handle(held)
        return super().handle(msg)


if __name__ == "__main__":
    raise SystemExit(serve("late-initialize-agent", LateInitializeAgent().handle))
