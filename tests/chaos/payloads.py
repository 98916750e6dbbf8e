"""Message bodies a careless sender sends, and the canonical form used to compare them.

The relay stores a payload as JSONB and re-encodes it, so the bytes a receiver gets differ
from the bytes sent (whitespace, key order, `1e-7` written `0.0000001`). What must not differ
is the JSON *value*: `canonical()` writes a value with sorted keys, no whitespace and every
number as its exact decimal value (`1.0`, `1` and `1e0` are one number; `0.1` and
`0.1000000000000000055` are two), and `digest()` hashes that form. A sent body and a received
body are "the same payload" exactly when their digests are equal.

`body_for(n, run, rng)` builds message `n`: every body carries `id` (the idempotency key) and
`n` (the ledger number), then the extras of one *style*, chosen from the seeded `rng` so a run
replays. The styles are the inputs that were silently lost or are easy to get wrong:
pretty-printed (CRLF, tabs), unicode keys and escapes, big and awkward numbers, deep nesting,
and a chunked transfer encoding (HTTP only; see `Body.chunks`).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from decimal import Decimal

# Numbers a JSON parser must keep exactly. Every one is representable without loss as an
# i64, a u64 or the nearest f64 of its decimal text, which is what the relay promises today.
EXACT_NUMBERS = {
    "u64max": "18446744073709551615",
    "i64min": "-9223372036854775808",
    "p53plus1": "9007199254740993",
    "tenth": "0.1",
    "tiny": "1e-7",
    "huge": "1.5E+300",
    "one_point_zero": "1.0",
    "neg_zero": "-0",
    "neg_exp": "-2.5e-5",
}

# Valid JSON numbers that are acknowledged with 202 and today stored and delivered as a
# different number (open bug, reproduced by tests/chaos/repro/number_payload.py): an integer
# beyond u64, a decimal with more digits than an f64 keeps, and an ordinary 17-digit double
# (what JSON.stringify or Python's repr writes) that the relay's float parser rounds one ULP
# off. Only sent when QB_CHAOS_KNOWN_BUGS=1, so the ledger shows the bug without failing CI.
KNOWN_BUG_NUMBERS = {
    "beyond_u64": "123456789012345678901234567890",
    "pi_30": "3.141592653589793238462643383279",
    "double_17": "0.9784987278375255",
}

STYLES = ("compact", "pretty", "unicode", "numbers", "nested", "chunked")


@dataclass
class Body:
    """One message as sent: its bytes, how it was written, and the digest of its value."""

    n: int
    key: str
    style: str
    raw: bytes
    digest: str
    # HTTP only: when set, the body is sent with Transfer-Encoding: chunked in these pieces
    # (split at arbitrary byte offsets, so a piece may end inside a UTF-8 character).
    chunks: list[bytes] | None = None


def parse(raw: bytes | str):
    """Parses JSON keeping every number exact (as Decimal), refusing NaN and Infinity."""

    def no_constants(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(raw, parse_float=Decimal, parse_int=Decimal, parse_constant=no_constants)


def _number(d: Decimal) -> str:
    if d.is_zero():
        return "0"  # PostgreSQL's numeric has no negative zero; -0 and 0 are one value
    # Strip trailing zeros by hand: Decimal.normalize() would round to the context's 28 digits.
    sign, digits, exp = d.as_tuple()
    text = "".join(map(str, digits))
    stripped = text.rstrip("0")
    exp += len(text) - len(stripped)
    return ("-" if sign else "") + stripped + (f"e{exp}" if exp else "")


def canonical(value, doubles: bool = False) -> str:
    """The canonical text of a parsed JSON value: sorted keys, exact numbers, no spaces.
    `doubles`: every number as the nearest IEEE-754 double instead — how a JavaScript reader
    (JSON.parse) sees it, used for the TypeScript worker's deliveries."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(value[k], doubles) for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical(v, doubles) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, Decimal):
        return _number(Decimal(repr(float(value)))) if doubles else _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"not a JSON value: {value!r}")


def digest(raw: bytes | str, doubles: bool = False) -> str:
    """SHA-256 of the canonical form of a JSON text (raises ValueError if it is not JSON)."""
    return hashlib.sha256(canonical(parse(raw), doubles).encode("utf-8")).hexdigest()


def _numbers_text(known_bugs: bool) -> str:
    nums = dict(EXACT_NUMBERS)
    if known_bugs:
        nums.update(KNOWN_BUG_NUMBERS)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in nums.items()) + "}"


def body_for(n: int, run: str, rng: random.Random, *, http: bool = True, known_bugs: bool = False) -> Body:
    """Message `n` of run `run`, in a style drawn from `rng` (chunked only when `http`)."""
    key = f"chaos-{run}-{n}"
    styles = STYLES if http else STYLES[:-1]
    style = styles[rng.randrange(len(styles))]
    base = {"id": key, "n": n, "run": run}
    chunks = None
    if style == "compact":
        raw = json.dumps({**base, "amount": rng.randint(1, 10**6)}, separators=(",", ":")).encode()
    elif style == "pretty":
        text = json.dumps({**base, "customer": {"name": "Ada", "tags": ["a", "b"]}, "ok": True, "none": None}, indent=2)
        raw = text.replace("\n", "\r\n").replace("  ", "\t").encode()
    elif style == "unicode":
        # Literal non-ASCII keys and values next to their \u escapes (one value, two spellings).
        raw = (
            '{"id": "%s", "n": %d, "run": "%s", "ключ": "значение", "名前": "テスト", '
            '"emoji 🚀": "\\ud83d\\ude80", "caf\\u00e9": "café", "e\\u0301": "quote \\" and \\\\ backslash", '
            '"tab\\tkey": "line\\nbreak", "\\u2028": "sep"}' % (key, n, run)
        ).encode("utf-8")
    elif style == "numbers":
        raw = ('{"id": "%s", "n": %d, "run": "%s", "numbers": %s, "list": [0, -1, 1e2, 2E-2, 100000000000000000000.0]}' % (key, n, run, _numbers_text(known_bugs))).encode()
    elif style == "nested":
        deep: object = {"leaf": n}
        for i in range(rng.randint(5, 40)):
            deep = {"level": i, "child": deep, "arr": [deep] if i % 7 == 0 else []}
        raw = json.dumps({**base, "deep": deep, "empty": {}, "blank": "", "space key": " "}).encode()
    else:  # chunked: a pretty body sent in random pieces
        text = json.dumps({**base, "items": [{"sku": f"s{i}", "qty": i} for i in range(rng.randint(1, 30))], "note": "naïve – ünïcödé"}, indent=1, ensure_ascii=False)
        raw = text.encode("utf-8")
        cuts = sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, rng.randint(1, 12))))
        chunks = [raw[a:b] for a, b in zip([0] + cuts, cuts + [len(raw)])]
    return Body(n=n, key=key, style=style, raw=raw, digest=digest(raw), chunks=chunks)
