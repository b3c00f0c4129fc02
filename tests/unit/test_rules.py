"""Rules files (spec §7): shipped files load, and every problem names file, line, key and fix."""
import re
import tomllib

import pytest

from bridge.problems import locate_keys
from bridge.rules import (
    DEFAULT_ENVELOPE, Budget, RouteSettings, RuleProblem, Rules, RulesError, check_files, load_rules, parse_rules_text,
)
from tests.paths import ROOT

SHIPPED = [ROOT / "rules" / "default.toml", *sorted((ROOT / "rules" / "examples").glob("*.toml"))]


def problems(text: str) -> list[RuleProblem]:
    with pytest.raises(RulesError) as exc:
        parse_rules_text(text, "r.toml")
    return exc.value.problems


def one(text: str) -> RuleProblem:
    [p] = problems(text)
    return p


# ---------------------------------------------------------------- shipped files


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_files_load(path):
    assert isinstance(load_rules(path), Rules)


def test_examples_exist():
    assert len(SHIPPED) >= 3


def test_default_toml_is_the_builtin_behaviour():
    rules = load_rules(ROOT / "rules" / "default.toml")
    assert rules.defaults == RouteSettings()
    assert rules.routes == {}
    assert rules == Rules()


def test_default_toml_commented_examples_are_valid_when_uncommented():
    text = (ROOT / "rules" / "default.toml").read_text()
    uncommented = re.sub(r"(?m)^# (?=\[|[a-z0-9_]+ = )", "", text)
    assert uncommented.count("[routes.") >= 4
    rules = parse_rules_text(uncommented, "default.toml (uncommented)")
    assert {r.protocol for r in rules.routes.values()} == {"mcp", "acp", "a2a"}
    assert rules.global_budget is not None and rules.route("fs").budget.rate == 30
    assert rules.route("planner").fallback.a2a_peer_none == "drop"


def test_check_files_clean_and_dirty(tmp_path):
    assert check_files(SHIPPED) == []
    bad = tmp_path / "bad.toml"
    bad.write_text('[routes.fs]\nprotocol = "mcp"\nstage = "translat"\n')
    missing = tmp_path / "nope.toml"
    found = check_files([*SHIPPED, bad, missing])
    assert [str(p) for p in found[:1]] == [
        f'{bad}:3: routes.fs.stage: must be one of observe, dual, translate, enforce (got "translat")']
    assert found[1].file == str(missing) and found[1].line is None
    assert "cannot read rules file" in str(found[1])


# ---------------------------------------------------------------- built-ins and merging


def test_builtin_defaults():
    s = RouteSettings()
    assert (s.protocol, s.stage, s.host_dialect, s.peer_dialect) == (None, "translate", "auto", "auto")
    assert s.require_declaration is True and s.envelope == DEFAULT_ENVELOPE
    assert (s.fallback.mcp_host_none, s.fallback.acp_agent_none, s.fallback.a2a_peer_none) == (
        "tool_result", "hold", "prepend")
    assert s.budget is None
    t = s.trust
    assert (t.max_body_bytes, t.max_tags, t.max_tag_chars, t.max_pending_per_session) == (4096, 16, 64, 64)
    assert t.strip_control is True and t.role_hint_ceiling is None
    assert Budget() == Budget(rate=60.0, burst=10, key="server", over="drop", shadow=False, max_keys=100000)
    r = Rules()
    assert r.version == 1 and r.global_budget is None
    assert (r.telemetry.exporter, r.telemetry.sampling, r.telemetry.capture_bodies) == ("none", 1.0, False)
    assert (r.admin.listen, r.admin.token) == ("127.0.0.1:9464", "")


def test_empty_file_is_valid():
    assert parse_rules_text("") == Rules()


def test_defaults_deep_merge_into_routes():
    rules = parse_rules_text("""
[defaults]
stage = "observe"
command = ["a"]
[defaults.trust]
max_tags = 3
role_hint_ceiling = "developer"
[defaults.budget]
rate = 30
key = "session"

[routes.a]
protocol = "mcp"
command = ["b", "c"]
[routes.a.trust]
max_body_bytes = 100
[routes.a.budget]
burst = 2

[routes.b]
protocol = "acp"
stage = "enforce"
""")
    a, b = rules.route("a"), rules.route("b")
    assert a.stage == "observe" and b.stage == "enforce"
    assert a.command == ["b", "c"] and b.command == ["a"]          # lists replace, not merge
    assert (a.trust.max_tags, a.trust.max_body_bytes, a.trust.role_hint_ceiling) == (3, 100, "developer")
    assert (b.trust.max_tags, b.trust.max_body_bytes) == (3, 4096)
    assert (a.budget.rate, a.budget.burst, a.budget.key) == (30.0, 2, "session")
    assert (b.budget.rate, b.budget.burst) == (30.0, 10)
    assert rules.routes == {"a": a, "b": b}


def test_protocol_may_come_from_defaults():
    rules = parse_rules_text('[defaults]\nprotocol = "a2a"\n[routes.x]\nupstream = "https://x.test"\n')
    assert rules.route("x").protocol == "a2a"


def test_rate_accepts_int_and_float():
    rules = parse_rules_text('[routes.a]\nprotocol="mcp"\nbudget = { rate = 5, burst = 1 }\n'
                             '[routes.b]\nprotocol="mcp"\n[routes.b.budget]\nrate = 0.5\n')
    assert rules.route("a").budget.rate == 5.0 and rules.route("b").budget.rate == 0.5


def test_unknown_route_lookup_names_known_routes():
    rules = parse_rules_text('[routes.fs]\nprotocol = "mcp"\n[routes.web]\nprotocol = "a2a"\n')
    with pytest.raises(KeyError, match=r"unknown route 'nope' \(known routes: fs, web\)"):
        rules.route("nope")
    with pytest.raises(KeyError, match=r"known routes: none"):
        Rules().route("x")


# ---------------------------------------------------------------- problems


def test_problem_format():
    assert str(RuleProblem("a.toml", 3, "routes.x.stage", "bad")) == "a.toml:3: routes.x.stage: bad"
    assert str(RuleProblem("a.toml", None, "", "cannot read")) == "a.toml: cannot read"
    err = RulesError([RuleProblem("a", 1, "k", "m1"), RuleProblem("a", 2, "k", "m2")])
    assert str(err) == "a:1: k: m1\na:2: k: m2"


def test_syntax_error_has_line():
    p = one('version = 1\n[routes.fs]\nprotocol = "mcp"\nstage = translate\n')
    assert (p.file, p.line, p.key) == ("r.toml", 4, "")
    assert p.message.startswith("TOML syntax error: ") and "(column" in p.message
    assert "at line" not in p.message
    assert str(p).startswith("r.toml:4: TOML syntax error: ")


def test_syntax_error_at_end_of_file():
    p = one('[routes.fs]\ncommand = ["a",\n')
    assert p.line == 2 and "end of file" in p.message


def test_unknown_key():
    p = one('[routes.fs]\nprotocol = "mcp"\n\n[routes.fs.budgte]\nrate = 1\n')
    assert (p.line, p.key) == (4, "routes.fs.budgte")
    assert p.message.startswith('unknown key; did you mean "budget"? (allowed: allowed_origins, budget, channel_also_tool_result, channel_instructions, ')


def test_unknown_key_in_sub_table_and_top_level():
    ps = problems('colour = "red"\n[routes.fs]\nprotocol = "mcp"\n[routes.fs.trust]\nmax_tag = 3\n')
    assert [(p.line, p.key) for p in ps] == [(1, "colour"), (5, "routes.fs.trust.max_tag")]
    assert "allowed: admin, defaults, global_budget, limits, routes, state, telemetry, version" in ps[0].message
    assert 'did you mean "max_tags"?' in ps[1].message


def test_unknown_key_without_suggestion_and_misplaced_key():
    p = one('[routes.fs]\nprotocol = "mcp"\n[routes.fs.budget]\nburst = 2\n\nenvelope = "{body}"\n')
    assert str(p) == ("r.toml:6: routes.fs.budget.envelope: unknown key "
                      "(allowed: burst, key, max_keys, over, rate, shadow)")


def test_bad_enum():
    p = one('[routes.fs]\nprotocol = "mcp"\nstage = "translat"\n')
    assert str(p) == 'r.toml:3: routes.fs.stage: must be one of observe, dual, translate, enforce (got "translat")'


@pytest.mark.parametrize("key,value,expected", [
    ("protocol", '"grpc"', "must be one of mcp, acp, a2a"),
    ("host_dialect", '"modern"', "must be one of auto, standard, legacy, none, claude-channel"),
    ("fallback.acp_agent_none", '"queue"', "must be one of hold, off"),
    ("budget.over", '"queue"', "must be one of drop, coalesce"),
    ("trust.role_hint_ceiling", '"root"', "must be one of system, developer, user_block, ephemeral_cache"),
])
def test_enums(key, value, expected):
    text = '[routes.fs]\nprotocol = "mcp"\n' if key != "protocol" else "[routes.fs]\n"
    p = one(f"{text}{key} = {value}\n")
    assert p.key == f"routes.fs.{key}" and p.message == f"{expected} (got {value})"


def test_float_for_integer():
    p = one('[routes.fs]\nprotocol = "mcp"\n[routes.fs.budget]\nrate = 60\nburst = 10.0\n')
    assert str(p) == "r.toml:5: routes.fs.budget.burst: must be an integer >= 1 (got 10.0)"


@pytest.mark.parametrize("line,expected", [
    ("budget.burst = 0", "routes.fs.budget.burst: must be an integer >= 1 (got 0)"),
    ("budget.rate = 0", "routes.fs.budget.rate: must be a number > 0 (got 0)"),
    ("budget.rate = -1.5", "routes.fs.budget.rate: must be a number > 0 (got -1.5)"),
    ("budget.max_keys = 0", "routes.fs.budget.max_keys: must be an integer >= 1 (got 0)"),
    ("trust.max_tags = -1", "routes.fs.trust.max_tags: must be an integer >= 0 (got -1)"),
    ("trust.max_body_bytes = 0", "routes.fs.trust.max_body_bytes: must be an integer >= 1 (got 0)"),
    ("trust.strip_control = 1", "routes.fs.trust.strip_control: must be true or false (got 1)"),
    ("budget.shadow = \"yes\"", 'routes.fs.budget.shadow: must be true or false (got "yes")'),
    ("command = []", "routes.fs.command: must be a non-empty list of strings (got [])"),
    ("command = \"python srv.py\"", 'routes.fs.command: must be a non-empty list of strings (got "python srv.py")'),
    ("command = [\"python\", 3]", "routes.fs.command[1]: must be a string (got 3)"),
    ("path = \"mcp\"", 'routes.fs.path: must start with "/" (got "mcp")'),
    ("budget = 5", "routes.fs.budget: must be a table (got 5)"),
])
def test_out_of_range_and_wrong_types(line, expected):
    p = one(f'[routes.fs]\nprotocol = "mcp"\n{line}\n')
    assert p.line == 3 and f"{p.key}: {p.message}" == expected


def test_global_telemetry_admin_version():
    ps = problems("""version = 2
[global_budget]
burst = true
[telemetry]
exporter = "jaeger"
sampling = 1.5
otlp_endpoint = "localhost:4318"
[admin]
listen = "9464"
""")
    assert [f"{p.line} {p.key}: {p.message}" for p in ps] == [
        "1 version: must be 1, the only rules-file version (got 2)",
        "3 global_budget.burst: must be an integer >= 1 (got true)",
        '5 telemetry.exporter: must be one of none, console, otlp (got "jaeger")',
        "6 telemetry.sampling: must be a number from 0 to 1 (got 1.5)",
        '7 telemetry.otlp_endpoint: must be an http(s):// URL (got "localhost:4318"); did you mean "http://localhost:4318"?',
        '9 admin.listen: must be HOST:PORT with a port 0-65535, e.g. "127.0.0.1:9464" (got "9464")',
    ]


def test_global_budget_accepts_only_rate_and_burst():
    p = one('[global_budget]\nrate = 100\nkey = "tag"\n')
    assert (p.line, p.key) == (3, "global_budget.key") and "(allowed: burst, rate)" in p.message


@pytest.mark.parametrize("template,message", [
    ("{id}: {body} {colour}", "unknown placeholder {colour} (allowed: {id} {source} {body} {tags} {dedupe_key})"),
    ("<r>{}</r>{body}", "unknown placeholder {} (allowed: "),
    ("<r>{body.upper}</r>", "unknown placeholder {body.upper} (allowed: "),
    ("<r>{body!r}</r>", "placeholder {body} may not carry a format spec or conversion"),
    ("<r>{id}</r>", "must contain {body}"),
    ("<r>{body}</r> {", "unmatched brace; write {{ or }} for a literal brace"),
])
def test_bad_envelope(template, message):
    p = one(f"[routes.fs]\nprotocol = \"mcp\"\nenvelope = '{template}'\n")
    assert (p.line, p.key) == (3, "routes.fs.envelope") and message in p.message


def test_good_envelopes():
    text = "[routes.fs]\nprotocol = \"mcp\"\nenvelope = '{{literal}} [{tags}] {dedupe_key} {source} {id}: {body}'\n"
    assert parse_rules_text(text).route("fs").envelope.startswith("{{literal}}")


@pytest.mark.parametrize("url, hint", [
    ("ftp://x", ""), ("127.0.0.1:3000", '; did you mean "http://127.0.0.1:3000"?'), ("http://", ""),
    ("https://host:99999", ""), ("file:///tmp/s", ""), ("localhost:3000/mcp", '; did you mean "http://localhost:3000/mcp"?'),
])
def test_bad_upstream(url, hint):
    p = one(f'[routes.fs]\nprotocol = "mcp"\nupstream = "{url}"\n')
    assert str(p) == f'r.toml:3: routes.fs.upstream: must be an http(s):// or ws(s):// URL (got "{url}"){hint}'


def test_a_bad_upstream_is_shown_without_its_secrets():
    p = one('[routes.fs]\nprotocol = "mcp"\nupstream = "ftp://me:hunter22@host/x?key=K3Y"\n')
    assert "hunter22" not in str(p) and "K3Y" not in str(p)


@pytest.mark.parametrize("url", ["http://127.0.0.1:3000", "https://a.example/mcp", "ws://[::1]:80/x", "wss://h"])
def test_good_upstream(url):
    assert parse_rules_text(f'[routes.fs]\nprotocol = "mcp"\nupstream = "{url}"\n').route("fs").upstream == url


def test_missing_protocol_points_at_table_header():
    p = one('version = 1\n\n[routes.fs]\ncommand = ["srv"]\n')
    assert str(p) == "r.toml:3: routes.fs.protocol: required key is missing; must be one of mcp, acp, a2a"


def test_missing_protocol_route_declared_only_by_sub_table():
    p = one("[routes.fs.budget]\nrate = 1\n")
    assert (p.line, p.key) == (1, "routes.fs.protocol")


def test_bad_route_name():
    p = one('[routes."my route"]\nprotocol = "mcp"\n')
    assert (p.line, p.key) == (1, 'routes."my route"') and "letters, digits" in p.message


def test_quoted_route_name_with_dots():
    rules = parse_rules_text('[routes."planner.v2"]\nprotocol = "a2a"\n')
    assert rules.route("planner.v2").protocol == "a2a"
    p = one('[routes."planner.v2"]\nprotocol = "a2a"\nstage = 1\n')
    assert (p.line, p.key) == (3, 'routes."planner.v2".stage')


def test_problems_in_defaults_are_reported_once_under_defaults():
    ps = problems("""[defaults]
stage = "fast"
[defaults.trust]
max_tags = 1.0
[routes.a]
protocol = "mcp"
[routes.b]
protocol = "acp"
stage = "observe"
""")
    assert [(p.line, p.key) for p in ps] == [(2, "defaults.stage"), (4, "defaults.trust.max_tags")]


def test_all_problems_are_reported_sorted_by_line():
    ps = problems("""version = 1
[defaults]
stage = "translat"

[routes.fs]
protocol = "mcp"
upstream = "ftp://x"
envelope = "{nope}{body}"
[routes.fs.budget]
burst = 10.0
colour = "red"

[routes.web]
path = "web"

[telemetry]
sampling = -0.1
""")
    assert [(p.line, p.key) for p in ps] == [
        (3, "defaults.stage"), (7, "routes.fs.upstream"), (8, "routes.fs.envelope"),
        (10, "routes.fs.budget.burst"), (11, "routes.fs.budget.colour"),
        (13, "routes.web.protocol"), (14, "routes.web.path"), (17, "telemetry.sampling")]
    assert all(p.file == "r.toml" for p in ps)


def test_load_rules_names_the_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[routes.fs]\nprotocol = "mcp"\n[routes.fs.trust]\nmax_tags = "many"\n')
    with pytest.raises(RulesError) as exc:
        load_rules(f)
    assert str(exc.value) == f'{f}:4: routes.fs.trust.max_tags: must be an integer >= 0 (got "many")'


# ---------------------------------------------------------------- locator


def test_locator_handles_toml_syntax():
    text = '''# comment with [fake] = header
top = """
[not.a.table]
key = "inside a string"
"""
lit = \'\'\'x = 1\'\'\'
arr = [
  "a", # comment ]
  ["b", "c"],
]
"quoted.key" = 1
a . b."c d" = { x = 1, y = [1, 2] }   # trailing
[ t . "u.v" ]
w = 'it"s' # literal strings have no escapes
[[arr_of]]
z = "esc \\" q = 2"
after = true
'''
    tomllib.loads(text)  # the locator only ever sees valid TOML
    lines = locate_keys(text)
    assert lines[("top",)] == 2 and lines[("lit",)] == 6 and lines[("arr",)] == 7
    assert ("not", "a", "table") not in lines and ("key",) not in lines
    assert lines[("quoted.key",)] == 11
    assert lines[("a", "b", "c d")] == 12 and lines[("a",)] == 12
    assert lines[("t", "u.v")] == 13 and lines[("t", "u.v", "w")] == 14
    assert lines[("arr_of", "z")] == 16 and lines[("arr_of", "after")] == 17
    assert ("q",) not in lines and ("arr_of", "q") not in lines


def test_serve_limits_and_origins_are_checked_with_their_lines():
    ps = problems('[limits]\nmax_sessions = 0\nheader_timeout_s = -1\n'
                  '[routes.web]\nprotocol = "mcp"\npath = "/"\nupstream = "http://127.0.0.1:1"\n'
                  'allowed_origins = ["https://ok.example", "https://x.example/path", "loopback", "*"]\n'
                  '[routes.agent]\nprotocol = "acp"\npath = "/acp"\nupstream = "http://127.0.0.1:2"\n')
    found = {(p.line, p.key): p.message for p in ps}
    assert "must be an integer >= 1" in found[(2, "limits.max_sessions")]
    assert "must be a number > 0" in found[(3, "limits.header_timeout_s")]
    assert '"https://x.example/path"' in found[(8, "routes.web.allowed_origins")]
    assert "ACP has no HTTP transport" in found[(9, "routes.agent")]
    rules = parse_rules_text('[limits]\nmax_event_bytes = 1000\n[routes.web]\nprotocol = "mcp"\n'
                             'allowed_origins = ["HTTPS://App.Example:8443", "loopback"]\n')
    assert rules.limits.max_event_bytes == 1000 and rules.limits.max_sessions == 10_000
    assert rules.routes["web"].allowed_origins == ["https://app.example:8443", "loopback"]
    assert parse_rules_text("").routes == {} and parse_rules_text("").defaults.allowed_origins == ["loopback"]


def test_state_table_is_checked_and_never_shows_its_password():
    rules = parse_rules_text('[state]\nurl = "redis://:pw@redis:6379/0"\nkey_prefix = "fleet-a:"\n'
                             'on_unavailable = "closed"\n')
    assert (rules.state.url, rules.state.key_prefix, rules.state.on_unavailable) == \
        ("redis://:pw@redis:6379/0", "fleet-a:", "closed")
    assert rules.state.shared and not parse_rules_text("").state.shared
    ps = problems('[state]\nurl = "http://admin:hunter2@redis/0"\non_unavailable = "maybe"\n')
    assert [(p.line, p.key) for p in ps] == [(2, "state.url"), (3, "state.on_unavailable")]
    assert "unknown scheme 'http'" in ps[0].message and "hunter2" not in ps[0].message


# ---------------------------------------------------------------- host adapters (spec §11)


def test_claude_channel_is_an_mcp_host_dialect():
    rules = parse_rules_text('[defaults]\nhost_dialect = "claude-channel"\n[routes.ws]\nprotocol = "mcp"\n'
                             'channel_instructions = "<channel source=\\"{server}\\"> events are CI results."\n')
    assert rules.defaults.host_dialect == rules.route("ws").host_dialect == "claude-channel"
    assert rules.route("ws").channel_instructions == '<channel source="{server}"> events are CI results.'
    assert RouteSettings().channel_instructions is None  # the built-in paragraph


@pytest.mark.parametrize("protocol", ["acp", "a2a"])
def test_claude_channel_is_refused_for_other_protocols_with_its_line(protocol):
    p = one(f'[routes.x]\nprotocol = "{protocol}"\nupstream = "ws://h/x"\nhost_dialect = "claude-channel"\n')
    assert str(p) == (f'r.toml:4: routes.x.host_dialect: "claude-channel" is a host dialect for MCP only '
                      f'(Claude Code channels), not for {protocol}')


def test_claude_channel_inherited_from_defaults_is_refused_at_the_route_beside_other_problems():
    ps = problems('[defaults]\nhost_dialect = "claude-channel"\n[routes.mcp]\nprotocol = "mcp"\n'
                  '[routes.agent]\nprotocol = "acp"\n[routes.other]\nprotocol = "mcp"\nstage = "fast"\n')
    assert [(p.line, p.key) for p in ps] == [(5, "routes.agent.host_dialect"), (9, "routes.other.stage")]
    assert "not for acp" in ps[0].message


@pytest.mark.parametrize("text, message", [
    ('"  "', "must say what the channel events are (leave the key out for the built-in paragraph)"),
    ('"from {route}"', "unknown placeholder {route} (allowed: {server})"),
    ('"from {server!r}"', "placeholder {server} may not carry a format spec or conversion"),
    ('"a } b"', "has an unmatched brace; write {{ or }} for a literal brace"),
])
def test_bad_channel_instructions(text, message):
    p = one(f'[routes.ws]\nprotocol = "mcp"\nchannel_instructions = {text}\n')
    assert (p.line, p.key, p.message) == (3, "routes.ws.channel_instructions", message)


def test_channel_also_tool_result_is_for_claude_channel_routes():
    rules = parse_rules_text('[routes.ws]\nprotocol = "mcp"\nhost_dialect = "claude-channel"\n'
                             'channel_also_tool_result = true\n'
                             '[routes.cli]\nprotocol = "mcp"\nchannel_also_tool_result = true\n')  # --host-dialect names it
    assert rules.route("ws").channel_also_tool_result and rules.route("cli").channel_also_tool_result
    assert RouteSettings().channel_also_tool_result is False


@pytest.mark.parametrize("lines, message", [
    ('protocol = "acp"\nupstream = "ws://h/x"',
     'applies to MCP routes only (a "claude-channel" host); this route\'s protocol is "acp"'),
    ('protocol = "mcp"\nhost_dialect = "none"',
     'applies to a "claude-channel" host only, and this route\'s host_dialect is "none"; set host_dialect = '
     '"claude-channel", or leave it "auto" for --host-dialect claude-channel'),
])
def test_channel_also_tool_result_is_refused_where_no_channel_event_is_sent(lines, message):
    p = one(f"[routes.x]\n{lines}\nchannel_also_tool_result = true\n")
    assert (p.line, p.key, p.message) == (4, "routes.x.channel_also_tool_result", message)
    parse_rules_text(f"[routes.x]\n{lines}\nchannel_also_tool_result = false\n")  # off is never wrong


def test_channel_also_tool_result_is_a_boolean():
    p = one('[routes.ws]\nprotocol = "mcp"\nchannel_also_tool_result = "yes"\n')
    assert str(p) == 'r.toml:3: routes.ws.channel_also_tool_result: must be true or false (got "yes")'
