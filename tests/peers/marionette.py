"""A headless Firefox driven over Marionette, its built-in remote protocol (stdlib only).

No geckodriver and no Playwright build of Firefox: the Debian package `firefox-esr` is enough.
The wire format (firefox-source-docs.mozilla.org, testing/marionette/Protocol): every message is
``<byte length>:<json>``; the server greets with ``{"applicationType": "gecko",
"marionetteProtocol": 3}``; a command is ``[0, id, name, params]`` and its answer
``[1, id, error, result]`` (error null on success).

``Firefox`` starts the browser on a fresh profile in a temporary folder (``marionette.port = 0``:
Firefox picks a free port and writes it to ``MarionetteActivePort`` in the profile), opens a
session, and on ``close()`` always quits it, kills what is left of its process group and deletes
the folder.  ``FirefoxPage`` offers the few Playwright ``Page`` calls the console tests use, as
coroutines, so one assertion helper serves both browsers.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

PREFS = {
    "marionette.port": 0,  # any free port, written to <profile>/MarionetteActivePort
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "app.update.disabledForTesting": True,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
}

# Errors Firefox logged for pages of one origin: uncaught exceptions, unhandled rejections and
# Content-Security-Policy violations all land in the parent process's console service as
# nsIScriptError (chrome context, hence -remote-allow-system-access).  A page's own console.error()
# calls stay in its content process and are not seen here (the console page makes none).
PAGE_ERRORS = """
const [origin] = arguments;
return Services.console.getMessageArray()
  .filter(m => m instanceof Ci.nsIScriptError && !m.isFromChromeContext
               && m.logLevel >= Ci.nsIConsoleMessage.error && (m.sourceName || "").startsWith(origin))
  .map(m => `${m.category}: ${m.errorMessage} (${m.sourceName}:${m.lineNumber})`);
"""


class MarionetteError(Exception):
    """A command's error answer: {"error", "message", "stacktrace"}."""

    def __init__(self, command: str, error: dict):
        super().__init__(f"{command}: {error.get('error')}: {error.get('message')}")
        self.error = error


class Marionette:
    """One connection to a Marionette server; ``command`` sends and waits for its own answer."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 60.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._stream = self.sock.makefile("rb")
        self._lock = threading.Lock()
        self._next_id = 0
        self.hello = self._read()
        if self.hello.get("applicationType") != "gecko":
            raise RuntimeError(f"not a Marionette server: {self.hello}")

    def command(self, name: str, params: dict | None = None):
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            data = json.dumps([0, msg_id, name, params or {}]).encode()
            self.sock.sendall(b"%d:%s" % (len(data), data))
            while True:
                kind, answer_id, error, result = self._read()
                if kind == 1 and answer_id == msg_id:
                    break
        if error:
            raise MarionetteError(name, error)
        return result

    def _read(self):
        size = b""
        while (byte := self._stream.read(1)) != b":":
            if not byte:
                raise ConnectionError("Marionette closed the connection")
            size += byte
        body = self._stream.read(int(size))
        if len(body) != int(size):
            raise ConnectionError("Marionette closed the connection mid-message")
        return json.loads(body)

    def close(self) -> None:
        self._stream.close()
        self.sock.close()


class Firefox:
    """A headless Firefox with one Marionette session on a throw-away profile."""

    def __init__(self, binary: str, *, width: int = 1280, height: int = 800, start_timeout: float = 60.0):
        self.root = Path(tempfile.mkdtemp(prefix="reminder-bridge-firefox-"))
        self.profile = self.root / "profile"
        self.profile.mkdir()
        self.log = self.root / "firefox.log"
        (self.profile / "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in PREFS.items()))
        self.proc: subprocess.Popen | None = None
        self.client: Marionette | None = None
        try:
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(
                    [binary, "--headless", "--marionette", "-remote-allow-system-access", "--no-remote",
                     "--profile", str(self.profile), f"--width={width}", f"--height={height}", "about:blank"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    env={**os.environ, "MOZ_CRASHREPORTER_DISABLE": "1"})
            self.client = Marionette(self._wait_port(start_timeout))
            self.capabilities = self.command("WebDriver:NewSession", {"capabilities": {}})["capabilities"]
        except BaseException:
            self.close()
            raise

    def _wait_port(self, timeout: float) -> int:
        port_file = self.profile / "MarionetteActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Firefox exited with {self.proc.returncode}: {self.log_tail()}")
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text.isdigit():
                try:
                    socket.create_connection(("127.0.0.1", int(text)), timeout=1).close()
                    return int(text)
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"Firefox opened no Marionette port in {timeout} s: {self.log_tail()}")

    def log_tail(self, size: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def command(self, name: str, params: dict | None = None):
        return self.client.command(name, params)

    def navigate(self, url: str) -> None:
        """Load ``url`` and wait for the load event (the default page load strategy)."""
        self.command("WebDriver:Navigate", {"url": url})

    @property
    def url(self) -> str:
        return self.command("WebDriver:GetCurrentURL")["value"]

    def execute(self, script: str, *args, chrome: bool = False):
        """Run ``script`` as a function body in the page (``arguments`` holds ``args``); its return value.
        With ``chrome=True`` it runs in the browser's own privileged scope instead."""
        if chrome:
            self.command("Marionette:SetContext", {"value": "chrome"})
        try:
            return self.command("WebDriver:ExecuteScript", {"script": script, "args": list(args)})["value"]
        finally:
            if chrome:
                self.command("Marionette:SetContext", {"value": "content"})

    def page_errors(self, origin: str) -> list[str]:
        """Every script error and CSP violation Firefox logged for pages of ``origin`` since it started."""
        return self.execute(PAGE_ERRORS, origin, chrome=True)

    def close(self) -> None:
        """Quit Firefox, however far it got; kill its process group if it lingers; delete the profile."""
        try:
            if self.client is not None:
                try:
                    self.client.sock.settimeout(10)
                    self.command("Marionette:Quit", {"flags": ["eForceQuit"]})
                except (OSError, MarionetteError, ValueError):
                    pass
                self.client.close()
            if self.proc is not None:
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
                _end_group(self.proc)  # its content processes share its process group

        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _end_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGTERM the process group ``proc`` leads (start_new_session), then SIGKILL whatever is still in
    it after ``grace`` s; ``proc`` itself is reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader, or the group never empties
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            continue
        break
    proc.wait(10)


class FirefoxPage:
    """The Playwright ``Page`` calls the console tests share, on a ``Firefox`` (selectors are CSS)."""

    _ELEMENT = "const el = document.querySelector(arguments[0]);"
    _VISIBLE = ("const visible = !!el && el.getClientRects().length > 0"
                " && getComputedStyle(el).visibility !== 'hidden';")

    def __init__(self, firefox: Firefox):
        self.firefox = firefox

    async def _run(self, script: str, *args):
        return await asyncio.to_thread(self.firefox.execute, script, *args)

    async def wait_for_selector(self, selector: str, timeout: float = 30_000) -> None:
        """Until an element matching ``selector`` is visible (``timeout`` in ms, as Playwright's)."""
        deadline = time.monotonic() + timeout / 1000
        while not await self._run(self._ELEMENT + self._VISIBLE + "return visible;", selector):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{selector!r} not visible within {timeout} ms")
            await asyncio.sleep(0.02)

    async def get_attribute(self, selector: str, name: str) -> str | None:
        return await self._run(self._ELEMENT + "return el.getAttribute(arguments[1]);", selector, name)

    async def is_hidden(self, selector: str) -> bool:
        return not await self._run(self._ELEMENT + self._VISIBLE + "return visible;", selector)

    async def inner_text(self, selector: str) -> str:
        return await self._run(self._ELEMENT + "return el.innerText;", selector)

    async def content(self) -> str:
        return await self._run("return document.documentElement.outerHTML;")
