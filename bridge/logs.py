"""Log lines (spec §9): every line the proxy writes on stderr is a stdlib `logging` record of the
`reminder_bridge` logger hierarchy, so code that embeds the proxy adds its own handlers there.

- `reminder_bridge.reminders`: one record per reminder decision worth logging (`Recorder.reminder`);
- `reminder_bridge.proxy`: what a route or the stdio proxy does (upstream errors, reloads, outbox,
  shared state, lifecycle);
- `reminder_bridge.serve`: the `listening` line; `reminder_bridge.workers`: `serve --workers`.

A record's `event` attribute is its event name and `fields` the line's content (what `json`
prints, after `ts` when `stamped`); its message is the line as `text` prints it. `stdio` and
`serve` send the hierarchy to stderr as `--log-format text|json` says, through a `QueueHandler`:
a log call on the hot path formats and enqueues, and one thread (`QueueListener`) writes. The
queue holds at most `MAX_QUEUED_BYTES` of lines: a stderr nobody reads loses lines (counted in the
next line that gets through), never the proxy's memory or its event loop.
"""
from __future__ import annotations

import atexit
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from logging.handlers import QueueHandler, QueueListener
from typing import Any, TextIO

from bridge.display import safe_json, safe_text

ROOT = "reminder_bridge"
REMINDERS = logging.getLogger(f"{ROOT}.reminders")
PROXY = logging.getLogger(f"{ROOT}.proxy")
SERVE = logging.getLogger(f"{ROOT}.serve")
WORKERS = logging.getLogger(f"{ROOT}.workers")

#: `--log-level` names and the `level` field of a line, as logging levels; a line that names no
#: level is a warning (something an operator should see)
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
#: Formatted lines waiting for the writer thread, at most (bytes).
MAX_QUEUED_BYTES = 4 * 1024 * 1024
#: Seconds the process waits at exit for queued lines to be written (a stderr nobody reads blocks).
FLUSH_TIMEOUT = 2.0


def timestamp(created: float) -> str:
    """`2026-12-01T10:15:02.114Z`: UTC, to the millisecond (a line's `ts`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


class _Text:
    """A record's message: the line's fields as `text` shows them, built only when read."""

    __slots__ = ("fields",)

    def __init__(self, fields: Mapping[str, Any]):
        self.fields = fields

    def __str__(self) -> str:
        shown = [safe_text(self.fields.get("event", ""), None)]
        why = None
        for key, value in self.fields.items():
            if key in ("event", "level", "ts") or value is None:
                continue
            if key == "why":
                why = value
                continue
            shown.append(f"{key}={_value(value)}")
        line = " ".join(shown)
        return f"{line}: {safe_text(why, None)}" if why is not None else line


def _value(value: Any) -> str:
    if isinstance(value, (dict, list, tuple)):
        return safe_json(value)
    text = safe_text(value, None)
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def log_event(logger: logging.Logger, fields: dict[str, Any], *, stamped: bool = True, level: int | None = None) -> None:
    """Log one line: ``fields`` is what `json` prints (after `ts` when ``stamped``), starting with
    its `event`. The record's level is ``level``, else the `level` field's (a `LEVELS` name), else
    warning."""
    if level is None:
        level = LEVELS.get(fields.get("level"), logging.WARNING)  # type: ignore[arg-type]
    if logger.isEnabledFor(level):
        logger.log(level, _Text(fields), extra={"event": fields.get("event"), "fields": fields, "stamped": stamped})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `ts`, then the fields as they were logged. A terminal shows it as
    it reads (control characters escaped: bridge.display)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        if fields is None:  # a record some other code logged under reminder_bridge
            fields = {"event": "log", "level": record.levelname.lower(), "why": record.getMessage()}
        if getattr(record, "stamped", True):
            fields = {"ts": timestamp(record.created), **fields}
        return safe_json(fields)


class TextFormatter(logging.Formatter):
    """A plain line for a person: `TS LEVEL event key=value ...: why`, every value shown as
    `safe_text` shows it (no control character reaches the terminal)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage() if hasattr(record, "fields") else safe_text(record.getMessage(), None)
        return f"{timestamp(record.created)} {record.levelname:<7} {message}"


FORMATTERS: dict[str, type[logging.Formatter]] = {"text": TextFormatter, "json": JsonFormatter}


class _Lines(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes what it is handed to a stream. A line that cannot be written (EPIPE: the host closed
    stderr; a closed file) is lost, never the work it reports, and no traceback follows it."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


class _Bounded(QueueHandler):
    """Formats and encodes on the caller's thread and enqueues the bytes; past ``max_bytes``
    waiting, drops the line and says how many were dropped just before the next one that fits."""

    def __init__(self, lines: "queue.SimpleQueue[Any]", formatter: logging.Formatter, max_bytes: int):
        super().__init__(lines)
        self.setFormatter(formatter)
        self.max_bytes = max_bytes
        self.queued = 0
        self.dropped = 0
        self._count = threading.Lock()

    def enqueue(self, record: logging.LogRecord) -> None:
        record.data = (record.msg + "\n").encode("utf-8", "backslashreplace")
        with self._count:
            if self.queued + len(record.data) > self.max_bytes:
                self.dropped += 1
                return
            self.queued += len(record.data)
            dropped, self.dropped = self.dropped, 0
        if dropped:
            note = self.prepare(_dropped_record(dropped))
            note.data = (note.msg + "\n").encode()
            with self._count:
                self.queued += len(note.data)
            self.queue.put_nowait(note)
        self.queue.put_nowait(record)

    def written(self, record: logging.LogRecord) -> None:
        with self._count:
            self.queued -= len(record.data)


def _dropped_record(n: int) -> logging.LogRecord:
    fields = {"event": "log_lines_dropped", "level": "warning", "lines": n,
              "why": f"stderr was not read fast enough: {n} log line(s) before this one were dropped"}
    return PROXY.makeRecord(PROXY.name, logging.WARNING, __file__, 0, _Text(fields), None, None,
                            extra={"event": fields["event"], "fields": fields, "stamped": True})


class _Writer(logging.Handler):
    """The writer thread's handler: the line was formatted and encoded when it was queued, and goes
    straight to the file descriptor (a duplicate of stderr's), so a write that blocks holds no lock
    the rest of the process needs (sys.stderr's own is taken again at exit)."""

    def __init__(self, fd: int, queued: _Bounded):
        super().__init__()
        self.fd = fd
        self.queued = queued

    def handle(self, record: logging.LogRecord) -> bool:
        """Only the writer thread calls it, so it takes no lock: one held through a blocked write
        would block `logging.shutdown` at exit."""
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        data = record.data
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:  # EPIPE: the host closed stderr; the line is lost, never the proxy
            pass
        finally:
            self.queued.written(record)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        super().close()


class _Listener(QueueListener):
    def stop(self) -> None:
        """Write what is queued, waiting at most `FLUSH_TIMEOUT` (a stderr nobody reads would block
        the exit forever; the thread is a daemon)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self.enqueue_sentinel()
            thread.join(FLUSH_TIMEOUT)
            if not thread.is_alive():
                for handler in self.handlers:
                    handler.close()


def default_format(stream: TextIO | None = None) -> str:
    """`text` for a person at a terminal, `json` for whatever reads a pipe or a file."""
    stream = stream if stream is not None else sys.stderr
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return "json"


def configure(log_format: str | None, *, threaded: bool = True, stream: TextIO | None = None,
              logger: logging.Logger | None = None, max_bytes: int = MAX_QUEUED_BYTES) -> Callable[[], None]:
    """Send ``logger`` (the `reminder_bridge` hierarchy) to ``stream`` (stderr) as ``log_format``
    (None: see `default_format`), each caller deciding what is worth a line (`--log-level`).
    ``threaded``: through a queue of at most ``max_bytes`` and its writer thread; else written at
    once (the `--workers` supervisor, which forks and so must have no thread). Returns what writes
    out the queue, also run at exit."""
    stream = stream if stream is not None else sys.stderr
    logger = logger if logger is not None else logging.getLogger(ROOT)
    formatter = FORMATTERS[log_format or default_format(stream)]()
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the process's own lines are written once, here
    if not threaded:
        handler = _Lines(stream)
        handler.setFormatter(formatter)
        logger.handlers[:] = [handler]
        return lambda: None
    lines: queue.SimpleQueue[Any] = queue.SimpleQueue()
    enqueue = _Bounded(lines, formatter, max_bytes)
    stream.flush()
    listener = _Listener(lines, _Writer(os.dup(stream.fileno()), enqueue))
    logger.handlers[:] = [enqueue]
    listener.start()
    atexit.register(listener.stop)
    return listener.stop


def stream_logger(stream: TextIO) -> logging.Logger:
    """A logger of its own that writes JSON lines to ``stream`` at once, outside the hierarchy (a
    Recorder given a stream: the demo's, a test's)."""
    logger = logging.Logger(f"{ROOT}.stream")
    handler = _Lines(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False
    return logger
