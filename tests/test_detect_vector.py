"""The vectorised batch scan against the streaming reference, piece by piece: argument and text words, the
per-message text rules, and whole findings (``detect.vector.episodes`` against
``detect.stream.episodes.build_findings``) on random sessions with loops of every kind, scripts, usage and user
turns."""

from __future__ import annotations

import sys
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.detect.keys import (
    action_json,
    args_token_set,
    call_key,
    canonical_json,
    estimate_tokens,
    fast_token_set,
    result_key,
)
from analyzer.detect.rules import FINDINGS, RESULT_HEAD, SIGNAL_FIELDS, TEXT_FIELDS
from analyzer.detect.stream.calls import Config, scan_calls
from analyzer.detect.stream.episodes import SessionData, build_findings
from analyzer.detect.stream.text import chunk_repeats, scan_texts, sentence_repeats
from analyzer.detect.vector.text import text_signals
from analyzer.detect.vector.words import args_words_series, normalize, words
from analyzer.scan.batch import scan_group

# -- words -----------------------------------------------------------------------------------------------------------

_CHARS = 'abcXYZK019_-.:/"\\{}[], \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2003\u3000\u212a\u0130é\x00\x01\x08nulltrufase'
text_st = st.text(alphabet=st.sampled_from(_CHARS), max_size=30)
json_st = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**25), 10**25) | st.floats() | text_st,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_st, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(json_st, min_size=1, max_size=6))
def test_argument_words_equal_the_reference(values: list[Any]) -> None:
    canon = [canonical_json(v) for v in values] + [
        "",
        "not json {",
        '"a string"',
        "[1e-05, 12345]",
        '["",false,":"]',
        '["a,",":"]',
        '{":":1,"k":"a,"}',
        '{"a":"x\\\\","b":"y \\"z\\" w"}',
        '{"a":"line one\\nline two\\ttab"}',
        '{"u":"\\u0041bc"}',
    ]
    got = args_words_series(pl.Series(canon, dtype=pl.String)).to_list()
    assert [frozenset(g) for g in got] == [args_token_set(c) if c else frozenset() for c in canon]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(text_st, st.none()), min_size=1, max_size=6))
def test_text_words_and_normal_form_equal_the_reference(texts: list[str | None]) -> None:
    s = pl.Series(texts, dtype=pl.String)
    got = pl.select(words(pl.lit(s)).alias("w"), normalize(pl.lit(s)).alias("n"))
    assert [frozenset(w) for w in got["w"].to_list()] == [fast_token_set(t or "") for t in texts]
    assert got["n"].to_list() == [" ".join((t or "").split()) for t in texts]


def test_the_character_classes_match_this_python() -> None:
    # vwords spells out Python's whitespace and lower-cases words after filtering them: check every code point
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    s = pl.Series(chars, dtype=pl.String)
    spaces = s.str.contains(
        r"^[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
        r"\x{202f}\x{205f}\x{3000}]$"
    ).to_list()
    assert [c for c, sp in zip(chars, spaces) if sp != c.isspace()] == []
    word = set("abcdefghijklmnopqrstuvwxyz0123456789_-")
    lowers_to_word = [c for c in chars if c.lower() and set(c.lower()) <= word and c not in word]
    assert lowers_to_word == [chr(x) for x in range(ord("A"), ord("Z") + 1)] + ["\u212a"]
    assert not any(not c.isspace() and any(x.isspace() for x in c.lower()) for c in chars)


# -- per-message text rules ------------------------------------------------------------------------------------------

_LINE = "the quick brown fox jumps over the lazy dog again!"
message_st = st.one_of(
    st.text(alphabet=st.sampled_from("ab .:!?\n`x"), max_size=200),
    st.builds(lambda a, n, b: a + _LINE * n + b, st.text(max_size=20), st.integers(0, 12), st.text(max_size=20)),
    st.builds(lambda n: "```\n" + _LINE * n + "\n```" + _LINE, st.integers(0, 4)),
    st.builds(
        lambda s, n: " ".join([s] * n),
        st.sampled_from(["I will now fix it.", "Error.", "Checking the log now!"]),
        st.integers(1, 5),
    ),
    st.builds(lambda n: "x" * n, st.integers(0, 6000)),
    st.builds(lambda a, n: a + _LINE * n, st.text(alphabet="éab ", max_size=30), st.integers(1, 4)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(message_st, min_size=1, max_size=5))
def test_sentence_and_chunk_rules_equal_the_reference(texts: list[str]) -> None:
    frame = pl.DataFrame({"session_id": ["s"] * len(texts), "user_turn": [0] * len(texts), "text": texts})
    got = text_signals(frame).signals
    kept = [t for t in texts if " ".join(t.split())]
    assert got["sentence_repeats"].to_list() == [sentence_repeats(" ".join(t.split())) for t in kept]
    assert got["chunk_repeats"].to_list() == [chunk_repeats(t) for t in kept]


# -- whole findings --------------------------------------------------------------------------------------------------

TOOLS = ["bash", "read", "edit"]
ARGS = [
    {"command": "make test"},
    {"command": "make test", "description": "Run the tests again"},  # commentary: the same action
    {"command": "make test --verbose"},
    {"command": "make test --verbose --color"},
    {"path": "a.py"},
    {"path": "b.py"},
    {"command": "sleep 10 && curl -s http://ci/status"},
    {"command": "sleep 120 && curl -s http://ci/status"},
    {"command": "sed -n '1,200p' src/a_1.py"},
]
RESULTS = [
    ("ok", False),
    ("pending", False),
    ("status: pending again now", False),
    ("status: pending again later", False),
    ("error: no rule to make target", True),
    ("Chunk ID: 1\nWall time: 2\nsame output", False),
    (None, None),
]
TEXTS = [
    "",
    "Let me check the build again now:",
    "Let me check the build once more now:",
    "Done.",
    "Let me look.",
    "one two three four five",
    "three four five six seven",
    "one two three four five six seven",
    "I will run it. I will run it again now. I will run it again now.",
    "I will run it again now. " * 4,
]

call_st = st.tuples(st.sampled_from(TOOLS), st.sampled_from(ARGS), st.sampled_from(RESULTS))
script_st = st.tuples(
    st.just("codemode"),
    st.sampled_from([{"code": "a"}, {"code": "b"}]),
    st.sampled_from(RESULTS),
    st.lists(call_st, min_size=1, max_size=4),
)
message_item_st = st.tuples(
    st.sampled_from(TEXTS),
    st.lists(st.one_of(call_st, call_st, script_st), max_size=3),
    st.integers(0, 3000),
    st.sampled_from([0.1, 0.2, 0.3, 0.0]),
)
DRIFTS = [
    [{"command": f"sleep {n} && curl -s http://ci/api/status"} for n in (5, 10, 30, 60, 120)],
    [{"command": "python -m pytest tests unit" + " --verbose" * n} for n in range(5)],
    # identical and drifted repeats mixed (a sleep wrapper does not change the action): one drift episode
    [
        {"command": c}
        for c in (
            "curl -s http://ci/api/status",
            "sleep 5 && curl -s http://ci/api/status",
            "curl -s --retry 3 http://ci/api/status",
            "sleep 9 && curl -s --retry 3 http://ci/api/status",
            "curl -s --retry 3 --max-time 9 http://ci/api/status",
        )
    ],
]


def _drift(family: list[dict[str, str]], n: int, result: tuple, text: str) -> tuple:
    return ("block", [(text, [("bash", family[i], result)], 100, 0.1) for i in range(n)], 1)


# Failing commands: five different build tools (exploration, not a loop), or one target with drifting flags (a
# failure loop when three or more fail the same way).
FAILING = [
    ["npm run build", "yarn build", "pnpm build", "npx vite build", "make all"],
    ["make all", "make -j2 all", "make -j4 all", "make -k all", "make -B all"],
]


def _failures(commands: list[str], n: int) -> tuple:
    return (
        "block",
        [("", [("bash", {"command": commands[i]}, ("error: exit 1", True))], 50, 0.2) for i in range(n)],
        1,
    )


# Polls of a background task (running, then done) and a check that fails the same way and then works: waiting and
# the stuck run before a success.
POLL_RESULTS = [
    ("<status>running</status>", False),
    ("<status>running</status>", False),
    ("<status>completed</status><exit_code>0</exit_code>", False),
    ("Error: connection refused\nexit code 7", True),
    ("ok", False),
]


def _polls(tool_args: tuple[str, dict[str, Any]], results: list[int]) -> tuple:
    return ("block", [("", [(tool_args[0], tool_args[1], POLL_RESULTS[r])], 40, 0.1) for r in results], 1)


POLL_CALLS = [("BashOutput", {"bash_id": "b1"}), ("bash", {"command": "sleep 9 && curl -s http://ci/api/status"})]

session_st = st.lists(
    st.one_of(
        st.just(("user",)),
        st.builds(_polls, st.sampled_from(POLL_CALLS), st.lists(st.integers(0, 4), min_size=2, max_size=7)),
        st.builds(_drift, st.sampled_from(DRIFTS), st.integers(2, 5), st.sampled_from(RESULTS), st.sampled_from(TEXTS)),
        st.builds(_failures, st.sampled_from(FAILING), st.integers(2, 5)),
        message_item_st.map(lambda m: ("msg", m, 1)),
        st.tuples(message_item_st, st.integers(2, 5)).map(lambda m: ("msg", m[0], m[1])),
        st.tuples(st.lists(message_item_st, min_size=2, max_size=3), st.integers(2, 4)).map(
            lambda b: ("block", b[0], b[1])
        ),
    ),
    max_size=25,
)


def build(sessions: list[list[tuple]]) -> dict[str, Any]:
    """Rows as the store holds them: calls, assistant messages, usage, result texts."""
    calls: list[dict[str, Any]] = []
    msgs: list[dict[str, Any]] = []
    usage: dict[tuple[str, str], tuple[int, float]] = {}
    for n, events in enumerate(sessions):
        sid = f"sess{n}"
        ut, turn, seq = -1, 0, 0
        flat: list[tuple] = []
        for e in events:
            if e[0] == "user":
                flat.append(e)
            elif e[0] == "msg":
                flat.extend([("msg", e[1])] * e[2])
            else:
                flat.extend([("msg", m) for m in e[1]] * e[2])
        for e in flat:
            if e[0] == "user":
                ut += 1
                turn += 1
                continue
            text, items, tokens, cost = e[1]
            tid = f"m{turn}"
            msgs.append(
                {
                    "session_id": sid,
                    "turn_id": tid,
                    "turn_index": turn,
                    "user_turn": max(ut, 0),
                    "text": text,
                    "est_tokens": estimate_tokens(text),
                }
            )
            usage[(sid, tid)] = (tokens, cost)
            for item in items:
                children = item[3] if len(item) > 3 else []
                parent_id = f"c{seq}"
                for tool, args, (res, err), parent in [(item[0], item[1], item[2], None)] + [
                    (c[0], c[1], c[2], parent_id) for c in children
                ]:
                    canon = canonical_json(args)
                    act = action_json(tool, args, canon)
                    calls.append(
                        {
                            "session_id": sid,
                            "seq": seq,
                            "call_id": f"c{seq}",
                            "turn_id": tid,
                            "user_turn": max(ut, 0),
                            "tool": tool,
                            "args": canon,
                            "text": res,
                            "is_error": err,
                            "parent_call_id": parent,
                            "key": call_key(tool, act),
                            "action_args": None if act == canon else act,
                            "result_key": result_key(res, err),
                            "est_tokens": estimate_tokens(canon) + estimate_tokens(res),
                        }
                    )
                    seq += 1
            turn += 1
    return {"calls": calls, "msgs": msgs, "usage": usage}


def reference(data: dict[str, Any], config: Config) -> tuple[list[tuple], list[tuple], set[tuple]]:
    """Signal rows (+ finding id), text rows (+ finding id) and findings, session by session, the reference way."""
    sig_rows: list[tuple] = []
    text_rows: list[tuple] = []
    found: set[tuple] = set()
    sids = sorted({c["session_id"] for c in data["calls"]} | {m["session_id"] for m in data["msgs"]})
    for sid in sids:
        cs = [c for c in data["calls"] if c["session_id"] == sid]
        ms = [m for m in data["msgs"] if m["session_id"] == sid]
        keys = [int(c["key"], 16) for c in cs]
        sig, links = scan_calls(
            keys,
            [c["tool"] for c in cs],
            [c["action_args"] or c["args"] for c in cs],
            [c["result_key"] for c in cs],
            [c["is_error"] for c in cs],
            [c["parent_call_id"] for c in cs],
            [c["user_turn"] for c in cs],
            config,
        )
        tsig, tlinks = scan_texts(
            [m["text"] for m in ms], [m["user_turn"] for m in ms], config.similarity, config.reset_on_user
        )
        heads = [c["text"][:RESULT_HEAD] if c["text"] is not None else None for c in cs]
        fs = build_findings(
            SessionData(
                session_id=sid,
                seq=[c["seq"] for c in cs],
                call_id=[c["call_id"] for c in cs],
                turn_id=[c["turn_id"] for c in cs],
                user_turn=[c["user_turn"] for c in cs],
                tool=[c["tool"] for c in cs],
                key=keys,
                args=[c["args"] for c in cs],
                parent=[c["parent_call_id"] for c in cs],
                est_tokens=[c["est_tokens"] for c in cs],
                signals=sig,
                nested_links=links,
                m_turn_id=[m["turn_id"] for m in ms],
                m_turn_index=[m["turn_index"] for m in ms],
                m_user_turn=[m["user_turn"] for m in ms],
                m_text=[m["text"] for m in ms],
                m_est_tokens=[m["est_tokens"] for m in ms],
                m_signals=tsig,
                text_links=tlinks,
                usage={t: u for (s, t), u in data["usage"].items() if s == sid},
                tokens={k: args_token_set(c["action_args"] or c["args"]) for k, c in zip(keys, cs)},
                result_key=[c["result_key"] for c in cs],
                is_error=[c["is_error"] for c in cs],
                result_head=heads.__getitem__,
            )
        )
        cf: list[str | None] = [None] * len(cs)
        tf: list[str | None] = [None] * len(ms)
        for f in fs:
            for i in f.calls:
                cf[i] = cf[i] or f.finding_id
            for m in f.messages:
                tf[m] = f.finding_id
            found.add(
                tuple(
                    getattr(f, c) if not isinstance(getattr(f, c), list) else tuple(getattr(f, c))
                    for c in FINDINGS.names
                )
            )
        sig_rows += [(sid, c["seq"]) + s + (f,) for c, s, f in zip(cs, sig, cf)]
        text_rows += [(sid, m["turn_index"]) + s + (f,) for m, s, f in zip(ms, tsig, tf) if s is not None]
    return sig_rows, text_rows, found


def vectorised(data: dict[str, Any], config: Config) -> tuple[list[tuple], list[tuple], set[tuple]]:
    calls = pl.DataFrame(
        [
            {**c, "k": int(c["key"], 16), "result_key": int(c["result_key"], 16) if c["result_key"] else None}
            for c in data["calls"]
        ],
        schema={
            "session_id": pl.String,
            "seq": pl.Int32,
            "call_id": pl.String,
            "turn_id": pl.String,
            "user_turn": pl.Int32,
            "tool": pl.String,
            "args": pl.String,
            "action_args": pl.String,
            "text": pl.String,
            "is_error": pl.Boolean,
            "parent_call_id": pl.String,
            "key": pl.String,
            "result_key": pl.UInt64,
            "est_tokens": pl.Int32,
            "k": pl.UInt64,
        },
    )
    turns = pl.DataFrame(
        data["msgs"],
        schema={
            "session_id": pl.String,
            "turn_id": pl.String,
            "turn_index": pl.Int32,
            "user_turn": pl.Int32,
            "text": pl.String,
            "est_tokens": pl.Int32,
        },
    )
    text_of = {(c["session_id"], c["seq"]): c["text"] for c in data["calls"]}
    asked = []

    def heads(keys: pl.DataFrame) -> pl.DataFrame:
        asked.append(keys.height)
        return keys.with_columns(
            pl.Series(
                "head",
                [(text_of[k] or "")[:RESULT_HEAD] if text_of[k] is not None else None for k in keys.iter_rows()],
                dtype=pl.String,
            )
        )

    def turn_info(keys: pl.DataFrame) -> pl.DataFrame:
        index = {(m["session_id"], m["turn_id"]): m["turn_index"] for m in data["msgs"]}
        rows = [
            (s, t, index[(s, t)]) + data["usage"].get((s, t), (None, None))
            for s, t in keys.iter_rows()
            if (s, t) in index
        ]
        return pl.DataFrame(
            rows,
            schema={
                "session_id": pl.String,
                "turn_id": pl.String,
                "turn_index": pl.Int32,
                "tokens": pl.Int64,
                "cost": pl.Float64,
            },
            orient="row",
        )

    sids = sorted({c["session_id"] for c in data["calls"]} | {m["session_id"] for m in data["msgs"]})
    sessions = pl.DataFrame(
        {"session_id": sids, "fingerprint": ["x"] * len(sids)},
        schema={"session_id": pl.String, "fingerprint": pl.String},
    )
    out = scan_group(sessions, calls.drop("text", "key"), turns, config, heads, turn_info)
    assert len(asked) <= 1, asked  # the group's heads are read once (a lookup scans the result texts)
    sig = out["signals"].select("session_id", "seq", *SIGNAL_FIELDS, "finding_id").rows()
    txt = out["text_signals"].select("session_id", "turn_index", *TEXT_FIELDS, "finding_id").rows()
    found = {tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in out["findings"].rows()}
    return sig, txt, found


@pytest.mark.parametrize(
    "config",
    [Config(), Config(reset_on_user=False), Config(script_memory=2)],
    ids=["default", "no-reset", "short-script-memory"],
)
def test_findings_equal_the_reference(config: Config) -> None:
    @settings(max_examples=100, deadline=None)
    @given(st.lists(session_st, min_size=1, max_size=3))
    def check(sessions: list[list[tuple]]) -> None:
        data = build(sessions)
        ref_sig, ref_text, ref_found = reference(data, config)
        sig, text, found = vectorised(data, config)
        assert sig == ref_sig
        assert text == ref_text
        assert found == ref_found

    check()


def test_findings_of_every_kind_are_generated() -> None:
    # the strategies above must reach every kind of episode, or the equality proves little
    kinds: set[str] = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(st.lists(session_st, min_size=1, max_size=3))
    def collect(sessions: list[list[tuple]]) -> None:
        kinds.update(f[2] for f in reference(build(sessions), Config())[2])

    collect()
    assert kinds >= {"streak", "cycle", "drift", "failure", "text", "nested", "waiting"}


# -- issue 30: long cycles, short degenerate text, consecutive means consecutive (both engines, one expectation) ------


def both_engines(sessions: list[list[tuple]]) -> list[dict[str, Any]]:
    """The findings of constructed sessions, the same from the reference and the vectorised scan, ordered."""
    data = build(sessions)
    ref = reference(data, Config())[2]
    assert vectorised(data, Config())[2] == ref
    return [dict(zip(FINDINGS.names, f)) for f in sorted(ref, key=lambda f: (f[1], f[7] or -1, f[17] or 0))]


def _msg(text: str, *calls: tuple) -> tuple:
    return (text, list(calls), 100, 0.1)


def test_a_block_of_eight_calls_repeated_is_one_long_cycle_in_both_engines() -> None:
    block = [_msg("", ("bash", {"command": f"step {i}"}, (f"out {i}", False))) for i in range(8)]
    (f,) = both_engines([[("user",), ("block", block, 3)]])
    assert (f["kind"], f["period"], f["repeats"], f["stuck"], len(f["call_ids"])) == ("cycle", 8, 3, True, 24)
    # ten calls a round is the longest followed; eleven are not a cycle
    assert [g["period"] for g in both_engines([[("block", block + block[:2], 3)]])] == [10]
    eleven = [_msg("", ("bash", {"command": f"step {i}"}, (f"out {i}", False))) for i in range(11)]
    assert both_engines([[("block", eleven, 3)]]) == []


def test_a_short_reply_as_the_whole_of_five_steps_in_a_row_is_degenerate_in_both_engines() -> None:
    (f,) = both_engines([[("user",), ("msg", _msg("Continuing."), 5)]])
    assert (f["kind"], f["repeats"], f["stuck"]) == ("text", 5, True)
    assert both_engines([[("user",), ("msg", _msg("Continuing."), 4)]]) == []
    # the same filler before steps that each did something new is a caption of work
    steps = [("msg", _msg("Let me look.", ("read", {"path": f"f{i}.py"}, (f"body {i}", False))), 1) for i in range(6)]
    assert both_engines([[("user",), *steps]]) == []


LONG_A = "The build still fails on the same import, so I will try the build once more now."
OTHERS = [
    "Now the parser module needs a look before anything else changes here.",
    "Checking what the configuration loader expects from its environment variables.",
    "Reading the failing test closely to see which fixture it depends upon.",
]


def test_a_reply_recurring_between_different_ones_is_not_in_a_row_in_both_engines() -> None:
    alternating = [("msg", _msg(t), 1) for o in OTHERS for t in (LONG_A, o)]
    assert both_engines([[("user",), *alternating]]) == []
    (f,) = both_engines([[("user",), ("msg", _msg(LONG_A), 3)]])
    assert (f["kind"], f["repeats"], f["why"].startswith("the same reply 3× in a row")) == ("text", 3, True)


def test_a_block_of_replies_repeated_word_for_word_is_degenerate_in_both_engines() -> None:
    (f,) = both_engines([[("user",), ("block", [_msg(LONG_A), _msg(OTHERS[0])], 3)]])
    assert (f["kind"], f["repeats"], f["stuck"], f["first_turn_index"], f["last_turn_index"]) == ("text", 3, True, 1, 6)
    assert f["why"].startswith("the same 2 replies 3× in a row, word for word")
    # twice is not yet a loop
    assert both_engines([[("user",), ("block", [_msg(LONG_A), _msg(OTHERS[0])], 2)]]) == []
