"""JSON-RPC errors for the example peers: raised where a rule is broken, answered in one place."""


class RpcError(Exception):
    """A JSON-RPC error for the current request; a notification swallows it instead."""

    def __init__(self, code: int, message: str, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def reply(self, msg_id) -> dict:
        return error_reply(msg_id, self.code, self.message, self.data)


def error_reply(msg_id, code: int, message: str, data=None) -> dict:
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}
