"""Would a faster JSON library pay, and would it keep spec §8? `python -m bench.json_codecs`
(needs the test extra for the fuzz corpus, and orjson / msgspec to compare; each missing one is
reported, not required).

For every frame of three corpora (the conversion vectors in tests/vectors, the frames the
rewrite bench feeds the pipeline, and a fuzz corpus drawn from tests/fault/test_fuzz.py's
strategies) and a set of edge cases spec §8 cares about (integers beyond 64 bits, lone
surrogates, key order, duplicate keys, number spellings), each codec decodes the frame and
encodes the result as the proxy writes JSON (compact, UTF-8, non-ASCII as is); "decode" rows use
the library to decode only and the stdlib to encode. It reports CPU per frame, and fidelity against
the stdlib: frames it refused (raised) and frames it wrote
differently (a silent difference is what a fallback on exceptions cannot catch).
"""
from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Codec = tuple[Callable[[bytes], Any], Callable[[Any], bytes]]

EDGES = [
    b'{"jsonrpc":"2.0","id":1,"result":{"n":18446744073709551617}}',  # 2**64 + 1
    b'{"jsonrpc":"2.0","id":1,"result":{"n":-1180591620717411303424}}',  # -2**70
    b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}',
    b'{"jsonrpc":"2.0","method":"x","params":{"s":"\\ud800 lone high"}}',
    b'{"jsonrpc":"2.0","method":"x","params":{"s":"lone low \\udc00"}}',
    b'{"jsonrpc":"2.0","method":"x","params":{"z":1,"a":2,"m":{"y":1,"b":2}}}',
    b'{"jsonrpc":"2.0","method":"x","params":{"k":1,"k":2}}',
    b'{"jsonrpc":"2.0","method":"x","params":{"f":1.0,"g":1e16,"h":1E2,"i":-0,"j":0.1,"k":5e-324}}',
    b'{"jsonrpc":"2.0","method":"x","params":{"big":1e400}}',
    b'{"jsonrpc":"2.0","method":"x","params":{"nan":NaN}}',
    '{"jsonrpc":"2.0","method":"x","params":{"t":"\u2028 \u00e9 \U0001f600 \x7f"}}'.encode(),
    b'{"jsonrpc":"2.0","method":"x","params":{"c":"\\u0001\\u001f\\"\\\\/"}}',
]


def codecs() -> dict[str, Codec | str]:
    out: dict[str, Codec | str] = {
        "stdlib json": (json.loads, lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode())}
    stdlib_dumps = out["stdlib json"][1]  # type: ignore[index]
    if importlib.util.find_spec("orjson"):
        import orjson

        out["orjson"] = (orjson.loads, orjson.dumps)
        out["orjson decode"] = (orjson.loads, stdlib_dumps)
    else:
        out["orjson"] = "not installed"
    if importlib.util.find_spec("msgspec"):
        import msgspec

        out["msgspec"] = (msgspec.json.decode, msgspec.json.encode)
        out["msgspec decode"] = (msgspec.json.decode, stdlib_dumps)
    else:
        out["msgspec"] = "not installed"
    return out


def vectors() -> list[bytes]:
    root = Path(__file__).resolve().parents[1] / "tests" / "vectors"
    frames = []
    for path in sorted(root.glob("*.json")):
        case = json.loads(path.read_text())
        frames += [json.dumps(case[key], ensure_ascii=False).encode() for key in ("input", "output")
                   if isinstance(case.get(key), dict)]
    return frames


def rewrite_frames() -> list[bytes]:
    from bench.rewrite import a2a_frames, acp_frames, mcp_frames

    return mcp_frames(500) + acp_frames(500) + a2a_frames(500)


def fuzz_frames(count: int) -> list[bytes]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.fault.test_fuzz import STYLES, reminder_dicts, serialize, shapes

    frames: list[bytes] = []

    @settings(max_examples=count // 20, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(reminder_dicts(), STYLES)
    def draw(reminder: dict, style: Any) -> None:
        for messages in shapes(reminder, {"reminders": {}}, "s1", "t1").values():
            frames.extend(serialize(msg, style) for _, msg in messages)

    draw()
    return frames


def measure(name: str, codec: Codec, frames: list[bytes], reference: Codec) -> dict:
    loads, dumps = codec
    refused = differ = 0
    examples: list[str] = []
    for frame in frames:
        try:
            want = reference[1](reference[0](frame))
        except (ValueError, UnicodeError):
            want = None
        try:
            got = dumps(loads(frame))
        except Exception as exc:  # noqa: BLE001 - any refusal counts
            refused += want is not None
            if want is not None and len(examples) < 3:
                examples.append(f"refused {frame[:70]!r}: {type(exc).__name__}")
            continue
        if got != want:
            differ += 1
            if len(examples) < 3:
                at = next((i for i, (a, b) in enumerate(zip(got, want or b"")) if a != b), min(len(got), len(want or b"")))
                examples.append(f"wrote …{got[max(0, at - 20):at + 30]!r}, stdlib …{(want or b'')[max(0, at - 20):at + 30]!r}")
    ok = [f for f in frames if _ok(codec, f)]
    rounds = []
    for _ in range(5):
        started = time.process_time()
        for frame in ok:
            dumps(loads(frame))
        rounds.append((time.process_time() - started) / max(len(ok), 1) * 1e6)
    return {"codec": name, "us_per_frame": statistics.median(rounds), "refused": refused, "differ": differ,
            "frames": len(frames), "examples": examples}


def _ok(codec: Codec, frame: bytes) -> bool:
    try:
        codec[1](codec[0](frame))
        return True
    except Exception:  # noqa: BLE001
        return False


def main() -> int:
    corpora = {"edge cases": EDGES, "conversion vectors": vectors(), "rewrite bench frames": rewrite_frames()}
    try:
        corpora["fuzz corpus"] = fuzz_frames(4000)
    except ImportError as exc:
        print(f"fuzz corpus: skipped ({exc}; pip install -e '.[test]')")
    found = codecs()
    reference = found["stdlib json"]
    assert not isinstance(reference, str)
    for corpus, frames in corpora.items():
        print(f"\n{corpus}: {len(frames)} frames")
        for name, codec in found.items():
            if isinstance(codec, str):
                print(f"  {name}: {codec}")
                continue
            r = measure(name, codec, frames, reference)
            print(f"  {name:15} {r['us_per_frame']:6.2f} µs/frame (decode+encode)  refused {r['refused']}, "
                  f"wrote differently {r['differ']} of {r['frames']}")
            for example in r["examples"]:
                print(f"      {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
