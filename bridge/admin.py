"""The admin port (spec §9, §13): `/healthz`, `/readyz`, Prometheus `/metrics`, and the operator
console (`/`, `/api/status`, `/api/events`; docs/console.md), loopback by default.

With a token configured every request must prove it: `Authorization: Bearer TOKEN` (scripts,
scrapers), or the console's session cookie, which a browser gets from the login form (`POST
/login`) or from a `?token=` link.  The cookie holds a random session value the admin port maps to
a login, never the token.  Wrong tokens are throttled per client address (`bridge.throttle`), and
the token is never logged: the start-up line gives the console's address without it.  Without a
token the port is open (it listens on loopback unless told otherwise; binding anywhere else is
logged as a warning), and the console
refuses requests whose `Host` is a name other than `localhost` (DNS rebinding).
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import hmac
import html
import ipaddress
import json
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.metrics_core import Metric

from bridge.console import STATIC
from bridge.console.cli import ADMIN_REALM
from bridge.console.feed import Feed
from bridge.console.status import DEFAULT_WINDOW_S, build_status, parse_window, refresh_shared_levels, sample_budgets
from bridge.console.timeline import SAMPLE_S
from bridge.metrics import merged
from bridge.telemetry import Recorder, collectors, recorders
from bridge.throttle import Throttle
from bridge.urls import is_loopback

TOKEN_ENV = "REMINDER_BRIDGE_ADMIN_TOKEN"


class AdminError(RuntimeError):
    """The admin port could not be served (e.g. its address is in use): said in one line, no traceback."""


class BridgeCollector:
    """What `/metrics` serves, as one prometheus_client collector: the registry of every Recorder
    ``group()`` returns (one per route), the collectors registered for the process
    (`bridge.telemetry.collectors()`: `serve`'s connection guard, shared state, outbox stores) and
    ``own`` (the admin port's: its throttle, its feed), merged into one family per name
    (`bridge.metrics.merged`).  Read at each scrape: nothing is counted twice."""

    def __init__(self, group: Callable[[], Iterable[Recorder]], own: Iterable[Any] = ()):
        self.group = group
        self.own = tuple(own)

    def describe(self) -> list[Metric]:
        return []  # no fixed set of names: never collect at registration time

    def collect(self) -> Iterable[Metric]:
        routes = [r.metrics.registry for r in self.group() if r.metrics is not None]
        return merged([*routes, *collectors(), *(_Families(o) if hasattr(o, "families") else o for o in self.own)])


class _Families:
    """A collector over an object that still describes its families as tuples, ``families()`` →
    [(name, kind, help, [(suffix, labels, value), ...]), ...] (the console's feed, until it keeps
    prometheus_client types itself: docs/decisions.md)."""

    def __init__(self, source: Any):
        self.source = source

    def collect(self) -> Iterable[Metric]:
        for name, kind, help_text, samples in self.source.families():
            family = Metric(name.removesuffix("_total") if kind == "counter" else name, help_text, kind)
            for suffix, labels, value in samples:
                family.add_sample(name + suffix, {k: str(v) for k, v in labels.items()}, float(value))
            yield family


def registry_of(group: Callable[[], Iterable[Recorder]], own: Iterable[Any] = ()) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BridgeCollector(group, own))
    return registry


def prometheus_text(recorder: Recorder | Iterable[Recorder]) -> str:
    """Every metric of ``recorder`` (or of several, e.g. one per HTTP route) in the Prometheus
    text format, as `/metrics` serves it to a scraper that does not ask for OpenMetrics."""
    group = [recorder] if isinstance(recorder, Recorder) else list(recorder)
    return generate_latest(registry_of(lambda: group)).decode()


def split_hostport(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def exposed(host: str, token: str) -> bool:
    """Whether an admin port listening on ``host`` is open to other machines with no token to keep
    them out (the `admin_exposed` warning)."""
    return not token and not is_loopback(host)


#: The app's live feed (for tests and embedders): `runner.app[FEED]`.
FEED: web.AppKey[Any] = web.AppKey("reminder_bridge_feed", object)
#: The console's session cookie: a random value mapped to a login here, never the token itself.
COOKIE = "reminder_bridge_console"
#: How long a console login lasts, and how many may be open at once (the oldest is logged out).
LOGIN_TTL_S = 12 * 3600.0
MAX_LOGINS = 256
#: Paths of the console (the browser's): a no-token admin refuses them for a foreign `Host`.
CONSOLE_PATHS = ("/", "/login", "/logout", "/api/")
#: Headers on every console page and API answer.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
STATIC_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png",
                ".svg": "image/svg+xml"}


class Logins:
    """Console logins: random session values and when they expire; bounded, oldest out first."""

    def __init__(self, ttl: float = LOGIN_TTL_S, most: int = MAX_LOGINS):
        self.ttl, self.most = ttl, most
        self._open: OrderedDict[str, float] = OrderedDict()

    def new(self) -> str:
        value = secrets.token_urlsafe(32)
        self._open[value] = time.monotonic() + self.ttl
        while len(self._open) > self.most:
            self._open.popitem(last=False)
        return value

    def valid(self, value: str | None) -> bool:
        if not value:
            return False
        expires = self._open.get(value)
        if expires is None:
            return False
        if expires < time.monotonic():
            del self._open[value]
            return False
        return True

    def end(self, value: str | None) -> None:
        if value:
            self._open.pop(value, None)


def _same(given: str, token: str) -> bool:
    """Constant-time comparison that does not even leak the token's length."""
    return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), hashlib.sha256(token.encode()).digest())


def _local_name(host_header: str) -> bool:
    """A `Host` a DNS-rebinding page cannot send: an IP literal or a loopback name (`is_loopback`)."""
    host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
    host = host.strip("[]").lower()
    if host == "" or is_loopback(host):
        return True
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _login_page(message: str = "", status: int = 401) -> web.Response:
    note = f'<p class="login-error" role="alert">{html.escape(message)}</p>' if message else ""
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>reminder-bridge · sign in</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/console.css"></head><body class="login">'
        '<form class="login-box" method="post" action="/login"><h1>reminder-bridge</h1>'
        '<p>This admin port needs its token (<code>[admin] token</code> or '
        '<code>REMINDER_BRIDGE_ADMIN_TOKEN</code>).</p>'
        f'{note}<label for="token">Admin token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>'
        '<button type="submit">Sign in</button></form></body></html>')
    return web.Response(status=status, text=page, content_type="text/html", charset="utf-8", headers=PAGE_HEADERS)


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={**PAGE_HEADERS, "Location": location})


def console_url(host: str, port: int) -> str:
    """The console's address as the start-up line gives it: never with the token."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else \
        f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def _bearer(request: web.Request) -> str | None:
    """The token of an `Authorization: Bearer` header (any case of the scheme), else None."""
    scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
    return given.strip() if scheme.lower() == "bearer" else None


async def start_admin(listen: str, recorder: Recorder, ready: Callable[[], bool], *, token: str = "",
                      every_recorder: bool = True, settings: Any = None, show_bodies: bool | None = None,
                      window_s: float | None = None,
                      degraded: Callable[[], Awaitable[str | None]] | None = None) -> web.AppRunner:
    """Serve the admin port.  ``every_recorder``: metrics and console of every live Recorder in the
    process (one per HTTP route), else of ``recorder`` alone.  ``settings``: the rules file's
    `[admin]` table (its `show_bodies` and `readiness_window_h`, when the model has them);
    ``show_bodies`` / ``window_s`` override it.  ``await degraded()``: why the proxy runs degraded
    (shared state away or refusing), shown by /readyz, which stays 200: ordinary traffic still flows."""
    if show_bodies is None:
        show_bodies = bool(getattr(settings, "show_bodies", False))
    if window_s is None:
        hours = getattr(settings, "readiness_window_h", None)
        window_s = float(hours) * 3600.0 if isinstance(hours, (int, float)) and hours > 0 else DEFAULT_WINDOW_S
    feed = Feed(show_bodies=show_bodies)
    logins = Logins()
    throttle = Throttle()

    def group() -> list[Recorder]:
        return recorders() if every_recorder else [recorder]

    def routes() -> list[Recorder]:
        """The Recorders the console shows: those an owner describes (`status_source`), and ours."""
        found = [r for r in group() if r is recorder or r.status_source is not None]
        feed.attach(found)  # routes made after start-up join the feed on the next look
        return found

    feed.attach(routes())
    registry = registry_of(group, own=(feed, throttle))

    async def sample_budgets_often() -> None:
        """The budget charts: every route's budgets read every `SAMPLE_S` seconds, from a minute's start."""
        while True:
            try:
                await sample_budgets(routes(), feed)
            except Exception as exc:  # an add-on: the proxy goes on, and the operator is told
                recorder.warning("console_sample_failed", error=type(exc).__name__,
                                 why=f"the console could not read the budgets for its charts: {exc}")
            await asyncio.sleep(SAMPLE_S - feed.clock() % SAMPLE_S)

    async def sampling(_: web.Application):
        task = asyncio.ensure_future(sample_budgets_often())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    static: dict[str, tuple[bytes, str]] = {}

    def asset_of(name: str) -> tuple[bytes, str] | None:
        """A file of bridge/console/static, read once (on first use: start-up stays quick)."""
        if not static:
            static.update({path.name: (path.read_bytes(), STATIC_TYPES.get(path.suffix, "application/octet-stream"))
                           for path in STATIC.iterdir() if path.is_file()})
        return static.get(name)

    def judge(request: web.Request, given: str) -> tuple[bool, int]:
        """(whether ``given`` is the token, seconds the client must wait first).  An address locked
        out for guessing waits, and its token is not even compared.  Synchronous, so concurrent
        guesses from one address are judged one after another (bridge.throttle)."""
        address = request.remote
        wait = throttle.admit(address)
        if wait:
            return False, wait
        if _same(given, token):
            throttle.succeeded(address)
            return True, 0
        lock = throttle.failed(address)
        if lock:
            recorder.warning("admin_auth_throttled", client=throttle.key(address), lock_s=lock,
                             why="too many wrong admin tokens from this address: it must wait before the next")
        return False, 0

    def too_many(wait: int, page: bool) -> web.Response:
        """The answer to a token from a locked-out address; a sign-in page for a browser."""
        why = f"Too many wrong tokens from this address: try again in {wait} s."
        if page:
            response = _login_page(why, status=429)
            response.headers["Retry-After"] = str(wait)
            return response
        return web.Response(status=429, text=why + "\n", headers={"Retry-After": str(wait)})

    def with_login(response: web.StreamResponse, request: web.Request) -> web.StreamResponse:
        response.set_cookie(COOKIE, logins.new(), httponly=True, samesite="Strict", path="/",
                            max_age=int(LOGIN_TTL_S), secure=request.secure)
        return response

    @web.middleware
    async def auth(request: web.Request, handler):
        path = request.path
        console = path in CONSOLE_PATHS[:3] or path.startswith(CONSOLE_PATHS[3])
        if console and not token and not _local_name(request.host or ""):
            return web.Response(status=403, text="the console answers only to an IP address or localhost "
                                                 "(set [admin] token to serve it under a name)\n")
        if path == "/" and token and "token" in request.query and request.method == "GET":
            # a `?token=` link: sign the browser in, and keep no token in the address bar
            right, wait = judge(request, request.query["token"])
            if wait:
                return too_many(wait, page=True)
            if not right:
                return _login_page("The token in that link is wrong.")
            return with_login(_see_other("/"), request)
        if not token or path.startswith("/static/") or path == "/login" or logins.valid(request.cookies.get(COOKIE)):
            return await handler(request)
        given = _bearer(request)
        if given is not None:
            right, wait = judge(request, given)
            if wait:
                return too_many(wait, page=False)
            if right:
                return await handler(request)
        if path == "/" and request.method == "GET":
            return _login_page()
        return web.Response(status=401, text="missing or wrong bearer token\n",
                            headers={"WWW-Authenticate": f"Bearer {ADMIN_REALM}"})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if not ready():
            return web.Response(status=503, text="not ready\n")
        why = await degraded() if degraded is not None else None
        return web.Response(text=f"ready (degraded: {why})\n" if why else "ready\n")

    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type,
                                                             "X-Content-Type-Options": "nosniff"})

    async def login(request: web.Request) -> web.Response:
        if not token:
            return _see_other("/")
        origin = request.headers.get("Origin")
        if origin and origin != "null" and origin.split("://", 1)[-1] != request.host:
            return web.Response(status=403, text="a sign-in from another site is refused\n")
        form = await request.post()
        given = form.get("token")
        right, wait = judge(request, given if isinstance(given, str) else "")  # after the last await
        if wait:
            return too_many(wait, page=True)
        if not right:
            return _login_page("Wrong token.")
        return with_login(_see_other("/"), request)

    async def logout(request: web.Request) -> web.Response:
        logins.end(request.cookies.get(COOKIE))
        response = _see_other("/")
        response.del_cookie(COOKIE, path="/")
        return response

    async def page(_: web.Request) -> web.Response:
        body, _type = asset_of("index.html") or (b"", "")
        return web.Response(body=body, content_type="text/html", charset="utf-8", headers=PAGE_HEADERS)

    async def asset(request: web.Request) -> web.Response:
        found = asset_of(request.path.rsplit("/", 1)[1])
        if found is None:
            raise web.HTTPNotFound()
        body, content_type = found
        return web.Response(body=body, content_type=content_type,
                            charset="utf-8" if content_type.startswith("text/") else None,
                            headers={**PAGE_HEADERS, "Cache-Control": "no-cache"})

    async def status(request: web.Request) -> web.Response:
        window = window_s
        if "window" in request.query:
            try:
                window = parse_window(request.query["window"])
            except ValueError as exc:
                return web.json_response({"error": str(exc)}, status=400, headers=PAGE_HEADERS)
        shown = routes()
        await refresh_shared_levels(shown)
        data = build_status(shown, feed, window_s=window)
        data["auth"] = bool(token)
        return web.Response(text=json.dumps(data, default=str), content_type="application/json",
                            headers=PAGE_HEADERS)

    async def events(request: web.Request) -> web.StreamResponse:
        routes()
        subscriber = feed.subscribe()
        if subscriber is None:
            return web.Response(status=503, text=f"too many watchers of the event feed ({feed.max_subscribers})\n",
                                headers={"Retry-After": "5"})
        response = web.StreamResponse(headers={**PAGE_HEADERS, "Content-Type": "text/event-stream",
                                               "X-Accel-Buffering": "no"})
        try:
            await response.prepare(request)
            transport = request.transport
            if transport is not None:
                subscriber.hang_up = transport.abort  # a watcher that stopped reading is dropped (feed.py)
            sock = transport.get_extra_info("socket") if transport is not None else None
            if sock is not None:  # what a stalled watcher holds in the kernel stays small too
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
                except OSError:
                    pass
            await feed.stream(subscriber, response.write)
        except ConnectionError:  # the watcher went away
            pass
        finally:
            feed.unsubscribe(subscriber)
        return response

    app = web.Application(middlewares=[auth], client_max_size=64 * 1024)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", page)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    for name in ("console.js", "console.css"):
        app.router.add_get(f"/static/{name}", asset)
    app.router.add_get("/api/status", status)
    app.router.add_get("/api/events", events)
    app[FEED] = feed
    app.cleanup_ctx.append(sampling)
    app.on_cleanup.append(lambda _: _detach(feed))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    host, port = split_hostport(listen)
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise AdminError(f"cannot serve the admin port on {host}:{port}: {exc.strerror or exc}"
                         f"{' (another process listens there)' if exc.errno == errno.EADDRINUSE else ''}") from None
    bound = runner.addresses[0] if runner.addresses else (host, port)
    if exposed(host, token):
        recorder.warning("admin_exposed", listen=f"{host}:{bound[1]}",
                         why="the admin port is not on loopback and has no bearer token ([admin] token)")
    recorder.info("admin_listening", listen=f"{host}:{bound[1]}", port=bound[1])
    # printed once the caller has finished starting up (its next turn of the loop), after its own lines
    asyncio.get_running_loop().call_soon(functools.partial(
        recorder.log, "console", level="info", url=console_url(host, bound[1]),
        why="open this link for the operator console" + (
            f"; sign in with the admin token ([admin] token or ${TOKEN_ENV}), which is never logged"
            if token else "")))
    return runner


async def _detach(feed: Any) -> None:
    feed.detach()
