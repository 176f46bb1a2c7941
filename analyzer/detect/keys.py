"""Keys that make two calls "the same": canonical JSON, hashes, and the shared-token score.

Every guard compares calls by some key. Ours is the canonical one (object keys sorted at every depth, arrays in order);
some guards use insertion-order ``JSON.stringify`` (Gemini CLI, OpenCode, gitagent) or sort only the top level
(Roo Code), so the store keeps a hash of each variant and a replay uses the key its guard really used.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson

_SORT = orjson.OPT_SORT_KEYS
_NON_STR_KEYS = orjson.OPT_NON_STR_KEYS


def _dumps(obj: Any, sort: bool) -> str:
    try:
        return orjson.dumps(obj, option=(_SORT | _NON_STR_KEYS) if sort else _NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        # Integers beyond 64 bits and other oddities orjson refuses; the stdlib handles them.
        return json.dumps(obj, sort_keys=sort, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(obj: Any) -> str:
    """Object keys sorted at every depth, arrays in order, no insignificant whitespace."""
    return _dumps(obj, sort=True)


def ordered_json(obj: Any) -> str:
    """Insertion-order JSON, like JavaScript's ``JSON.stringify``."""
    return _dumps(obj, sort=False)


def shallow_sorted_json(obj: Any) -> str:
    """Top-level keys sorted, nested objects in insertion order (Roo Code's key)."""
    if isinstance(obj, dict):
        return _dumps({k: obj[k] for k in sorted(obj, key=str)}, sort=False)
    return _dumps(obj, sort=False)


def digest(text: str) -> str:
    """A 64-bit hex digest: short enough to store per call, wide enough that collisions never matter here."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def call_key(tool: str, args_json: str) -> str:
    """Tool name + argument JSON, hashed. Pass canonical JSON for our key, ordered JSON for JSON.stringify keys."""
    return digest(f"{tool}\x00{args_json}")


# Envelope lines some agents put around a command's output that change on every run even when the output does not
# (Codex unified exec). Left in, they would make a stuck poll look like progress.
_VOLATILE_LINE = re.compile(
    r"^(?:Chunk ID|Wall time|Process running with session ID|Original token count|Total output lines)\b.*$",
    re.MULTILINE,
)
_WS = re.compile(r"\s+")


def normalize_result(text: str) -> str:
    """Drop volatile envelope lines and collapse whitespace runs."""
    return _WS.sub(" ", _VOLATILE_LINE.sub("", text)).strip()


def result_key(text: str | None, is_error: bool | None) -> str | None:
    """Hash of the normalised result text and the error flag; ``None`` for a call that never got a result."""
    if text is None and is_error is None:
        return None
    return digest(f"{'E' if is_error else 'R'}\x00{normalize_result(text or '')}")


_WORD = re.compile(r"[a-z0-9_-]{3,}")


def token_set(text: str) -> frozenset[str]:
    """The shared-token words of DETECTORS.md 2.3: lower-case, split on whitespace, keep words of 3+ characters made
    only of ``[a-z0-9_-]`` (a word carrying punctuation is dropped, not stripped)."""
    return frozenset(w for w in text.lower().split() if _WORD.fullmatch(w))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|A∩B| / |A∪B|, and 0 when either set is empty."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def estimate_tokens(text: str | None) -> int:
    """~4 characters per token: ``ceil(len/4)``, at least 1 for non-empty text, 0 for empty."""
    if not text:
        return 0
    return max(1, math.ceil(len(text) / 4))


def args_text(obj: Any) -> str:
    """The words a near-identical comparison looks at: every string and number in the arguments, in canonical key
    order, joined by spaces. JSON punctuation would otherwise glue the first and last word of each value to a quote
    and the shared-token rule would drop them."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k in sorted(v, key=str):
                walk(v[k])
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            out.append(v)
        elif v is not None and not isinstance(v, bool):
            out.append(str(v))
        elif isinstance(v, bool):
            out.append("true" if v else "false")

    walk(obj)
    return " ".join(out)
