"""The Harn-like agent with a standing stdlib-provider reminder in every new session, as real
Harn has (token pressure, post-compact recap): reminders the client never injected."""
from bridge.examples._stdio import serve
from bridge.examples.acp_harn_agent import HarnLikeAgent


class HarnWithProvider(HarnLikeAgent):
    def _new_session(self, params):
        messages, result = super()._new_session(params)
        self.sessions[result["sessionId"]].pending.append({
            "id": "provider-1", "body": "Context is 80% full; summarise before reading more files.",
            "tags": ["token_pressure"], "dedupe_key": "token_pressure", "ttl_turns": None,
            "role_hint": "developer", "source": "stdlib_provider"})
        return messages, result


if __name__ == "__main__":
    raise SystemExit(serve("harn-provider-agent", HarnWithProvider().handle))
