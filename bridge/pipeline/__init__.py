"""The sans-I/O core: per-connection flows that turn a frame into typed commands.

- `commands`: the vocabulary between a flow and its transport (`Forward`, `Send`, `Reply`,
  `Call`, `Wakeup`, `Defer`);
- `flow`: what every protocol shares (framing, pre-filter, the proxy's own calls, wakeups,
  policy, decisions);
- `negotiation`: each side's dialect and the stage rules, one place each;
- `mcp`, `acp`, `a2a`: the protocol flows;
- `addons`: the hooks add-ons (the outbox) attach to;

docs/architecture.md shows how a frame flows through them.
"""

