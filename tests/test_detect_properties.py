"""Properties of the detectors: a live guard fed one event at a time sees exactly what the (vectorised) batch scan
stores, the scan never looks ahead, and the fast helpers equal the reference definitions they replace.

The two sides are independent implementations: ``Guard`` runs the streaming Python core call by call, the scan runs
polars expressions over a whole group of sessions (``detect.vector.calls``, ``detect.vector.text``)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import duckdb
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.detect.keys import (
    action_json,
    args_text,
    args_token_set,
    call_key,
    canonical_json,
    estimate_tokens,
    estimate_tokens_sql,
    fast_token_set,
    result_key,
    token_set,
)
from analyzer.detect.rules import CHUNK
from analyzer.detect.stream.calls import Config
from analyzer.detect.stream.live import Detector, Thresholds
from analyzer.detect.stream.text import chunk_repeats
from analyzer.detect.vector.calls import call_signals
from analyzer.detect.vector.text import text_signals

TOOLS = ["bash", "read", "edit"]
ARGS = [
    {"command": "make test"},
    {"command": "make test", "description": "Run the tests"},  # commentary: the same action
    {"command": "make  test ", "description": "Run them again", "timeout": 60},
    {"command": "make test --verbose"},
    {"path": "a.py"},
    {"path": "b.py", "n": 2},
    {"command": "sleep 10 && curl -s http://ci/status"},
    {"command": "sleep 120 && curl -s http://ci/status"},
    {"command": "sleep 300 && curl -s http://ci/status"},
    {},
]
RESULTS = [
    ("ok", False),
    ("ok", False),
    ("pending", False),
    ("error: no rule", True),
    ("error: no rule", True),
    (None, None),
]
TEXTS = [
    "",
    "Let me check the build again:",
    "Let me check the build once more:",
    "Done.",
    "Read the region:",
    "Read  the   region:",
    "one two three four five",
    "three four five six seven",
    "one two three four five six seven",
    "I will run it. I will run it again now. I will run it again now.",
]

call_st = st.tuples(
    st.sampled_from(TOOLS),
    st.sampled_from(ARGS),
    st.sampled_from(RESULTS),
    st.sampled_from([None, None, None, "s1", "s2"]),
)
event_st = st.one_of(
    call_st.map(lambda c: ("call", c)),
    st.tuples(st.lists(call_st, min_size=2, max_size=4), st.integers(2, 4)).map(lambda b: ("cycle", b)),
    st.tuples(call_st, st.integers(2, 6)).map(lambda b: ("cycle", ([b[0]], b[1]))),  # streaks
    st.just(("user", None)),
    st.sampled_from(TEXTS).map(lambda t: ("text", t)),
)
config_st = st.builds(
    Config,
    reset_on_user=st.booleans(),
    similarity=st.sampled_from([0.55, 0.55, 0.3, 0.9]),
    script_memory=st.sampled_from([100, 100, 1, 2]),
    exempt_tools=st.sampled_from([frozenset(), frozenset(), frozenset({"read"})]),
)


def flatten(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for kind, payload in events:
        if kind == "cycle":
            block, reps = payload
            out.extend(("call", c) for c in block * reps)
        else:
            out.append((kind, payload))
    return out


def live(events: list[tuple[str, Any]], config: Config) -> tuple[list[tuple], list[tuple]]:
    g = Detector(Thresholds(), config)
    calls, texts = [], []
    for kind, payload in events:
        if kind == "user":
            g.observe_user()
        elif kind == "text":
            o = g.observe_text(payload)
            if o is not None:
                texts.append(tuple(o.signals))
        else:
            tool, args, (text, err), parent = payload
            g.observe_call(tool, args, parent)
            calls.append(tuple(g.observe_result(text, err).signals))  # type: ignore[union-attr]
    return calls, texts


CALL_SCHEMA = {
    "session_id": pl.String,
    "user_turn": pl.Int32,
    "tool": pl.String,
    "k": pl.UInt64,
    "args": pl.String,
    "action_args": pl.String,
    "result_key": pl.UInt64,
    "is_error": pl.Boolean,
    "parent_call_id": pl.String,
}
TEXT_SCHEMA = {"session_id": pl.String, "user_turn": pl.Int32, "text": pl.String}


def frames(sessions: list[list[tuple[str, Any]]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What the scan reads: one frame of calls and one of assistant messages for a group of sessions, keys as the
    64-bit numbers the store's hex keys spell."""
    calls: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for sid, events in enumerate(sessions):
        ut = 0
        for kind, payload in events:
            if kind == "user":
                ut += 1
            elif kind == "text":
                texts.append({"session_id": f"s{sid}", "user_turn": ut, "text": payload})
            else:
                tool, args, (text, err), parent = payload
                canon = canonical_json(args)
                act = action_json(tool, args, canon)  # as ingest stores them: calls.action_key, action_args
                res = result_key(text, err)
                calls.append(
                    {
                        "session_id": f"s{sid}",
                        "user_turn": ut,
                        "tool": tool,
                        "k": int(call_key(tool, act), 16),
                        "args": canon,
                        "action_args": None if act == canon else act,
                        "result_key": int(res, 16) if res else None,
                        "is_error": err,
                        "parent_call_id": parent,
                    }
                )
    return pl.DataFrame(calls, schema=CALL_SCHEMA), pl.DataFrame(texts, schema=TEXT_SCHEMA)


def batch(sessions: list[list[tuple[str, Any]]], config: Config) -> tuple[list[tuple], list[tuple]]:
    """What the scan computes, for every session of the group at once."""
    calls, texts = frames(sessions)
    sig = [tuple(r) for r in call_signals(calls, config).signals.rows()] if calls.height else []
    tsig = text_signals(texts, config.similarity, config.reset_on_user).signals.drop("row", "n_words")
    return sig, [tuple(r) for r in tsig.rows()]


@settings(max_examples=250, deadline=None)
@given(st.lists(st.lists(event_st, max_size=40), min_size=1, max_size=3), config_st)
def test_live_guard_equals_batch_scan(sessions: list[list[tuple[str, Any]]], config: Config) -> None:
    flat = [flatten(events) for events in sessions]
    expected_calls: list[tuple] = []
    expected_texts: list[tuple] = []
    for events in flat:
        calls, texts = live(events, config)
        expected_calls += calls
        expected_texts += texts
    assert batch(flat, config) == (expected_calls, expected_texts)


@settings(max_examples=80, deadline=None)
@given(st.lists(event_st, max_size=30), st.data())
def test_signals_never_depend_on_later_calls(events: list[tuple[str, Any]], data: st.DataObject) -> None:
    flat = flatten(events)
    cut = data.draw(st.integers(0, len(flat)))
    whole_calls, whole_texts = batch([flat], Config())
    head_calls, head_texts = batch([flat[:cut]], Config())
    assert whole_calls[: len(head_calls)] == head_calls
    assert whole_texts[: len(head_texts)] == head_texts


words = st.text(alphabet=st.sampled_from("abcXYZ019_-.:/ \t\n\u00a0\u2003é"), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300)
@given(words)
def test_fast_token_set_equals_token_set(text: str) -> None:
    assert fast_token_set(text) == token_set(text)


@settings(max_examples=300)
@given(json_values)
def test_args_token_set_equals_the_reference(args: Any) -> None:
    assert args_token_set(canonical_json(args)) == token_set(args_text(args))


def _call_words_reference(text: str) -> tuple[set[str], set[str]]:
    """pi's near-identical call words as its docstring defines them, with no memo."""
    words, objects = set(), set()
    for raw in text.lower().split():
        w = raw.strip("\"'`()[]{}<>,;:!?|&")
        if re.fullmatch(r"[a-z0-9_-]{3,}", w):
            words.add(w)
        elif re.match(r"(?=.*[a-z])(?=.*[^a-z0-9_-])", w):
            words.add(w)
            objects.add(w)
    return words, objects


@settings(max_examples=300)
@given(st.lists(words, min_size=1, max_size=6))
def test_call_words_equal_the_reference_whatever_its_memo_holds(texts: list[str]) -> None:
    from analyzer.guards.engines import pi as pi_engine

    cap, chars = pi_engine._WORD_KINDS_MAX, pi_engine._WORD_KINDS_CHARS
    # a memo that keeps everything, one that starts again every two words, one that keeps only words of 3 characters
    for limit, longest in ((cap, chars), (2, chars), (cap, 3)):
        pi_engine._WORD_KINDS_MAX, pi_engine._WORD_KINDS_CHARS = limit, longest
        try:
            for text in texts + texts:  # each text cold, then from the memo
                assert pi_engine.call_words(text) == _call_words_reference(text)
        finally:
            pi_engine._WORD_KINDS_MAX, pi_engine._WORD_KINDS_CHARS = cap, chars


def test_estimate_tokens_sql_equals_estimate_tokens() -> None:
    texts = [None, "", "a", "abcd", "abcde", "é" * 7, "x" * 401]
    con = duckdb.connect()
    got = [con.execute(f"SELECT {estimate_tokens_sql('?::VARCHAR')}", [t]).fetchall()[0][0] for t in texts]
    assert got == [estimate_tokens(t) for t in texts]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab", max_size=400), st.text(alphabet="abcdefgh ", max_size=200))
def test_chunk_repeats_is_exact(periodic: str, noise: str) -> None:
    for text in (periodic, noise + periodic * 3, noise):
        n = len(text) - CHUNK + 1
        expected = max(Counter(text[i : i + CHUNK] for i in range(n)).values()) if n > 0 else 0
        assert chunk_repeats(text) == expected
