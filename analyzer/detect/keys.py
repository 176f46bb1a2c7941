"""Keys that make two calls "the same": canonical JSON, hashes, and the shared-token score.

Every guard compares calls by some key. Ours is the canonical one (object keys sorted at every depth, arrays in order);
some guards use insertion-order ``JSON.stringify`` (Gemini CLI, OpenCode, gitagent) or sort only the top level
(Roo Code), so the store keeps a hash of each variant and a replay uses the key its guard really used.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import xxhash

from analyzer.detect.semantics import (
    NOISE_FIELD_RE,
    NOISE_LINE_RE,
    NOISE_MARKERS,
    action_args,
    is_refusal,
    is_text_not_found,
)

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
    """XXH3-64 of the UTF-8 text as 16 hex digits: 64 bits, plenty to tell calls apart, and ~20x cheaper than the MD5
    it replaced (hashing full result texts was a third of loading them). The ingest workers and a live ``Guard`` call
    this one function, so the store's keys are the Guard's keys."""
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8", "surrogatepass"))


def call_key(tool: str, args_json: str) -> str:
    """Tool name + argument JSON, hashed. Pass canonical JSON for our key, ordered JSON for JSON.stringify keys."""
    return digest(f"{tool}\x00{args_json}")


def action_json(tool: str, args: Any, canon: str | None = None) -> str:
    """Canonical JSON of the call's action arguments (``semantics.action_args``: commentary and tuning dropped, a shell
    command reduced to what it runs); ``canon``, the canonical JSON of ``args`` when the caller has it, is returned as
    it is when nothing was dropped."""
    act = action_args(tool, args)
    if act is args:
        return canon if canon is not None else canonical_json(args)
    return canonical_json(act)


def action_key(tool: str, args: Any) -> str:
    """Hash of tool + action arguments (``calls.action_key``): equal for calls that differ only in commentary or
    tuning (docs/detectors.md, "The semantics of tool arguments"). Ingest, the scan's signals, the judgement and the
    ``loopscope`` guard compare calls by it; ``call_key`` stays the full canonical key."""
    return call_key(tool, action_json(tool, args))


# Envelope lines some agents put around a command's output that change on every run even when the output does not
# (Codex unified exec, Gemini CLI's shell): declared in ``semantics.RESULT_NOISE``. Left in, they would make a stuck
# poll look like progress.
VOLATILE_LINE_RE = NOISE_LINE_RE
_VOLATILE_LINE = re.compile(VOLATILE_LINE_RE + "|" + NOISE_FIELD_RE)
_VOLATILE_MARKERS = NOISE_MARKERS
MARKER_PREFIX = 400  # envelope lines sit at the top (Codex) or the bottom (Gemini CLI) of an output; no further


def normalize_result(text: str) -> str:
    """Drop volatile envelope lines. Whitespace is kept as is: the same command prints the same whitespace, and
    collapsing or trimming it was the most expensive step of the whole ingest."""
    if any(m in text[:MARKER_PREFIX] for m in _VOLATILE_MARKERS) or (
        len(text) > MARKER_PREFIX and any(m in text[-MARKER_PREFIX:] for m in _VOLATILE_MARKERS)
    ):
        return _VOLATILE_LINE.sub("", text)
    return text


def result_key(text: str | None, is_error: bool | None) -> str | None:
    """Hash of the error flag and the normalised result text; ``None`` for a call that never got a result. Every
    permission refusal has one key, ``REFUSED``, whatever its words (``semantics.is_refusal``): "Permission to use
    Edit has been denied" and "sed command requires approval" are the same wall. So has every edit refused because
    the text it sent is not in the file, ``NOT_FOUND`` (``semantics.is_text_not_found``): the refusal quotes the text
    sent, so two of them differ exactly when the edits' old texts do, and a retry whose old text barely changed
    would otherwise never meet its first try. Calls with one action key lose nothing by it: their old texts, hence
    their refusals, are the same."""
    if text is None and is_error is None:
        return None
    if is_error and is_refusal(text):
        return REFUSED
    if is_error and is_text_not_found(text):
        return NOT_FOUND
    return digest(f"{'E' if is_error else 'R'}\x00{normalize_result(text or '')}")


REFUSED = digest("E\x00\x00permission refused")  # the result key of every permission refusal
REFUSED_NUMBER = int(REFUSED, 16)  # ``REFUSED`` as the scan reads result keys: the number its hex digits spell
NOT_FOUND = digest("E\x00\x00text not found")  # the result key of every edit refused for a text not in the file


_WORD = re.compile(r"[a-z0-9_-]{3,}")


def token_set(text: str) -> frozenset[str]:
    """The shared-token words (docs/detectors.md#the-shared-token-score): lower-case, split on whitespace, keep
    words of 3+ characters made only of ``[a-z0-9_-]`` (a word carrying punctuation is dropped, not stripped)."""
    return frozenset(w for w in text.lower().split() if _WORD.fullmatch(w))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|A∩B| / |A∪B|, and 0 when either set is empty."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def estimate_tokens(text: str | None) -> int:
    """~4 characters per token: ``ceil(len/4)``, at least 1 for non-empty text, 0 for empty."""
    return tokens_of_length(len(text)) if text else 0


def tokens_of_length(chars: int | None) -> int:
    """``estimate_tokens`` of a text ``chars`` characters long (a stored length such as ``calls.result_chars``)."""
    return ((chars or 0) + 3) // 4


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


# -- additions for the detector core (the functions above are shared with ingest and keep their behaviour) ----------

_WHOLE_WORD = re.compile(r"(?<!\S)[a-z0-9_-]{3,}(?!\S)")


def fast_token_set(text: str) -> frozenset[str]:
    """``token_set`` in one regex pass: a whitespace-delimited word is kept exactly when it is made only of
    ``[a-z0-9_-]`` and has 3+ characters, so this equals ``token_set`` (a hypothesis test pins it) at a fraction of
    the cost; the scan computes it for most calls."""
    return frozenset(_WHOLE_WORD.findall(text.lower()))


def args_token_set(args_json: str) -> frozenset[str]:
    """The shared-token words of a call's canonical argument JSON: ``token_set(args_text(args))``."""
    return fast_token_set(args_json_text(args_json))


def args_json_text(args_json: str) -> str:
    """``args_text`` of a call's argument JSON, or the JSON as it is when it does not parse (a payload truncated at
    load time)."""
    try:
        obj = orjson.loads(args_json)
    except orjson.JSONDecodeError:
        return args_json
    text = _flat_args_text(obj) if type(obj) is dict else None
    return args_text(obj) if text is None else text


def _flat_args_text(obj: dict[str, Any]) -> str | None:
    """``args_text`` for the common shapes (values that are scalars or lists of strings) without its recursive walk;
    None for anything deeper."""
    parts: list[str] = []
    for k in sorted(obj):
        v = obj[k]
        t = type(v)
        if t is str:
            parts.append(v)
        elif t is int or t is float:
            parts.append(str(v))
        elif t is bool:
            parts.append("true" if v else "false")
        elif v is None:
            continue
        elif t is list and all(type(x) is str for x in v):
            parts.extend(v)
        else:
            return None
    return " ".join(parts)


def estimate_tokens_sql(expr: str) -> str:
    """SQL for ``estimate_tokens`` of a VARCHAR expression (NULL and '' give 0), so DuckDB can size texts without
    shipping them to Python."""
    return tokens_of_length_sql(f"length({expr})")


def tokens_of_length_sql(chars: str) -> str:
    """SQL for ``estimate_tokens`` of a text ``chars`` characters long (NULL gives 0): what a stored length
    (``calls.result_chars``) estimates without reading the text. ``(len + 3) // 4`` is ``ceil(len / 4)``, which is at
    least 1 for non-empty text."""
    return f"((coalesce({chars}, 0) + 3) // 4)"


def args_words(args_json: str | None) -> list[str]:
    """The distinct shared-token words of a call's canonical argument JSON, sorted: ``args_token_set`` as a list,
    the form the store can keep per call (``calls.args_words``) so the scan never tokenises arguments."""
    return sorted(args_token_set(args_json)) if args_json else []
