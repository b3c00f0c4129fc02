"""Outbox declarations (docs/outbox.md): which resources may be polled, a host's manifest that names
one, and the rules file's refusals of an outbox section, each with file, line and key."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from bridge.declaration import check_resource, read_manifest, read_uri
from bridge.rules import RulesError, parse_rules_text


@pytest.mark.parametrize("uri, says", [
    ("notifications", "has no scheme"),
    ("/var/outbox", "has no scheme"),
    ("acme://notifications?since=1", "carries a query string"),
    ("acme://notifications#latest", "carries a fragment"),
    ("acme://x y", "whitespace"),
    ("a" * 500 + "://" + "b" * 20, "at most 512"),
] + [(f"{scheme}://acme/notifications", f"uses the {scheme}:// scheme, which hosts resolve themselves")
     for scheme in ("skill", "ui", "instructions", "artifact", "files", "app")])
def test_refused_declarations_say_why(uri, says):
    with pytest.raises(ValueError) as refused:
        check_resource(uri)
    assert says in str(refused.value)


def test_accepted_declaration_and_the_read_uri():
    assert check_resource("acme://notifications") == "acme://notifications"
    assert read_uri("acme://n", None, 100, 5000) == "acme://n?maxEvents=100&maxAgeMs=5000"  # bootstrap: no cursor
    uri = read_uri("acme://n", "a b/c:1", 10, 60)
    assert parse_qs(urlsplit(uri).query) == {"cursor": ["a b/c:1"], "maxEvents": ["10"], "maxAgeMs": ["60"]}
    assert "+" not in uri  # RFC 6570 percent-encodes spaces


def test_manifest_declaration(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"name": "acme", "_meta": {"ai.nimblebrain/host": {
        "host_version": "1.0", "notifications": {"resource": "acme://notifications"}}}}))
    assert read_manifest(manifest) == "acme://notifications"
    manifest.write_text(json.dumps({"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "ui://acme"}}}}))
    with pytest.raises(ValueError, match=r'notifications.resource uses the ui:// scheme'):
        read_manifest(manifest)
    manifest.write_text(json.dumps({"name": "acme"}))
    with pytest.raises(ValueError, match="declares no outbox"):
        read_manifest(manifest)


def problems(text: str, file: str = "<string>") -> list[str]:
    with pytest.raises(RulesError) as err:
        parse_rules_text(text, file)
    return [str(p) for p in err.value.problems]


def test_rules_refusals_name_file_line_and_key(tmp_path):
    (tmp_path / "ui.json").write_text(json.dumps(
        {"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "app://acme"}}}}))
    rules = tmp_path / "rules.toml"
    found = problems(
        '[routes.a]\nprotocol = "mcp"\n[routes.a.outbox]\nresource = "acme://n?x=1"\n'
        '[routes.b]\nprotocol = "mcp"\noutbox = { manifest = "ui.json" }\n'
        '[routes.c]\nprotocol = "mcp"\n[routes.c.outbox]\nresource = "acme://n"\nmanifest = "ui.json"\n'
        '[routes.d]\nprotocol = "mcp"\n[routes.d.outbox]\npoll_floor_ms = 5000\npoll_ceiling_ms = 1000\n'
        'max_events = 0\n'
        '[routes.e]\nprotocol = "acp"\nserve_outbox = { resource = "acme://r" }\n'
        '[routes.f]\nprotocol = "mcp"\nserve_outbox = { resource = "skill://r", retention_s = 0 }\n',
        str(rules))
    where = str(rules)
    assert f"{where}:4: routes.a.outbox.resource: carries a query string" in found[0]
    assert found[1].startswith(f'{where}:7: routes.b.outbox.manifest: manifest \'{tmp_path}/ui.json\': '
                               '_meta["ai.nimblebrain/host"].notifications.resource uses the app:// scheme')
    assert found[2] == f"{where}:12: routes.c.outbox.manifest: give resource or manifest, not both"
    assert found[3] == f"{where}:17: routes.d.outbox.poll_ceiling_ms: must be >= poll_floor_ms (5000) (got 1000)"
    assert found[4] == f"{where}:18: routes.d.outbox.max_events: must be an integer from 1 to 1000 (got 0)"
    assert found[5] == f"{where}:19: routes.e: outbox and serve_outbox are MCP resources; this route's protocol is acp"
    assert found[6].startswith(f"{where}:24: routes.f.serve_outbox.resource: uses the skill:// scheme")
    assert found[7] == f"{where}:24: routes.f.serve_outbox.retention_s: must be an integer >= 1 (got 0)"
    assert len(found) == 8


def test_an_identity_must_name_a_header_end_to_end_and_one_way(tmp_path):
    where = str(tmp_path / "rules.toml")
    found = problems(
        '[routes.a]\nprotocol = "mcp"\n[routes.a.serve_outbox]\nresource = "bridge://r"\nidentity = "cookie:sid"\n'
        '[routes.b]\nprotocol = "mcp"\nserve_outbox = { resource = "bridge://r", identity = "header:Mcp-Session-Id" }\n'
        '[routes.c]\nprotocol = "mcp"\n[routes.c.outbox]\nresource = "acme://n"\nidentity = "header:authorization"\n'
        '[routes.c.serve_outbox]\nresource = "bridge://r"\nidentity = "header:x-user"\n', where)
    assert found[0] == (f'{where}:5: routes.a.serve_outbox.identity: must be "header:<name>", naming a request header '
                        'such as authorization (got "cookie:sid")')
    assert found[1].startswith(f'{where}:8: routes.b.serve_outbox.identity: "Mcp-Session-Id" names no one')
    assert found[2] == (f"{where}:9: routes.c: outbox.identity and serve_outbox.identity differ; a route keys its "
                        "outboxes one way (set it once)")
    named = parse_rules_text('[routes.a]\nprotocol = "mcp"\nserve_outbox = { resource = "bridge://r", '
                             'identity = "header:Authorization" }\n').routes["a"]
    assert named.identity == "header:authorization"  # header names are case-blind


def test_rules_paths_are_relative_to_the_rules_file(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"_meta": {"ai.nimblebrain/host": {"notifications": {"resource": "acme://n"}}}}))
    rules = parse_rules_text('[routes.a]\nprotocol = "mcp"\n[routes.a.outbox]\nmanifest = "manifest.json"\n'
                             'store = "state/outbox.sqlite3"\n', str(tmp_path / "rules.toml"))
    outbox = rules.routes["a"].outbox
    assert outbox.manifest == str(tmp_path / "manifest.json") and outbox.store == str(tmp_path / "state/outbox.sqlite3")
    assert (outbox.max_events, outbox.poll_floor_ms, outbox.poll_ceiling_ms) == (100, 1000, 60000)
