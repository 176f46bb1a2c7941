"""Properties of the core: a live guard fed one event at a time sees exactly what the batch scan stores, the scan
never looks ahead, and the fast helpers equal the reference definitions they replace."""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.detect.core import Config, scan_calls
from analyzer.detect.guard import Guard, Thresholds
from analyzer.detect.keys import (args_text, args_token_set, call_key, canonical_json, estimate_tokens,
                                  estimate_tokens_sql, fast_token_set, result_key, token_set)
from analyzer.detect.text import CHUNK, chunk_repeats, scan_texts

TOOLS = ["bash", "read", "edit"]
ARGS = [{"command": "make test"}, {"command": "make test --verbose"}, {"path": "a.py"}, {"path": "b.py", "n": 2},
        {"command": "sleep 10 && curl -s http://ci/status"}, {"command": "sleep 120 && curl -s http://ci/status"}]
RESULTS = [("ok", False), ("ok", False), ("pending", False), ("error: no rule", True), (None, None)]
TEXTS = ["", "Let me check the build again:", "Let me check the build once more:", "Done.", "Read the region:"]

call_st = st.tuples(st.sampled_from(TOOLS), st.sampled_from(ARGS), st.sampled_from(RESULTS),
                    st.sampled_from([None, None, None, "s1", "s2"]))
event_st = st.one_of(
    call_st.map(lambda c: ("call", c)),
    st.tuples(st.lists(call_st, min_size=2, max_size=4), st.integers(2, 4)).map(lambda b: ("cycle", b)),
    st.just(("user", None)),
    st.sampled_from(TEXTS).map(lambda t: ("text", t)),
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
    g = Guard(Thresholds(), config)
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


def batch(events: list[tuple[str, Any]], config: Config) -> tuple[list[tuple], list[tuple]]:
    """What the scan does: columns per session, the user turn as a column, keys as 64-bit ints."""
    cols: dict[str, list[Any]] = {k: [] for k in ("key", "tool", "args", "res", "err", "parent", "ut")}
    texts: list[str] = []
    text_ut: list[int] = []
    ut = 0
    for kind, payload in events:
        if kind == "user":
            ut += 1
        elif kind == "text":
            texts.append(payload)
            text_ut.append(ut)
        else:
            tool, args, (text, err), parent = payload
            canon = canonical_json(args)
            cols["key"].append(int(call_key(tool, canon), 16))
            cols["tool"].append(tool)
            cols["args"].append(canon)
            cols["res"].append(result_key(text, err))
            cols["err"].append(err)
            cols["parent"].append(parent)
            cols["ut"].append(ut)
    sig, _ = scan_calls(cols["key"], cols["tool"], cols["args"], cols["res"], cols["err"], cols["parent"],
                        cols["ut"], config)
    tsig, _ = scan_texts(texts, text_ut, config.similarity, config.reset_on_user)
    return sig, [t for t in tsig if t is not None]


@settings(max_examples=300, deadline=None)
@given(st.lists(event_st, max_size=40), st.booleans())
def test_live_guard_equals_batch_scan(events: list[tuple[str, Any]], reset: bool) -> None:
    flat = flatten(events)
    config = Config(reset_on_user=reset)
    assert live(flat, config) == batch(flat, config)


@settings(max_examples=150, deadline=None)
@given(st.lists(event_st, max_size=30), st.data())
def test_signals_never_depend_on_later_calls(events: list[tuple[str, Any]], data: st.DataObject) -> None:
    flat = flatten(events)
    cut = data.draw(st.integers(0, len(flat)))
    whole_calls, whole_texts = batch(flat, Config())
    head_calls, head_texts = batch(flat[:cut], Config())
    assert whole_calls[: len(head_calls)] == head_calls
    assert whole_texts[: len(head_texts)] == head_texts


words = st.text(alphabet=st.sampled_from("abcXYZ019_-.:/ \t\n\u00a0\u2003é"), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3), max_leaves=8)


@settings(max_examples=300)
@given(words)
def test_fast_token_set_equals_token_set(text: str) -> None:
    assert fast_token_set(text) == token_set(text)


@settings(max_examples=300)
@given(json_values)
def test_args_token_set_equals_the_reference(args: Any) -> None:
    assert args_token_set(canonical_json(args)) == token_set(args_text(args))


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
        expected = max(Counter(text[i:i + CHUNK] for i in range(n)).values()) if n > 0 else 0
        assert chunk_repeats(text) == expected
