"""An ACP agent built with the official `agent-client-protocol` SDK and no reminder support.

It echoes every prompt it receives (all text blocks, in order) so a test can see exactly what
reached the agent, e.g. the proxy's rendered reminder block in front of the user's text.
"""
import asyncio
import uuid

from acp import PROTOCOL_VERSION, Agent, run_agent, update_agent_message_text
from acp.schema import AgentCapabilities, Implementation, InitializeResponse, NewSessionResponse, PromptResponse


class EchoAgent(Agent):
    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="sdk-echo-agent", version="0.1"))

    async def new_session(self, cwd, mcp_servers=None, **kw):
        return NewSessionResponse(session_id="sess_" + uuid.uuid4().hex[:8])

    async def prompt(self, session_id, prompt, **kw):
        texts = [getattr(block, "text", "?") for block in prompt]
        await self.conn.session_update(session_id=session_id, update=update_agent_message_text(" || ".join(texts)))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id, **kw):
        pass


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))
