"""OTLP/HTTP span export with a lean encoder: the protobuf bytes of an `ExportTraceServiceRequest`
written directly, the same bytes the OpenTelemetry exporter's own `encode_spans` serialises.

Why it is hand-written (docs/decisions.md): with spans on, the library's encoder (a protobuf
message object per span, attribute and value, then serialised) was 45% of the proxy's CPU, more
than rewriting the reminder itself. The wire format of a span is small and fixed (OTLP
`trace/v1/trace.proto`); what repeats between spans (the resource, the scope, an attribute
whose key and value recur, such as `bridge.route`) is encoded once and kept. Everything rare or
open-ended is the library's public `encode_spans`: resources and scopes (once each), and whole
any span with events, links, a set status, something dropped or a value other than a plain
str/bool/int64/float, so the two cannot drift on the hard cases. tests/unit/test_otlp.py checks
our bytes against the library's.

Imported only when `telemetry.exporter = "otlp"` (the `[otlp]` extra).
"""
from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanKind
from opentelemetry.trace.status import StatusCode

from bridge.reminder_spans import ReminderSpan

_logger = logging.getLogger(__name__)

#: SDK span kinds as OTLP `Span.SpanKind` numbers (SPAN_KIND_INTERNAL = 1, ...).
_KIND = {SpanKind.INTERNAL: b"\x30\x01", SpanKind.SERVER: b"\x30\x02", SpanKind.CLIENT: b"\x30\x03",
         SpanKind.PRODUCER: b"\x30\x04", SpanKind.CONSUMER: b"\x30\x05"}
#: `Span.flags` (field 16, fixed32): the parent's is-remote bit is known (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE).
_FLAGS_LOCAL, _FLAGS_REMOTE = b"\x85\x01" + struct.pack("<I", 0x100), b"\x85\x01" + struct.pack("<I", 0x300)
_UNSET_STATUS = b"\x7a\x00"  # `status` set and empty: what the library writes for an unset status
_PACK_NANOS = struct.Struct("<Q").pack
#: Encoded attribute key-values kept between spans; cleared when full, so a hostile stream of
#: distinct values costs a bounded table.
_KEPT_PAIRS = 4096
_SCALARS = frozenset({str, bool, int, float})


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: ``tag``, the length, the payload."""
    return tag + _varint(len(payload)) + payload


def _utf8(text: str) -> bytes:
    """Protobuf strings are UTF-8: a lone surrogate (which a hostile id may carry) becomes U+FFFD
    rather than failing the whole batch, as the library's encoder would."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


class SpanEncoder:
    """Spans → `ExportTraceServiceRequest` bytes, grouped by resource then scope in the order first
    seen (as `encode_spans` groups them). One per exporter: its tables belong to it."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, type, Any], bytes] = {}
        self._keys: dict[str, bytes] = {}
        self._names: dict[str, bytes] = {}
        self._outer: dict[int, tuple[Any, bytes]] = {}  # id of a resource or scope → it, its encoded field

    def encode(self, spans: Sequence[ReadableSpan]) -> bytes:
        first = spans[0] if spans else None
        if first is not None and all(s.resource is first.resource and s.instrumentation_scope is
                                     first.instrumentation_scope for s in spans):
            return self._one_group(spans, first.resource, first.instrumentation_scope or None)
        # grouped by identity: the SDK hashes a `Resource` by serialising its attributes to JSON,
        # per span, and every span of one provider shares the one object
        groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
        for span in spans:
            resource, scope = span.resource, span.instrumentation_scope or None
            scopes = groups.setdefault(id(resource), (resource, {}))[1]
            if id(scope) not in scopes:
                scopes[id(scope)] = (scope, [self._outer_field(span, scope, "scope")])
                self._outer_field(span, resource, "resource")
            scopes[id(scope)][1].append(self.span(span))
        out = []
        for resource, scopes in groups.values():
            parts = [self._outer[id(resource)][1]]
            for scope, encoded in scopes.values():
                body = [encoded[0]]
                body.extend(_field(b"\x12", one) for one in encoded[1:])
                parts.append(self._scope_spans(scope, body))
            out.append(self._resource_spans(resource, parts))
        return b"".join(out)

    def _one_group(self, spans: Sequence[ReadableSpan], resource: Any, scope: Any) -> bytes:
        """The usual batch: every span from the one provider and scope (no grouping to do)."""
        body = [self._outer_field(spans[0], scope, "scope")]
        self._outer_field(spans[0], resource, "resource")
        plain, span = self._plain, self.span
        body.extend(_field(b"\x12", plain(one, *one.fields) if type(one) is ReminderSpan else span(one)) for one in spans)
        return self._resource_spans(resource, [self._outer[id(resource)][1], self._scope_spans(scope, body)])

    @staticmethod
    def _scope_spans(scope: Any, body: list[bytes]) -> bytes:
        if scope is not None and scope.schema_url:
            body.append(_field(b"\x1a", _utf8(scope.schema_url)))
        return _field(b"\x12", b"".join(body))

    @staticmethod
    def _resource_spans(resource: Any, parts: list[bytes]) -> bytes:
        if resource.schema_url:
            parts.append(_field(b"\x1a", _utf8(resource.schema_url)))
        return _field(b"\x0a", b"".join(parts))

    def span(self, span: ReadableSpan) -> bytes:
        """One `Span` message (trace.proto field numbers in order, defaults left out)."""
        status = span.status
        if (span.dropped_attributes or span.events or span.links or span.dropped_events or span.dropped_links
                or status.status_code is not StatusCode.UNSET or status.description is not None):
            return self._by_library(span)
        return self._plain(span, span.get_span_context(), span.parent, span.name, span.kind, span.start_time,
                           span.end_time, span.attributes)

    def _plain(self, span: ReadableSpan, context: Any, parent: Any, name: str, kind: SpanKind, start: int | None,
               end: int | None, attributes: Mapping[str, Any]) -> bytes:
        """`span` once it is known to have no events, links, drops or status: what the proxy's own
        spans (`bridge.reminder_spans.ReminderSpan`) are by construction, so they come here direct,
        their fields as `ReminderSpan.fields` holds them (not through the SDK's properties, one call each)."""
        parts = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
        if context.trace_state:
            parts.append(_field(b"\x1a", _utf8(",".join(f"{k}={v}" for k, v in context.trace_state.items()))))
        if parent is not None:
            parts += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
        encoded = self._names.get(name)
        if encoded is None:
            encoded = self._names[name] = _field(b"\x2a", _utf8(name)) if name else b""
        parts += (encoded, _KIND[kind])
        if start:
            parts += (b"\x39", _PACK_NANOS(start))
        if end:
            parts += (b"\x41", _PACK_NANOS(end))
        if attributes:
            pairs = self._pairs
            for key, value in attributes.items():
                kind = type(value)
                if kind not in _SCALARS:
                    return self._by_library(span)
                encoded = pairs.get((key, kind, value)) or self._pair(key, value)
                if encoded is None:
                    return self._by_library(span)
                parts.append(encoded)
        parts += (_UNSET_STATUS, _FLAGS_REMOTE if parent is not None and parent.is_remote else _FLAGS_LOCAL)
        return b"".join(parts)

    @staticmethod
    def _by_library(span: ReadableSpan) -> bytes:
        """A span with events, links, a set status, something dropped or a value other than a
        plain scalar: the library's own encoding of it, whole."""
        return encode_spans([span]).resource_spans[0].scope_spans[0].spans[0].SerializeToString()

    def _pair(self, key: str, value: Any) -> bytes | None:
        """One scalar attribute as a `Span.attributes` field (a `KeyValue`), kept for the next span;
        None for an int outside int64, which is the library's to refuse."""
        keyed = self._keys.get(key)
        if keyed is None:
            if len(self._keys) >= _KEPT_PAIRS:
                self._keys.clear()
            keyed = self._keys[key] = _field(b"\x0a", _utf8(key))
        kind = type(value)
        if kind is str:
            any_value = _field(b"\x0a", _utf8(value))
        elif kind is bool:
            any_value = b"\x10\x01" if value else b"\x10\x00"
        elif kind is int:
            if not -(1 << 63) <= value < (1 << 63):
                return None
            any_value = b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int64: two's complement, 10 bytes if < 0
        else:
            any_value = b"\x21" + struct.pack("<d", value)
        encoded = _field(b"\x4a", keyed + _field(b"\x12", any_value))
        if len(self._pairs) >= _KEPT_PAIRS:
            self._pairs.clear()
        self._pairs[key, kind, value] = encoded
        return encoded

    def _outer_field(self, span: ReadableSpan, outer: Any, part: str) -> bytes:
        """The field of a span's resource or scope (``part``), as the library encodes it, once per object."""
        kept = self._outer.get(id(outer))
        if kept is None or kept[0] is not outer:
            resource_spans = encode_spans([span]).resource_spans[0]
            message = resource_spans.resource if part == "resource" else resource_spans.scope_spans[0].scope
            kept = self._outer[id(outer)] = (outer, _field(b"\x0a", message.SerializeToString()))
        return kept[1]


class LeanOTLPSpanExporter(OTLPSpanExporter):
    """The library's OTLP/HTTP exporter (endpoint, headers, TLS, compression, retries, its own
    metrics, all from the same settings and `OTEL_EXPORTER_OTLP_*` variables), with the batch
    serialised by `SpanEncoder`. The request goes out through the library's client, as its own
    `export` sends it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._encoder = SpanEncoder()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return super().export(spans)  # the library's warning and FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                data = self._encoder.encode(spans)
            except Exception as error:  # noqa: BLE001 - as the library: one bad batch fails, the exporter lives
                _logger.error("Failed to encode span batch: %s", error)
                result.error = error
                return SpanExportResult.FAILURE
            if 0 < self._max_request_size < len(data):
                _logger.warning("Dropping span batch: serialized size %d bytes exceeds max_request_size %d bytes.",
                                len(data), self._max_request_size)
                result.error = ValueError("span batch over max_request_size")
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
