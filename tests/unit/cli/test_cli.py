"""The command line's parser (`build_parser`), without a process: what an option line parses to
(its mistakes and `--help` examples, through `python -m bridge`: tests/integration/test_cli_conventions.py)."""
from __future__ import annotations

from bridge.cli import build_parser

UPSTREAM = ["--protocol", "mcp", "--upstream", "http://127.0.0.1:9"]


def test_header_is_its_own_option_beside_header_timeout():
    args = build_parser().parse_args(["serve", *UPSTREAM, "--header", "X-Key: k", "--header-timeout", "5"])
    assert (args.header, args.header_timeout_s) == ([("X-Key", "k")], 5.0)
