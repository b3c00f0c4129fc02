"""`reminder-bridge status --admin URL [--token T] [--json] [--window 24h]`: the migration-readiness
table of a running proxy, read from its admin port's `/api/status`.

Standard library only (no aiohttp), so the command starts fast.  Exit status: 0 when the table was
printed, 2 when the admin port could not be read (unreachable, wrong token, not a reminder-bridge).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TOKEN_ENV = "REMINDER_BRIDGE_ADMIN_TOKEN"
#: where the admin port is unless told otherwise (`[admin] listen`, docs/console.md)
DEFAULT_ADMIN = "127.0.0.1:9464"
#: what a person is told when the answer shows no admin port at that address
NOT_ADMIN = ("is this the admin port? The proxy serves it only where --admin HOST:PORT (or the rules' [admin] "
             f"listen) says, {DEFAULT_ADMIN} by default; the proxy's own port (--listen) forwards to the upstream")
#: what the admin port's 401 names in `WWW-Authenticate`: an upstream's 401 (an OAuth-protected MCP
#: server behind the proxy's own port) is no reason to ask for the admin token
ADMIN_REALM = 'realm="reminder-bridge admin"'


def add_status_parser(sub: Any) -> None:
    p = sub.add_parser("status", help="migration readiness of a running proxy, read from its admin port",
                       description="migration readiness of a running proxy, read from its admin port",
                       formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
                       epilog="examples:\n"
                              "  reminder-bridge status\n"
                              f"      the proxy whose admin port is at {DEFAULT_ADMIN} (serve/stdio --admin "
                              f"{DEFAULT_ADMIN})\n"
                              "  reminder-bridge status --admin 10.0.0.4:9464 --window 7d --json\n"
                              "      another proxy, over the last week, as JSON")
    p.add_argument("--admin", default=DEFAULT_ADMIN, metavar="URL",
                   help=f"the admin port: http://HOST:PORT or HOST:PORT (default {DEFAULT_ADMIN})")
    p.add_argument("--token", help=f"the admin token (default: ${TOKEN_ENV})")
    p.add_argument("--json", action="store_true", help="print /api/status as JSON instead of the table")
    p.add_argument("--window", metavar="SPAN", help="readiness window, e.g. 24h, 90m, 7d (default: the proxy's, 24h)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the admin port (default 10)")
    p.set_defaults(func=cmd_status)


def status_url(admin: str, window: str | None = None) -> str:
    base = admin if "://" in admin else f"http://{admin}"
    url = base.rstrip("/") + "/api/status"
    if window:
        url += "?" + urllib.parse.urlencode({"window": window})
    return url


def fetch_status(admin: str, token: str | None = None, *, window: str | None = None,
                 timeout: float = 10.0) -> dict[str, Any]:
    request = urllib.request.Request(status_url(admin, window), headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        data = json.loads(answer.read())
    if not isinstance(data, dict) or "routes" not in data:
        raise ValueError(f"the answer is not a reminder-bridge status; {NOT_ADMIN}")
    return data


def _refused_because(exc: urllib.error.HTTPError, token: str) -> str:
    """An error answer in words: the admin port refusing the token, throttling, or naming a bad
    `--window`; anything else is not the admin port."""
    from bridge.display import safe_text

    if exc.code == 401 and ADMIN_REALM in exc.headers.get("WWW-Authenticate", ""):
        return (f"the admin port wants its token (--token or ${TOKEN_ENV})" if not token
                else "the admin port refused that token")
    if exc.code == 429:
        return f"too many wrong tokens from this address: try again in {safe_text(exc.headers.get('Retry-After', '?'), 10)} s"
    if exc.code == 400:
        text = exc.read().decode(errors="replace")
        try:
            detail = json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            detail = text.strip()
        return f"HTTP 400: {safe_text(detail, 300)}" if detail else "HTTP 400"
    return f"HTTP {exc.code}, no reminder-bridge status; {NOT_ADMIN}"


def cmd_status(args: argparse.Namespace) -> int:
    from bridge.console.status import table
    from bridge.display import safe_json, safe_text

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    try:
        data = fetch_status(args.admin, token, window=args.window, timeout=args.timeout)
    except urllib.error.HTTPError as exc:
        sys.stderr.write(f"reminder-bridge status: {safe_text(status_url(args.admin, args.window), None)}: "
                         f"{_refused_because(exc, token)}\n")
        return 2
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(exc, json.JSONDecodeError):
            reason = f"the answer is not JSON; {NOT_ADMIN}"
        elif isinstance(reason, ConnectionRefusedError):
            reason = f"{reason.strerror}: is a proxy running with its admin port there (--admin HOST:PORT)?"
        sys.stderr.write(f"reminder-bridge status: cannot read {safe_text(status_url(args.admin, args.window), None)}: "
                         f"{safe_text(reason, None)}\n")
        return 2
    if args.json:
        sys.stdout.write(safe_json(data, indent=2) + "\n")
    else:
        sys.stdout.write(table(data))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m bridge.console.cli ...`: the same command before it is wired into `reminder-bridge`."""
    parser = argparse.ArgumentParser(prog="reminder-bridge")
    sub = parser.add_subparsers(dest="command", required=True)
    add_status_parser(sub)
    args = parser.parse_args(["status", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
