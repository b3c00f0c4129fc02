"""Other MCP proxies for `python -m bench --peers`, installed where they cannot touch the project:
one virtualenv per Python peer and one npm prefix per Node peer, under a cache directory
(`$REMINDER_BRIDGE_BENCH_CACHE`, else `$XDG_CACHE_HOME/reminder-bridge/bench-peers`, else
`~/.cache/reminder-bridge/bench-peers`).

A peer installed once is reused as it is, with no network. One that is missing is installed
with the ordinary client (pip, npm) unless installing is turned off (`--peers-offline`); one
that cannot be installed is reported with the reason, and its rows say so.

  python -m bench.peer_install            install (or find) every peer, print where each is
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: How long one install may take (a cold pip resolve of a big gateway takes minutes on 2 cores).
INSTALL_TIMEOUT_S = 900


@dataclass(frozen=True)
class Package:
    """A peer as its registry names it: ``spec`` is what pip or npm is given; ``program`` is the
    console script (Python) or package bin (npm) that proves the install and that the bench runs."""
    name: str
    registry: str  # "pypi" | "npm"
    spec: str
    program: str
    #: the oldest Python the package runs on (its Requires-Python)
    python: tuple[int, int] = (3, 10)


PACKAGES = {
    "fastmcp": Package("fastmcp", "pypi", "fastmcp>=2.12", "fastmcp"),
    "mcp-proxy": Package("mcp-proxy", "pypi", "mcp-proxy==0.13.*", "mcp-proxy"),
    "contextforge": Package("mcp-contextforge-gateway", "pypi", "mcp-contextforge-gateway==1.1.*", "mcpgateway",
                            python=(3, 12)),
    "supergateway": Package("supergateway", "npm", "supergateway@4", "supergateway"),
}


@dataclass(frozen=True)
class Installed:
    """Where an installed peer lives: ``python`` (a Python peer's interpreter, None for npm) and
    ``program`` (the command to run), and the version the registry gave."""
    package: Package
    home: Path
    python: Path | None
    program: Path
    version: str


def cache_dir() -> Path:
    if os.environ.get("REMINDER_BRIDGE_BENCH_CACHE"):
        return Path(os.environ["REMINDER_BRIDGE_BENCH_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "reminder-bridge" / "bench-peers"


def _home(package: Package) -> Path:
    """One directory per spec, so a changed pin installs beside the old one, never over it."""
    return cache_dir() / re.sub(r"[^A-Za-z0-9.]+", "-", package.spec).strip("-")


def find(package: Package) -> Installed | None:
    """The peer as installed before, or None: never touches the network."""
    home = _home(package)
    stamp = home / "installed.txt"
    if not stamp.is_file() or stamp.read_text().split("\n")[0] != package.spec:
        return None
    version = stamp.read_text().split("\n")[1] if "\n" in stamp.read_text() else "?"
    if package.registry == "pypi":
        python, program = home / "bin" / "python", home / "bin" / package.program
    else:
        python, program = None, home / "node_modules" / ".bin" / package.program
    return Installed(package, home, python, program, version) if program.exists() else None


def ensure(key: str, offline: bool = False) -> Installed | str:
    """The installed peer, installing it first if needed; or why it cannot be had (a sentence)."""
    package = PACKAGES[key]
    found = find(package)
    if found is not None:
        return found
    if offline:
        return f"not installed under {cache_dir()} (installing is off: --peers-offline)"
    if package.registry == "npm" and shutil.which("npm") is None:
        return "needs npm and Node (apt-get install npm nodejs)"
    home = _home(package)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    print(f"  installing {package.spec} into {home} ...", file=sys.stderr, flush=True)
    try:
        version = _install_pypi(package, home) if package.registry == "pypi" else _install_npm(package, home)
    except subprocess.TimeoutExpired:
        return f"could not install {package.spec}: no answer in {INSTALL_TIMEOUT_S} s"
    except (OSError, subprocess.CalledProcessError) as exc:
        said = getattr(exc, "stderr", None) or str(exc)
        last = [line for line in str(said).strip().splitlines() if line.strip()][-1:] or ["?"]
        return f"could not install {package.spec}: {last[0][:160]}"
    (home / "installed.txt").write_text(f"{package.spec}\n{version}\n")
    return find(package) or f"installed {package.spec}, but {package.program} is missing"


def _run(argv: list[str], **kwargs) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                          **kwargs).stdout


def interpreter(minimum: tuple[int, int]) -> str | None:
    """A Python of at least ``minimum`` on this machine: the bench's own base interpreter, else a
    `python3.N` on PATH, else one under pyenv's versions (a peer may need a newer Python)."""
    candidates = [getattr(sys, "_base_executable", None) or sys.executable]
    candidates += [found for n in range(14, minimum[1] - 1, -1) if (found := shutil.which(f"python3.{n}"))]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates += sorted((str(p) for p in pyenv.glob("3.*/bin/python3")), reverse=True)
    for candidate in candidates:
        try:
            said = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if said.returncode == 0 and tuple(map(int, said.stdout.split())) >= minimum:
            return candidate
    return None


def _install_pypi(package: Package, home: Path) -> str:
    # a base interpreter, not the project's venv: nothing of the project leaks into the peer's
    base = interpreter(package.python)
    if base is None:
        raise OSError(f"needs Python >= {package.python[0]}.{package.python[1]}, none found on PATH or under pyenv")
    _run([base, "-m", "venv", str(home)])
    python = str(home / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", package.spec])
    name = package.spec.split("=")[0].split(">")[0]
    return _run([python, "-c", f"import importlib.metadata as m; print(m.version({name!r}))"]).strip()


def _install_npm(package: Package, home: Path) -> str:
    _run(["npm", "install", "--prefix", str(home), "--no-audit", "--no-fund", package.spec])
    name = package.spec.rsplit("@", 1)[0]
    return json.loads((home / "node_modules" / name / "package.json").read_text())["version"]


def nginx() -> str | None:
    """Debian's nginx binary (the floor of any HTTP hop), or None."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def main() -> None:
    offline = "--offline" in sys.argv
    for key in PACKAGES:
        got = ensure(key, offline)
        print(f"{key}: {got.program} ({got.version})" if isinstance(got, Installed) else f"{key}: {got}")
    print(f"nginx: {nginx() or 'not found (apt-get install nginx)'}")


if __name__ == "__main__":
    main()
