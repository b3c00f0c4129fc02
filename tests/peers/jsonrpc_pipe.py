"""A raw newline-delimited JSON-RPC driver for a real process (the proxy), for tests that must see
every frame exactly as the host would, including ones an SDK would hide or reject."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any


class JsonRpcPipe:
    def __init__(self, argv: list[str], cwd: str | None = None, env: dict[str, str] | None = None,
                 stderr: Any = subprocess.PIPE):
        """``stderr``: where the process's stderr goes (kept in `self.stderr` when it is a pipe)."""
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     cwd=cwd, env=env)
        self.frames: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        threading.Thread(target=self._read, daemon=True).start()
        if stderr is subprocess.PIPE:
            threading.Thread(target=self._read_err, daemon=True).start()
        self._next = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.frames.put(line.rstrip(b"\n"))
        self.frames.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr += line

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: dict[str, Any]) -> None:
        self.send_raw(json.dumps(msg).encode())

    def request(self, method: str, params: Any = None) -> tuple[Any, list[dict[str, Any]]]:
        """Send a request; return (its response, every other message that arrived before it)."""
        self._next += 1
        msg_id = self._next
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        before = []
        while True:
            frame = self.next_frame()
            obj = json.loads(frame)
            if obj.get("id") == msg_id and "method" not in obj:
                return obj, before
            before.append(obj)

    def next_frame(self, timeout: float = 10.0) -> bytes:
        frame = self.frames.get(timeout=timeout)
        if frame is None:
            raise EOFError(f"proxy closed stdout; stderr: {bytes(self.stderr).decode(errors='replace')[-2000:]}")
        return frame

    def close(self, timeout: float = 10.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
