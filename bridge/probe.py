"""`python -m bridge.probe URL`: a container health check of the admin port that sends the token.

A Kubernetes `httpGet` probe or a plain `curl` cannot read the bearer token from a Secret, and an
admin port off loopback must have one (spec §13; the proxy warns `admin_exposed` otherwise). This
reads `REMINDER_BRIDGE_ADMIN_TOKEN` from its environment, as the proxy does, and exits 0 when the
URL (`/healthz`, `/readyz`) answers 2xx, else 1 with the reason on stderr (never the token).

Stdlib only, so that a probe every few seconds costs one interpreter start and nothing more.
"""
from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 3.0


def probe(url: str, token: str) -> str | None:
    """Why ``url`` is not healthy, or None when it answers 2xx."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S) as answer:
            return None if 200 <= answer.status < 300 else f"HTTP {answer.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}" + (" (is REMINDER_BRIDGE_ADMIN_TOKEN set, and the same as the proxy's?)"
                                     if exc.code == 401 else "")
    except (OSError, ValueError) as exc:
        return str(getattr(exc, "reason", exc))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m bridge.probe http://127.0.0.1:9464/readyz\n")
        return 2
    why = probe(argv[0], os.environ.get("REMINDER_BRIDGE_ADMIN_TOKEN", ""))
    if why is not None:
        sys.stderr.write(f"{argv[0]}: {why}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
