"""MCP host ↔ server (spec §3): reminders flow toward the host only."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridge.defaults import UNNAMED_ROUTE
from bridge.dialects.eras import LEGACY_ERA, MODERN_ERA
from bridge.dialects.hosts import HostAdapter, adapter_of
from bridge.dialects.mcp import (
    ACK_METHOD, CLIENT_CAPS_KEY, CLIENT_INFO_KEY, CODECS, HOST_CODECS, LISTEN_METHOD, LOG_LEVEL_KEY, PROTOCOL_KEY,
    REMINDERS_FILTER, SERVER_INFO_KEY, SUBSCRIPTION_KEY, VERSION_HEADER, McpLegacy, McpStandard, routing_headers,
)
from bridge.dialects.paths import get_path, params_meta
from bridge.envelope import render
from bridge.fields import ReminderError
from bridge.jsonrpc import dumps, id_key, loads
from bridge.lazy import lazily
from bridge.lifecycle import ToolResultRides
from bridge.pending import PendingQueue
from bridge.pipeline.capabilities import CapabilityRule
from bridge.pipeline.commands import HOST, PEER, Command, Receipt
from bridge.pipeline.flow import Flow, Handled
from bridge.pipeline.policing import held_key
from bridge.pipeline.negotiation import SPOKEN, keeps_legacy
from bridge.pipeline.subscriptions import Subscriptions
from bridge.pipeline.waiting import Step
from bridge.state.scope import IDENTITY, REQUEST

if TYPE_CHECKING:
    from bridge import model
    from bridge.model import Reminder
else:  # pydantic: loaded by the first reminder a route decodes (issue 23)
    model = lazily("bridge.model")

_ENVELOPE = PROTOCOL_KEY.encode()
#: The host is told the server's capability in the host's dialect only (whichever dialect declared it).
CAPABILITIES = CapabilityRule(CODECS, borrow=True, exclusive=True, replaces=True)


@dataclass
class McpState:
    """MCP's rows of the flow's state table (the dialects and the stage are the flow's own)."""

    #: LEGACY_ERA (initialize, sessions) or MODERN_ERA (server/discover, a `_meta` envelope on every
    #: request), once the host showed which; None before
    era: str | None = None
    #: the host's handshake (or first modern request) was seen: `auto` has been resolved
    handshake_seen: bool = False
    #: what the server's handshake said about reminders; None until seen
    peer_declared: bool | None = None
    #: MODERN_ERA requests in flight that opted in to log messages (the legacy channel's carrier)
    opted_in: set[Any] = field(default_factory=set)
    #: reminders waiting for the next tools/call result (host `none`, fallback `tool_result`),
    #: each with the receipts the result carries once it takes them, by arrival number
    tool_results: PendingQueue[tuple[Reminder, tuple[Receipt, ...]]] = field(default_factory=PendingQueue)
    #: the handshake result told the host it is a Claude Code channel (only then does it listen)
    channel_offered: bool = False
    #: channel events that also ride the next tools/call result (`channel_also_tool_result`)
    rides: ToolResultRides = field(default_factory=ToolResultRides)
    #: the protocol version the server's `initialize` answer settled (HTTP mirrors it in a header)
    version: str | None = None
    #: where the host declared reminders (`McpStandard.host_key`): a 2026-07-28 host is told there
    host_key: tuple[str, ...] | None = None
    #: the host's `subscriptions/listen` requests, by id key → (the id as written, whether its filter
    #: asked for reminders, the proxy's own key for its stream: unique, where hosts choose ids alike);
    #: and those acknowledged as taking them (in the `Subscriptions` book, by that key)
    listens: dict[Any, tuple[Any, bool, str]] = field(default_factory=dict)
    honoured: list[Any] = field(default_factory=list)


class McpFlow(Flow):
    """One MCP connection (stdio) or session (HTTP).

    ``peer_declared``: what the server's handshake said, when this flow will not see it (a
    2026-07-28 request over HTTP); the `translate` command passes True (the user named the dialect).
    ``subscriptions``: the route's book of 2026-07-28 listen streams and held reminders, shared by
    its sessionless requests' flows (a flow of its own otherwise).
    """

    protocol = "mcp"
    assumed = ("standard", "none")  # nothing learned: the standard message is harmless to unknowing hosts

    def __init__(self, *args: Any, peer_declared: bool | None = None, subscriptions: Subscriptions | None = None,
                 **kwargs: Any):
        self.state = McpState(peer_declared=peer_declared)
        self.watchers: dict[Any, tuple[str | None, list[Any]]] = {}  # request id key → (method, add-ons)
        super().__init__(*args, **kwargs)
        #: one request per flow (2026-07-28 over HTTP): what it carries is all of its exchange
        self.sessionless = self.scope.kind in (REQUEST, IDENTITY)
        self._book = subscriptions  # None: a book of its own, made at its first listen stream
        #: the scope's held reminders are the book's, shared by its flows, when the scope outlives a request
        self.shares_held = subscriptions is not None and self.scope.lasting
        if self.shares_held:
            self.state.tool_results, evicted = subscriptions.held(self.scope)
            for reminder, _ in evicted:
                self.record("dropped", "tools/call", reminder, target="none",
                            why="held for the fallback of a scope the book had no room left for")
        self._watch_peer()
        self._watch_host()

    @property
    def subscriptions(self) -> Subscriptions:
        if self._book is None:
            self._book = Subscriptions(max_scopes=1)
        return self._book

    def peer_declared(self) -> bool | None:
        return self.state.peer_declared

    def negotiated(self) -> dict[str, Any] | None:
        """What the handshake settled, as a JSON record another replica can `restore` (spec §12);
        None before the handshake."""
        if not self.state.handshake_seen:
            return None
        return {"era": self.state.era, "host": self.host.learned, "peer": self.peer.learned,
                "peer_declared": self.state.peer_declared}

    def restore(self, record: dict[str, Any]) -> None:
        """Continue a session whose handshake another replica saw: its dialects and era, as learned."""
        self.state.era = record.get("era") if record.get("era") in (LEGACY_ERA, MODERN_ERA) else None
        self.state.handshake_seen = True
        if isinstance(record.get("peer_declared"), bool):
            self.state.peer_declared = record["peer_declared"]
        for side, learned in ((self.host, record.get("host")), (self.peer, record.get("peer"))):
            if isinstance(learned, str) and learned in SPOKEN + ("none",):
                side.learn(learned)
        self._watch_host()

    def http_headers(self, frame: bytes) -> dict[str, str]:
        """A 2026-07-28 request's envelope version, method and name (decoded only when it carries an
        envelope); any other frame the version the server's `initialize` answer settled, if any."""
        if _ENVELOPE not in frame:
            return {VERSION_HEADER: self.state.version} if self.state.version else {}
        try:
            msg = loads(frame)
        except ValueError:
            return {}
        return routing_headers(msg) if isinstance(msg, dict) else {}

    @property
    def modern(self) -> bool:
        return self.state.era == MODERN_ERA

    def _watch_host(self) -> None:
        """Host frames worth parsing: handshakes until one is seen, log opt-ins when they matter,
        tool calls while tool results may carry reminders, and what add-ons ask for."""
        markers = [b"emind"]
        if not self.state.handshake_seen or not self.host.fixed:
            markers += [b"initialize", b"discover", b"io.modelcontextprotocol"]
        if self.host.dialect == "legacy":
            markers.append(b"logLevel")
        if self._awaits_tool_results():
            markers.append(b"tools")
        if self.state.era != LEGACY_ERA:
            markers.append(b"subscriptions/listen")
        if self.state.listens:  # the host ends a listen so
            markers.append(b"notifications/cancelled")
        for addon in self.addons:
            markers += addon.host_markers()
        self.host_markers = tuple(markers)

    def _watch_peer(self) -> None:
        """Server frames worth parsing: reminders, and acknowledgements while a listen waits for one."""
        waiting = any(k not in self.state.honoured for k, (_, wants, _) in self.state.listens.items() if wants)
        self.peer_markers = (b"emind", b"acknowledged") if waiting else (b"emind",)

    def refresh_markers(self) -> None:
        """An add-on's interests changed."""
        self._watch_host()

    def on_reconfigure(self, old: Any) -> None:
        self._watch_host()
        answered = self.state.peer_declared is not None  # the server's handshake result went to the host
        if _adapter(self.host.dialect) is not None and answered and not self.state.channel_offered:
            self.recorder.warning("channel_not_offered", why="the host's handshake is over and did not offer it the "
                                  "claude/channel capability: Claude Code listens for channel events only once it "
                                  "reconnects")

    def watch(self, msg: dict[str, Any], addon: Any) -> None:
        """``addon.on_response`` gets the response to the host's request ``msg``."""
        key = id_key(msg.get("id"))
        if key is not None:
            self.watchers.setdefault(key, (msg.get("method"), []))[1].append(addon)
            self.awaiting.setdefault(key, "watched")

    # -- host → server -------------------------------------------------------------------------
    def on_host(self, msg: dict[str, Any]) -> Handled:
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method == "initialize":
            self._learn_host(params.get("capabilities"), params.get("clientInfo"), LEGACY_ERA)
            self.expect_response(msg, "handshake")
        elif method == "server/discover":
            self._learn_host(meta.get(CLIENT_CAPS_KEY), meta.get(CLIENT_INFO_KEY), MODERN_ERA)
            self.expect_response(msg, "handshake")
        elif PROTOCOL_KEY in meta and not (self.modern and self.state.handshake_seen):
            # 2026-07-28 without a discover probe: every request carries the envelope
            self._learn_host(meta.get(CLIENT_CAPS_KEY), meta.get(CLIENT_INFO_KEY), MODERN_ERA)
        if LOG_LEVEL_KEY in meta and "id" in msg:
            self.state.opted_in.add(id_key(msg["id"]))
            self.expect_response(msg, "call")
        if method == "tools/call" and self._awaits_tool_results():
            self.expect_response(msg, "tool")
        if method == LISTEN_METHOD and "id" in msg:
            wants = get_path(params, "notifications", REMINDERS_FILTER) is True
            self.state.listens[id_key(msg["id"])] = (msg["id"], wants, self.own_id())
            self.expect_response(msg, "listen")  # the server's answer to it ends the stream
            self._watch_peer()
            self._watch_host()
        elif method == "notifications/cancelled" and self.state.listens:
            self._listen_ended(id_key(params.get("requestId")))
        for addon in self.addons:
            answered = addon.on_host(msg)
            if answered is not None:  # the add-on answered in the server's place: nothing to wait for
                key = id_key(msg.get("id"))
                self.awaiting.pop(key, None)
                self.state.opted_in.discard(key)
                return answered
        if method == LISTEN_METHOD and "id" in msg:  # its answer is the stream: no idle bound cuts it
            return [self.forward(PEER, lasting=True)]
        return None

    def _learn_host(self, caps: Any, client_info: Any, era: str) -> None:
        """The host's handshake: its era, and its reminder dialect (spec §3 `auto`)."""
        self.state.era = era
        first = not self.state.handshake_seen
        self.state.handshake_seen = True
        if caps is None and (self.host.known and not first):
            self._watch_host()
            return  # a modern request without capabilities: what was learned stands
        declared = "standard" if McpStandard.host_declares(caps) else "legacy" if McpLegacy.host_declares(caps) \
            else "none"
        info = client_info if isinstance(client_info, dict) else {}
        name = info.get("name")
        self.recorder.handshake("host", declared, protocol=self.protocol, client=name if isinstance(name, str) else None,
                                version=info.get("version"), capabilities=caps, scope=self.scope, era=era)
        self.host.learn(declared)
        self.state.host_key = McpStandard.host_key(caps)
        self._watch_host()

    # -- server → host -------------------------------------------------------------------------
    def on_peer(self, msg: dict[str, Any]) -> Handled:
        key = id_key(msg.get("id")) if "method" not in msg and "id" in msg else None
        watched = self.watchers.pop(key, None) if key is not None else None
        waited = None if "method" in msg else self.response_to(msg)  # (a notification answers nothing)
        response: dict[str, Any] | None = None  # a rewritten copy of the message, toward the host
        after: list[Command] = []
        receipts: tuple[Receipt, ...] = ()  # what the rewritten response delivers
        if waited == "listen":
            self._listen_ended(key)
        if waited is not None:
            self.state.opted_in.discard(key)
            if waited == "tool":
                # queued for a host that has a dialect of its own now (a reload): pushed after the result;
                # never on 2026-07-28, where what follows a result belongs to no request (they ride it)
                lift = bool(self.state.tool_results) and self.target() in HOST_CODECS \
                    and not self._tool_results_carry_reminders() and not self.modern
                if self.state.rides or (self.state.tool_results and not lift):
                    response, receipts = self._append_to_tool_result(msg, queued=not lift)
                if lift:
                    after = self._lift_tool_results()
        if waited == "handshake" or (waited is None and "method" not in msg and _is_handshake_result(msg)):
            response = self._handshake_result(msg)
        elif waited is None:
            for codec in (McpStandard, McpLegacy):
                slot = codec.slot(msg)
                if slot is not None:
                    return self._reminder(msg, codec, slot)
            if msg.get("method") == ACK_METHOD:
                return self._acknowledged(msg)
        if watched is not None:  # add-ons patch the response after the flow's own rewrite
            method, addons = watched
            for addon in addons:
                patched = addon.on_response(method, response if response is not None else copy.deepcopy(msg))
                if patched is not None:
                    response = patched
        if response is None:
            return [self.forward(HOST), *after] if after else None
        return [self.send(HOST, response, answers=True, receipts=receipts), *after]

    def _handshake_result(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The server's capabilities: learn its dialect, rewrite what the host is told it will get."""
        version = get_path(msg, "result", "protocolVersion")
        if isinstance(version, str):
            self.state.version = version
        caps = get_path(msg, "result", "capabilities")
        if not isinstance(caps, dict):
            return None
        declared = CAPABILITIES.read(caps)
        self.state.peer_declared = declared.any
        info = get_path(msg, "result", "serverInfo")  # 2026-07-28: in discover's `_meta`
        info = info if isinstance(info, dict) else get_path(msg, "result", "_meta", SERVER_INFO_KEY)
        # the server's era: the one the rules name (an era bridge below speaks it, in the host's era
        # toward this flow), else the host's, which the server answered
        era = self.settings.server_era if self.settings.server_era != "auto" else self.state.era
        self.recorder.handshake("peer", declared.spoken, protocol=self.protocol,
                                client=info.get("name") if isinstance(info, dict) else None, era=era)
        self.peer.learn(declared.spoken)
        target = self.host.dialect
        adapter = _adapter(target)
        if adapter is not None:
            return self._offer_channel(msg, adapter)
        cap = CAPABILITIES.told(declared, peer=self.peer.dialect, host=target)
        key = self.state.host_key if self.modern and target == "standard" else None
        moves = key is not None and key != ("reminders",) and (cap is not None or isinstance(caps.get("reminders"), dict))
        if cap is None and not moves:
            return None
        out = copy.deepcopy(msg)
        if cap is not None:
            CAPABILITIES.write(out["result"]["capabilities"], target, cap)
        if moves:  # a 2026-07-28 host is told where it declared reminders itself
            McpStandard.move_capability(out["result"]["capabilities"], key)
        self.record("rewritten", "initialize", source=self.peer.dialect, target=target, why=None)
        return out

    def _acknowledged(self, msg: dict[str, Any]) -> Handled:
        """The server acknowledged a listen stream: one whose filter asked for reminders takes them
        when the host can read them (the standard form; the legacy one never rides a listen stream),
        and the acknowledgement says so."""
        meta = params_meta(msg)
        sub_id = meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None
        key = id_key(sub_id)
        listen = self.state.listens.get(key)
        if listen is None or not listen[1] or key in self.state.honoured or self.host.dialect != "standard":
            return None
        self.state.honoured.append(key)
        self.subscriptions.opened(self.scope, listen[2], listen[0])
        self._watch_peer()
        if get_path(msg, "params", "notifications", REMINDERS_FILTER) is True:
            return None  # the server takes reminders itself and said so
        out = copy.deepcopy(msg)
        notifications = out["params"].get("notifications")
        out["params"]["notifications"] = {**(notifications if isinstance(notifications, dict) else {}),
                                          REMINDERS_FILTER: True}
        return [self.send(HOST, out)]

    def _listen_ended(self, key: Any) -> None:
        """The listen stream ``key`` is over (the host cancelled it, or the server answered it):
        nothing of it stays, in this flow or in the scope's book."""
        listen = self.state.listens.pop(key, None)
        if listen is None:
            return
        self.awaiting.pop(key, None)
        if key in self.state.honoured:
            self.state.honoured.remove(key)
            self.subscriptions.closed(self.scope, listen[2])
        self._watch_peer()
        self._watch_host()

    def subscription(self) -> Any:
        if not self.sessionless or not self.state.listens:
            return None
        return next(iter(self.state.listens.values()))[2]

    def listen_cancel(self) -> bytes | None:
        if not self.sessionless or not self.state.listens:
            return None
        request_id = next(iter(self.state.listens.values()))[0]
        return dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})

    def _ambient(self, msg: dict[str, Any] | None) -> bool:
        """A 2026-07-28 reminder that belongs to no request of the host: one from a listen stream
        (stamped with its subscription, or on a sessionless listen's own exchange), or one the flow
        delivers on its own (``msg`` None: an add-on's)."""
        if not self.modern:
            return False
        if msg is None:
            return True
        meta = params_meta(msg)
        return (isinstance(meta, dict) and SUBSCRIPTION_KEY in meta) or (self.sessionless and bool(self.state.listens))

    def _listen_stream(self) -> tuple[Any, Any] | None:
        """Where an ambient reminder goes: the newest listen stream that took reminders, this flow's
        own (its connection, or its exchange) first, else another request's of its scope, as
        (`Send.stream`: None for its own, subscription id); None: nowhere, fall back."""
        if self.state.honoured:
            return None, self.state.listens[self.state.honoured[-1]][0]
        return self.subscriptions.stream(self.scope) if self.sessionless else None

    def _offer_channel(self, msg: dict[str, Any], adapter: HostAdapter) -> dict[str, Any]:
        """Toward a Claude Code channel host (spec §11): the `claude/channel` capability and the
        paragraph that tells the model what the events are. The reminder capabilities go: this host
        gets channel events instead, whatever the server declared (the outbox may have reminders)."""
        result = adapter.codec.offer(msg["result"], self._channel_name(msg["result"], adapter),
                                     self.settings.channel_instructions, self.settings.channel_also_tool_result)
        CAPABILITIES.withdraw(result["capabilities"])
        self.state.channel_offered = True
        self.record("rewritten", "initialize", source=self.peer.dialect, target=adapter.name, why=None)
        return {**msg, "result": result}

    def _channel_name(self, result: dict[str, Any], adapter: HostAdapter) -> str:
        """The name the host knows the server by, as far as the proxy can tell: the route's, else
        the server's own `serverInfo.name` (2026-07-28: in the result's `_meta`)."""
        if self.route != UNNAMED_ROUTE:
            return self.route
        info = result.get("serverInfo", get_path(result, "_meta", SERVER_INFO_KEY))
        name = info.get("name") if isinstance(info, dict) else None
        return name if adapter.codec.label(name) is not None else self.route

    def _reminder(self, msg: dict[str, Any], codec: type[McpStandard] | type[McpLegacy],
                  slot: tuple[Any, str]) -> Handled:
        method = msg.get("method")
        source = codec.dialect
        if self.state.peer_declared is False and self.settings.require_declaration:
            self.record("dropped", method, source=source, why="server declared no reminder capability "
                        "(require_declaration is on)")
            return []
        try:
            decoded = codec.decode(msg, slot)
        except ReminderError as exc:
            self.record("invalid", method, source=source, why=exc.loggable)
            return []
        if self._unseen(decoded, method, source):
            return []
        target = self.target(self._ambient(msg))
        held = target != source and target not in HOST_CODECS and self._fallback() == "tool_result"
        return self.police(msg, decoded, method, origin=PEER, source=source, target=target,
                           pending=len(self.state.tool_results) + len(self.held) if held else None,
                           then=Step(self._reminder_judged, (msg, codec, decoded)),
                           deliver=Step(self._released, (msg, codec, decoded)))

    def _reminder_judged(self, outcome: tuple[Reminder | None, list[Command]], msg: dict[str, Any],
                         codec: type[McpStandard] | type[McpLegacy], decoded: Reminder) -> Handled:
        reminder, refusal = outcome
        if reminder is None:
            return refusal
        return self._deliver(msg, codec, reminder, reminder is not decoded)

    def _released(self, reminder: Reminder, msg: dict[str, Any], codec: type[McpStandard] | type[McpLegacy],
                  decoded: Reminder) -> Handled:
        """A reminder `coalesce` held, now that its bucket has a token again."""
        return self._deliver(msg, codec, reminder, reminder is not decoded, released=True)

    def _deliver(self, msg: dict[str, Any], codec: type[McpStandard] | type[McpLegacy], reminder: Reminder,
                 changed: bool, released: bool = False) -> Handled:
        """The admitted reminder to the host, in its dialect (``released``: a coalesced one, later)."""
        method = msg.get("method")
        source = codec.dialect
        ambient = self._ambient(msg)
        target = self.target(ambient)
        extra: list[Command] = []
        for addon in self.addons:
            commands, kept = addon.on_reminder(reminder, method, source, target)
            extra += commands
            if kept:
                return extra
        delivered = self._to_host(msg, codec, reminder, changed, released, ambient, target)
        if not extra:
            return delivered
        return (delivered if delivered is not None else [self.forward(HOST)]) + extra

    def _to_host(self, msg: dict[str, Any], codec: type[McpStandard] | type[McpLegacy], reminder: Reminder,
                 changed: bool, released: bool, ambient: bool, target: str) -> Handled:
        method = msg.get("method")
        source = codec.dialect
        if target == source and not changed and not (ambient and self._elsewhere(msg)):
            self.record("passed", method, reminder, source=source, target=target)
            return [self.send(HOST, msg)] if released else None
        if target in HOST_CODECS:
            params_meta = codec.carried_meta(msg, keep_decoration=keeps_legacy(self.stage) and target != source)
            return self._push(reminder, method, source, params_meta, ambient=ambient, target=target)
        return self._fall_back(reminder, method, source)

    def _elsewhere(self, msg: dict[str, Any]) -> bool:
        """An ambient reminder goes on another listen stream than the one it came on: another
        exchange's (told by the proxy's key, never by a subscription id another host may share), or
        on this connection another subscription than the one it is stamped with."""
        stream, sub_id = self._listen_stream() or (None, None)
        if stream is not None:
            return True
        meta = params_meta(msg)
        return isinstance(meta, dict) and SUBSCRIPTION_KEY in meta and id_key(meta[SUBSCRIPTION_KEY]) != id_key(sub_id)

    def _push(self, reminder: Reminder, method: str | None, source: str | None,
              params_meta: dict[str, Any] | None = None, receipts: tuple[Receipt, ...] = (), *,
              ambient: bool = False, target: str | None = None) -> list[Command]:
        """The reminder in the host's own dialect (an ``ambient`` one on the listen stream that takes
        it, stamped with its subscription; ``target``: the host's, when the caller knows it); one sent
        as a channel event is counted `channel` (and, with `channel_also_tool_result`, rides the next
        tool result too)."""
        if target is None:
            target = self.target(ambient)
        channel = _adapter(target) is not None
        self.record("channel" if channel else "rewritten", method, reminder, source=source, target=target)
        message = HOST_CODECS[target].encode(reminder, params_meta)
        stream = None
        if ambient and target == "standard":
            stream, sub_id = self._listen_stream() or (None, None)
            message["params"]["_meta"] = {**message["params"].get("_meta", {}), SUBSCRIPTION_KEY: sub_id}
        out = [self.send(HOST, self.stamp(message), receipts=receipts, stream=stream)]
        if channel and self.settings.channel_also_tool_result:
            self._ride(reminder, method, source)
        return out

    def _ride(self, reminder: Reminder, method: str | None, source: str | None) -> None:
        """Claude Code drops channel events that arrive mid-turn or while it is idle, and its VS Code
        extension ignores them: the reminder also rides the session's next tool result, once."""
        limit = self.settings.trust.max_pending_per_session
        for pushed_out in self.state.rides.add(reminder, limit):
            self.record("dropped", method, pushed_out, source=source, target="none",
                        why=f"sent as a channel event only: {limit} newer reminders wait for the next tool result "
                            f"(max_pending_per_session = {limit})")

    def _unseen(self, reminder: Reminder, method: str | None, source: str | None) -> bool:
        """An `audit_only` reminder toward a channel host: dropped and counted before it costs budget,
        since every channel event reaches the model and audit_only ones never may."""
        adapter = _adapter(self.target())
        if reminder.mode != "audit_only" or adapter is None:
            return False
        self.record("dropped", method, reminder, source=source, target=adapter.name,
                    why="audit_only reminders are never shown to the model")
        return True

    def deliver(self, reminder: Reminder, method: str, source: str,
                      receipt: Receipt | None = None) -> list[Command]:
        """A reminder from elsewhere (an add-on: the outbox) to the host, as if the server had
        pushed it: the policy as for a notification (refused means dropped, or held by `coalesce`),
        then the host's dialect or its fallback.  ``receipt`` rides on the `Send` that carries the
        reminder (a push, or the tool result that takes it), for the transport to report once it is
        written; a reminder decided without a write (refused, dropped) is reported at once."""
        receipts = (receipt,) if receipt is not None else ()
        if self._unseen(reminder, method, source):
            return self._receipts_done(receipts)
        target = self.target(self._ambient(None))
        queued = target not in HOST_CODECS and self._fallback() == "tool_result"
        notification = {"jsonrpc": "2.0", "method": method}
        return self.police(notification, reminder, method, origin=PEER, source=source, target=target, request=False,
                           pending=len(self.state.tool_results) + len(self.held) if queued else None,
                           then=Step(self._delivery_judged, (reminder, method, source, receipts)),
                           deliver=Step(self._push_or_fall_back, (method, source, receipts)))

    def _delivery_judged(self, outcome: tuple[Reminder | None, list[Command]], reminder: Reminder, method: str,
                         source: str, receipts: tuple[Receipt, ...]) -> list[Command]:
        admitted, refusal = outcome
        if admitted is None:  # the policy said why
            coalesced = held_key(reminder) in self.held
            return refusal + ([] if coalesced else self._receipts_done(receipts))  # held: reported once released
        return self._push_or_fall_back(admitted, method, source, receipts)

    def _push_or_fall_back(self, admitted: Reminder, method: str, source: str,
                           receipts: tuple[Receipt, ...]) -> list[Command]:
        ambient = self._ambient(None)
        if self.target(ambient) in HOST_CODECS:
            return self._push(admitted, method, source, receipts=receipts, ambient=ambient)
        return self._fall_back(admitted, method, source, receipts)

    def _fall_back(self, reminder: Reminder, method: str | None, source: str,
                   receipts: tuple[Receipt, ...] = ()) -> list[Command]:
        if self._fallback() == "tool_result" and reminder.mode != "audit_only":
            return self._hold_for_tool_result(reminder, method, source, receipts)
        why = "audit_only reminders are never rendered" if reminder.mode == "audit_only" else \
            "host has no reminder support"
        self.record("dropped", method, reminder, source=source, target="none", why=why)
        return self._receipts_done(receipts)

    def _hold_for_tool_result(self, reminder: Reminder, method: str | None, source: str,
                              receipts: tuple[Receipt, ...]) -> list[Command]:
        """Queued for the next tool result; the policy counted the queue, but its bytes (and a limit a
        reload lowered) may push the oldest out: dropped, their receipts reported at once."""
        queue = self.state.tool_results
        limit = queue.limit = self.settings.trust.max_pending_per_session
        put = queue.append((reminder, receipts), size=model.size_at_most(reminder))
        self.record("queued", method, reminder, source=source, target="none")
        out: list[Command] = []
        for gone, gone_receipts in put.evicted:
            self.record("dropped", method, gone, target="none",
                        why=f"pushed out of the queue for the next tool result (max_pending_per_session = {limit}, "
                            f"at most {queue.max_bytes} bytes)")
            out += self._receipts_done(gone_receipts)
        self._watch_host()
        return out

    def target(self, ambient: bool = False) -> str:
        """The host's dialect, except that a modern host may only get a log message it asked for,
        and an ``ambient`` reminder (2026-07-28) only on a listen stream that takes reminders."""
        target = self.host.dialect
        if ambient and (target == "legacy" or (target == "standard" and self._listen_stream() is None)):
            return "none"
        if target == "legacy" and self.modern and not self.state.opted_in:
            return "none"
        return target

    def _awaits_tool_results(self) -> bool:
        """Tool results to watch: those that may carry reminders (channel events riding them too),
        and the next one while reminders queued for it wait (the rules changed since: a reload)."""
        rides = self.settings.channel_also_tool_result and _adapter(self.host.dialect) is not None
        return rides or self._tool_results_carry_reminders() or bool(self.state.tool_results or self.state.rides)

    def _tool_results_carry_reminders(self) -> bool:
        """A `none` host, or a legacy host on 2026-07-28 (no unrequested log messages), may get
        reminders appended to tool results."""
        if self._fallback() != "tool_result":
            return False
        dialect = self.host.dialect
        return dialect == "none" or (dialect == "legacy" and self.modern)

    def _fallback(self) -> str:
        return self.settings.fallback.mcp_host_none

    def _append_to_tool_result(self, msg: dict[str, Any], *,
                               queued: bool) -> tuple[dict[str, Any] | None, tuple[Receipt, ...]]:
        """Waiting reminders join the tool result as one text block (its structuredContent untouched):
        the fallback's (``queued``), then the channel events that ride it, each id once; the receipts
        of what it now carries ride on it (a channel event's went with the event)."""
        content = get_path(msg, "result", "content")
        if not isinstance(content, list):
            return None, ()
        held: list[tuple[Reminder, tuple[Receipt, ...]]] = []
        if queued:
            held = self._take_tool_results()
        ids = {r.id for r, _ in held}
        rides = [r for r in self.state.rides.take(self.settings.trust.max_pending_per_session) if r.id not in ids]
        out = copy.deepcopy(msg)
        out["result"]["content"].append({"type": "text", "text": render([r for r, _ in held] + rides,
                                                                          self.settings.envelope)})
        for reminder, _ in held:
            self.record("rendered", "tools/call", reminder, target="none")
        for reminder in rides:
            self.record("attached", "tools/call", reminder, target="none")
        self._watch_host()
        return out, tuple(r for _, receipts in held for r in receipts)

    def _lift_tool_results(self) -> list[Command]:
        """Reminders queued for this tool result when the host has a dialect of its own now: pushed
        in it after the result, which goes on untouched (nothing is delivered twice)."""
        queued = self._take_tool_results()
        out: list[Command] = []
        for reminder, receipts in queued:
            if self._unseen(reminder, "tools/call", None):
                out += self._receipts_done(receipts)
            else:
                out += self._push(reminder, "tools/call", None, receipts=receipts)
        self._watch_host()
        return out

    def pending_counts(self) -> dict[str, int]:
        return {"coalesce": len(self.held), "tool_result": len(self.state.tool_results), "ride": len(self.state.rides)}

    def _take_tool_results(self) -> list[tuple[Reminder, tuple[Receipt, ...]]]:
        """The reminders waiting for a tool result, out of their queue (which the scope's flows may share)."""
        return self.state.tool_results.take()

    def close(self, why: str) -> None:
        super().close(why)
        for key in self.state.honoured:
            self.subscriptions.closed(self.scope, self.state.listens[key][2])
        self.state.honoured.clear()
        if not self.shares_held:  # a scope's held reminders wait for its next request
            for reminder, _ in self.state.tool_results.take():
                self.record("dropped", "tools/call", reminder, target="none", why=why)
        self.state.rides = ToolResultRides()  # sent as channel events already: nothing is lost here


def _adapter(dialect: str | None) -> HostAdapter | None:
    """The host adapter (spec §11: a push path of the host's own, a channel) a dialect names, from the registry."""
    return adapter_of(dialect, "mcp")


def _is_handshake_result(msg: dict[str, Any]) -> bool:
    """An `initialize` / `server/discover` result, recognised even when its request went unseen."""
    result = msg.get("result")
    return (isinstance(result, dict) and isinstance(result.get("capabilities"), dict)
            and ("serverInfo" in result or "supportedVersions" in result))
