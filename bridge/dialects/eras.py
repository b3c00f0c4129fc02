"""The MCP revisions by name ("eras", issue 21): what the MCP flow tells a host's era by, what the
era bridge speaks on each side, and what the rules keys `host_era` / `server_era` and their flags
take. It imports nothing, so a command line is built without the rules schema (cold start)."""

LEGACY_ERA, MODERN_ERA = "2025-11-25", "2026-07-28"
#: What `host_era` / `server_era` take: `auto` lets the host's era pass through.
ERAS = ("auto", LEGACY_ERA, MODERN_ERA)
