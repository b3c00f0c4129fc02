"""The demo's view of a message (bridge/demo_view.py): JSON laid out within a width without ever
breaking inside a token, and the changes between two messages, path by path, with their reasons."""
from __future__ import annotations

import json
import random

import pytest

from bridge.demo_view import changes, layout


def joined(lines: list[str]) -> object:
    return json.loads(" ".join(line.strip() for line in lines))


def random_json(rng: random.Random, depth: int = 0) -> object:
    kind = rng.choice(["dict", "list", "str", "num", "bool", "null"] if depth < 4 else ["str", "num", "null"])
    if kind == "dict":
        return {rng.choice(["id", "body", "tags", "x_y", "reminder-bridge/original", "é"]) + str(n):
                random_json(rng, depth + 1) for n in range(rng.randint(0, 5))}
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "str":
        return "".join(rng.choice('ab ,:"\\{}[]…\n') for _ in range(rng.randint(0, 50)))
    return {"num": rng.randint(-10**6, 10**6), "bool": rng.random() < 0.5, "null": None}[kind]


@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_layout_stays_within_the_width_and_parses_back(width):
    rng = random.Random(width)
    for _ in range(300):
        value = random_json(rng)
        lines = layout(value, width, 4)
        assert all(len(line) <= width for line in lines[1:]) and 4 + len(lines[0]) <= width
        back = joined(lines)
        if "…" not in " ".join(lines):
            assert back == value  # only a shortened string ever differs


def test_layout_keeps_what_fits_on_one_line_and_shortens_only_strings_too_long_for_any_line():
    assert layout({"a": 1, "b": [1, 2]}, 100) == ['{"a": 1, "b": [1, 2]}']
    lines = layout({"text": "word " * 40}, 40)
    assert joined(lines)["text"].endswith("…") and all(len(line) <= 40 for line in lines)


def test_a_legacy_reminder_rewritten_as_a_standard_one_moves_and_its_source_is_explained():
    legacy = {"method": "notifications/message", "params": {"level": "info", "_meta": {"harn": {"reminder": {
        "id": "r1", "body": "b", "dedupeKey": "k", "source": "stdlib_provider"}}}}}
    standard = {"method": "notifications/reminder", "params": {"reminder": {
        "id": "r1", "body": "b", "dedupeKey": "k", "_meta": {"reminder-bridge/original": {"source": "provider"}}}}}
    found = changes(legacy, standard)
    assert [c.text() for c in found] == [
        '~ method: "notifications/message" → "notifications/reminder"',
        "→ params._meta.harn.reminder → params.reminder",
        '~ source → _meta."reminder-bridge/original".source: "stdlib_provider" → "provider"',
        '- params.level: "info"',
    ]
    assert found[2].why.startswith('"stdlib_provider" is Harn\'s name for "provider" (spec §2); kept under _meta')


def test_a_field_spelled_the_other_way_is_a_rename_and_an_added_mode_says_why():
    found = changes({"method": "session/inject_reminder", "params": {"body": "b", "dedupeKey": "k"}},
                    {"method": "session/remind", "params": {"body": "b", "dedupe_key": "k", "mode": "finish_step"}})
    assert [(c.text(), c.why.split(",")[0]) for c in found] == [
        ('~ method: "session/inject_reminder" → "session/remind"', ""),
        ("→ params.dedupeKey → params.dedupe_key", "Harn spells it snake_case"),
        ('+ params.mode: "finish_step"', "Harn reads a missing mode as audit_only"),
    ]


def test_identical_messages_have_no_changes():
    assert changes({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) == []
