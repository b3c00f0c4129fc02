"""SIGHUP from the first instant: the documented reload signal (spec §7) must never end a proxy.

The default action of SIGHUP is to terminate, and a proxy spends half a second or more importing
before its event loop can take the signal. So the entry point calls `hold` before any other
import: from then on a SIGHUP is only noted. The command's real handler takes over when it is in
place (`bridge.cli.reloading.watch_rules`), reloads once for any SIGHUP noted before (`missed`),
and gives the signal back to `hold` when it stops, so a SIGHUP during shutdown is harmless too.
A command that never reloads (`check`, `translate`, `status`, ...) gets the default back as soon as
the command line says which it is (`release`): a terminal that hangs up still ends it.

Stdlib only, on purpose: it runs before the heavy imports it protects.
"""
from __future__ import annotations

import signal
import threading

_noted = False


def _note(_signum: int, _frame: object) -> None:
    global _noted
    _noted = True


def hold() -> None:
    """Note SIGHUP instead of dying, until a command's own handler takes it over. Only the main
    thread may set handlers; elsewhere (an embedding application) this does nothing."""
    if hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGHUP, _note)


def release() -> None:
    """SIGHUP's default back, for a command that never reloads (a terminal that hangs up still ends
    it); one noted meanwhile is delivered now."""
    if hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if missed():
            signal.raise_signal(signal.SIGHUP)


def missed() -> bool:
    """Whether a SIGHUP was noted since the last call (the caller reloads once for it)."""
    global _noted
    noted, _noted = _noted, False
    return noted
