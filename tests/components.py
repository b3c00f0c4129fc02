"""Real components some tests drive, each a Debian package: found on this machine, or why not.

A test that needs one it cannot find skips with `Component.missing`'s reason (or fails, where the
run demands the component: REMINDER_BRIDGE_REQUIRE_REDIS=1, as `.ci/run` sets). At the end of the
run tests/conftest.py lists those tests under the component and prints the one command that
installs every missing one; `skipped_for_missing` reads them back from the skip reasons.
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Component:
    name: str
    #: the Debian package that installs it
    package: str
    #: the commands it is found as on the PATH, first match wins
    commands: tuple[str, ...]
    #: a variable that names its path instead of the PATH search
    path_env: str | None = None
    #: a variable that, set to 1, makes a missing component a failure instead of a skip
    require_env: str | None = None

    def path(self) -> str | None:
        named = os.environ.get(self.path_env) if self.path_env else None
        for command in (named,) if named else self.commands:
            if found := shutil.which(command):
                return found
        return None

    @property
    def required(self) -> bool:
        return self.require_env is not None and os.environ.get(self.require_env) == "1"

    def missing(self) -> str:
        """Why a test that needs this component does not run (the summary parses the first words)."""
        where = f"set {self.path_env} to its path, or " if self.path_env else ""
        return (f"needs {self.name}, which is not installed here: {where}"
                f"{install_command([self])} (.ci/run installs it)")


REDIS = Component("redis-server", "redis-server", ("redis-server",), require_env="REMINDER_BRIDGE_REQUIRE_REDIS")
CHROMIUM = Component("Chromium", "chromium", ("chromium",), path_env="REMINDER_BRIDGE_CHROMIUM")
FIREFOX = Component("Firefox", "firefox-esr", ("firefox-esr", "firefox"), path_env="REMINDER_BRIDGE_FIREFOX")
COMPONENTS = (REDIS, CHROMIUM, FIREFOX)

_MISSING = re.compile(r"needs (?P<name>.+?), which is not installed here")


def install_command(components: Iterable[Component]) -> str:
    """The one command that installs ``components`` (``sudo`` unless already root)."""
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y " + " ".join(c.package for c in components)


def skipped_for_missing(skips: Iterable[tuple[str, str]]) -> dict[Component, list[str]]:
    """(test id, skip reason) pairs → the tests each missing component kept from running, in
    `COMPONENTS` order."""
    by_name = {c.name: c for c in COMPONENTS}
    found: dict[Component, list[str]] = {}
    for nodeid, reason in skips:
        if (m := _MISSING.search(reason)) and m["name"] in by_name:
            found.setdefault(by_name[m["name"]], []).append(nodeid)
    return {c: found[c] for c in COMPONENTS if c in found}
