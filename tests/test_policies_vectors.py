"""Each preset reproduces the per-call verdicts of docs/detectors.md: the seed guards' test vectors
(docs/detectors.md#the-seed-guards) and the rows of the other guards' table (docs/detectors.md#other-guards-in-use)."""

from __future__ import annotations

import pytest
from test_replay_support import C, T, U, actions, policy, verdicts

from analyzer.guards.engines.pi import TextLoops, repeated_segment

ok, warn, halt = "ok", "warn", "halt"

# -- 2.1 open-codesign ------------------------------------------------------------------------------------------------
A = C("read", {"path": "a", "n": 1})
A_ = C("read", {"n": 1, "path": "a"})  # A with its keys in another order
B = C("grep", {"q": "x"})
Cc = C("ls", {"d": "."})
D = C("done", {})

CODESIGN = [
    ("A x7", [A] * 7, [ok, ok, warn, warn, halt, halt, halt]),
    ("A A' A A' A", [A, A_, A, A_, A], [ok, ok, warn, warn, halt]),
    ("(A B) x6", [A, B] * 6, [ok] * 5 + [warn] * 4 + [halt] * 3),
    ("(A B C) x5", [A, B, Cc] * 5, [ok] * 8 + [warn] * 6 + [halt]),
    ("A D A D A D A D A", [A, D] * 4 + [A], [ok, ok, ok, ok, warn, ok, warn, ok, halt]),
    ("A A A A U A A", [A] * 4 + [U] + [A] * 2, [ok, ok, warn, warn, ok, ok]),
    ("A x4 B A x4", [A] * 4 + [B] + [A] * 4, [ok, ok, warn, warn, ok, ok, ok, warn, warn]),
    ("A B B A C A B C B A", [A, B, B, A, Cc, A, B, Cc, B, A], [ok] * 10),
]


@pytest.mark.parametrize("name,events,expected", CODESIGN, ids=[c[0] for c in CODESIGN])
def test_open_codesign_vectors(name: str, events: list, expected: list[str]) -> None:
    assert verdicts("open-codesign", events) == expected


def test_open_codesign_blocks_everything_after_the_halt_including_done() -> None:
    assert actions("open-codesign", [A] * 5 + [D, B]) == ["ok", "ok", "warn", "warn", "halt", "halt", "halt"]


def test_open_codesign_cycle_of_four_is_not_detected() -> None:
    E = C("cat", {"f": "e"})
    assert verdicts("open-codesign", [A, B, Cc, E] * 6) == [ok] * 24


# -- 2.2 gitagent -----------------------------------------------------------------------------------------------------
W = C("write", {"path": "a", "content": ""})
P1, P2, P3 = (C("read", {"path": f"p{i}"}) for i in (1, 2, 3))

GITAGENT = [
    ("write x10, maxRepeats 5", {}, [W] * 10, [ok] * 4 + [halt] * 6),
    ("maxRepeats 3, p1 p1 p2 p2", {"halt": 3}, [P1, P1, P2, P2], [ok] * 4),
    ("maxTurns 3, three one-call turns", {"max_turns": 3}, [P1, P2, P3], [ok, ok, halt]),
    ("maxTurns 2, turn A: p1 p2, turn B: p3", {"max_turns": 2}, [T(None, [P1, P2]), T(None, [P3])], [ok, ok, halt]),
    ("maxTurns 1", {"max_turns": 1}, [P1, P2], [halt, halt]),
]


@pytest.mark.parametrize("name,settings,events,expected", GITAGENT, ids=[g[0] for g in GITAGENT])
def test_gitagent_vectors(name: str, settings: dict, events: list, expected: list[str]) -> None:
    assert verdicts(policy("gitagent", **settings), events) == expected


def test_gitagent_raises_max_repeats_below_two_to_two() -> None:
    assert policy("gitagent", halt=1).params["halt"] == 2
    assert verdicts(policy("gitagent", halt=1), [W, W]) == [ok, halt]


def test_gitagent_uses_insertion_order_keys() -> None:
    # JSON.stringify: {path, n} and {n, path} are different calls to gitagent, the same to open-codesign.
    assert verdicts("gitagent", [A, A_] * 3) == [ok] * 6


def test_gitagent_mid_batch_trip_stops_after_the_next_batch() -> None:
    from test_replay_support import build

    from analyzer.guards.replay import simulate

    s = build([T(None, [P1]), T(None, [W, W, W, W, W, P2]), T(None, [P3])])
    sim = simulate(policy("gitagent").guard(), s)
    assert [x for x in sim.levels] == [0, 0, 0, 0, 0, 2, 2, 2]
    # The batch of W's did not all terminate (the first four ran normally), so the run stops after P3's batch.
    assert [(st.call.call_id, st.action) for st in sim.stops] == [("c7", "terminate")]


# -- 2.3 pi-anti-doom-loop --------------------------------------------------------------------------------------------
def bash(cmd: str, error: bool = False) -> C:
    return C("bash", {"command": cmd}, result="boom" if error else "fine", error=error)


def read(path: str) -> C:
    return C("read", {"path": path})


PI = [
    ("grep foo x4", [bash("grep foo")] * 4, ["ok", "ok", "block", "abort"]),
    ("read a b c d a a", [read(p) for p in "abcdaa"], ["ok"] * 5 + ["block"]),
    (
        "key order irrelevant at every depth",
        [
            C("edit", {"x": {"a": 1, "b": [1, {"c": 2, "d": 3}]}}),
            C("edit", {"x": {"b": [1, {"d": 3, "c": 2}], "a": 1}}),
            C("edit", {"x": {"a": 1, "b": [1, {"c": 2, "d": 3}]}}),
        ],
        ["ok", "ok", "block"],
    ),
    (
        "10 different calls push an old one out",
        [read("a"), read("a")] + [read(f"file{i}") for i in range(10)] + [read("a")],
        ["ok"] * 13,
    ),
    (
        "bash err err err -> next bash blocks",
        [bash("make alpha", True), bash("pytest beta", True), bash("cargo gamma", True), bash("ls delta")],
        ["ok", "ok", "ok", "block"],
    ),
    (
        "err ok err err -> ok",
        [
            bash("make alpha", True),
            bash("pytest beta"),
            bash("cargo gamma", True),
            bash("npm delta", True),
            bash("ls epsilon"),
        ],
        ["ok"] * 5,
    ),
    (
        "bash err, read err, bash err -> ok",
        [
            bash("make alpha", True),
            C("read", {"path": "x"}, result="no", error=True),
            bash("cargo gamma", True),
            bash("ls delta"),
        ],
        ["ok"] * 4,
    ),
]


@pytest.mark.parametrize("name,events,expected", PI, ids=[p[0] for p in PI])
def test_pi_tool_vectors(name: str, events: list, expected: list[str]) -> None:
    assert actions("pi-anti-doom-loop", events) == expected


def test_pi_excluded_tool_never_blocks() -> None:
    assert actions(policy("pi-anti-doom-loop", exclude_tools=("bash",)), [bash("grep foo")] * 5) == ["ok"] * 5


def test_pi_blocked_calls_are_not_recorded() -> None:
    # a a (b) a: the blocked third a never entered the window, so after 8 other calls the 2 recorded a's fall out
    # one by one; a blocked call re-issued later (not blocked) does not abort.
    events = [read("a"), read("a"), read("a")] + [read(f"file{i}") for i in range(9)] + [read("a")]
    assert actions("pi-anti-doom-loop", events) == ["ok", "ok", "block"] + ["ok"] * 10


def test_pi_near_identical_arguments_count_as_one_call() -> None:
    # The seed: a retry whose arguments drifted (a head, a sleep wrapper) is the same loop.
    drift = [
        bash("npm test -- --grep login flow"),
        bash("sleep 10 && npm test -- --grep login flow"),
        bash("npm test -- --grep login flow | head -n 50"),
    ]
    assert actions("pi-anti-doom-loop", drift)[-1] == "block"
    assert actions(policy("pi-anti-doom-loop", near_identical_calls=False), drift) == ["ok"] * 3


def test_pi_scripts_compare_by_identity_only() -> None:
    scripts = [C("codemode", {"code": f"const r = await tools.read({{path: 'f{i}'}}); return r"}) for i in range(4)]
    assert actions("pi-anti-doom-loop", scripts) == ["ok"] * 4


def test_pi_thresholds_below_two_fall_back_to_the_default() -> None:
    assert policy("pi-anti-doom-loop", warn=1).params["warn"] == 3


def test_pi_nested_calls_block_at_the_second_and_escalate_across_scripts() -> None:
    poll = C("read", {"path": "status"}, parent="s1")
    again = C("read", {"path": "status"}, parent="s2")
    events = [T(None, [C("codemode", {"code": "poll"}), poll, poll]), T(None, [C("codemode", {"code": "x"}), again])]
    assert actions("pi-anti-doom-loop", events) == ["ok", "ok", "block", "ok", "abort"]


def test_pi_loop_ack_clears_a_repeat_block() -> None:
    events = [read("a"), read("a"), read("a"), C("loop_ack", {"reason": "polling"}), read("a")]
    assert actions("pi-anti-doom-loop", events) == ["ok", "ok", "block", "ok", "ok"]


TEXT = [
    ("merge ref x5", ["Let me fetch the merge ref:"] * 5, [False, False, True, True, True]),
    ("whitespace drift", ["Read the region:", "Read  the   region:", " Read the region: "], [False, False, True]),
    ("A B A C A", ["A", "B", "A", "C", "A"], [False] * 4 + [True]),
    ("empty texts", ["", "   ", ""], [False] * 3),
    ("short segments", ["Error. Error. Error."], [False]),
    (
        "a sentence 3 times in one message",
        ["Now run the failing test again: now run the failing test again: now run the failing test again:"],
        [False],
    ),
    (
        "the same sentence 3 times in one message",
        ["Running the failing test again. Running the failing test again. Running the failing test again."],
        [True],
    ),
    (
        "near-identical streak",
        [
            "Let me re-download the log and inspect the failing test",
            "Let me re-download the log and examine the failing assertion",
            "Let me re-download the log and inspect the failing assertion",
        ],
        [False, False, True],
    ),
]


@pytest.mark.parametrize("name,texts,expected", TEXT, ids=[t[0] for t in TEXT])
def test_pi_text_vectors(name: str, texts: list[str], expected: list[bool]) -> None:
    rules = TextLoops(3, 10, 0.55)
    assert [rules.check(t) is not None for t in texts] == expected


def test_pi_segments_split_after_punctuation_and_ignore_short_ones() -> None:
    assert (
        repeated_segment(
            "Checking the build output now. Checking the build output now! Checking the build output now?", 3
        )
        == "Checking the build output now"
    )
    assert repeated_segment("Error. Error. Error.", 3) is None


def test_pi_text_escalation_steer_then_abort_with_one_resume_per_session() -> None:
    def same(i: int) -> T:  # the same text, each message issuing a different call
        return T("Let me fetch the merge ref:", [read(f"file{i}")])

    assert actions("pi-anti-doom-loop", [same(i) for i in range(5)]) == ["ok", "ok", "steer", "abort+resume", "abort"]
    # The resume budget lasts the session: after a new prompt the first hit steers again, the second aborts for real.
    events = [same(i) for i in range(4)] + [U] + [same(i) for i in range(4)]
    assert actions("pi-anti-doom-loop", events)[4:] == ["ok", "ok", "steer", "abort"]
    assert verdicts("pi-anti-doom-loop", [same(i) for i in range(5)]) == [ok, ok, warn, halt, halt]


# -- 3: the other guards ----------------------------------------------------------------------------------------------
def test_gemini_cli_streak_and_cycles() -> None:
    assert verdicts("gemini-cli", [A] * 6) == [ok] * 4 + [halt] * 2
    assert verdicts("gemini-cli", [A, B] * 6).index(halt) == 9  # a 2-cycle trips at call 10
    assert verdicts("gemini-cli", [A, B, Cc] * 5).index(halt) == 14  # a 3-cycle at 15
    E, F = C("cat", {"f": "e"}), C("cat", {"f": "f"})
    assert verdicts("gemini-cli", [A, B, Cc, E, F] * 5).index(halt) == 24  # a 5-cycle at 25
    assert halt not in verdicts("gemini-cli", [A, B, Cc, E, F, C("x", {})] * 5)  # a 6-cycle is never detected


def test_gemini_cli_uses_insertion_order_keys_and_resets_per_prompt() -> None:
    assert verdicts("gemini-cli", [A, A_] * 3) == [ok] * 6
    assert verdicts("gemini-cli", [A] * 4 + [U] + [A] * 4) == [ok] * 8


def test_gemini_cli_content_chanting_halts_at_the_message() -> None:
    chant = "I will now check the configuration file for errors. " * 12
    events = [T(chant, [A]), B]
    assert actions("gemini-cli", events) == ["halt", "halt"]
    # Inside a code fence the same text is not tracked.
    fenced = "```\n" + ("I will now check the configuration file for errors.\n" * 12) + "```\n"
    assert actions("gemini-cli", [T(fenced, [A])]) == ["ok"]


def test_cline_soft_at_exactly_three_hard_from_five() -> None:
    assert actions("cline", [A] * 7) == ["ok", "ok", "notice", "ok", "ask", "ask", "ask"]
    assert verdicts("cline", [A] * 7) == [ok, ok, warn, ok, halt, halt, halt]
    progress = [C("read", {"path": "a", "task_progress": f"step {i}"}) for i in range(5)]
    assert verdicts("cline", progress) == [ok, ok, warn, ok, halt]  # task_progress is not part of the key


def test_cline_counts_across_user_prompts_and_stops_at_three_mistakes() -> None:
    assert verdicts("cline", [A, A, U, A]) == [ok, ok, warn]
    errs = [C("edit", {"path": f"f{i}"}, result="no match", error=True) for i in range(3)]
    assert verdicts("cline", errs) == [ok, ok, halt]
    assert verdicts("cline", errs[:2] + [C("read", {"path": "x"})] + errs[:1]) == [ok] * 4


def test_roo_code_refuses_the_fourth_and_clears_after_firing() -> None:
    assert actions("roo-code", [A] * 9) == ["ok", "ok", "ok", "refuse", "ok", "ok", "ok", "refuse", "ok"]
    scroll = C("browser_action", {"action": "scroll_down"})
    assert verdicts("roo-code", [scroll] * 6) == [ok] * 6
    # Top-level keys sorted, nested ones in insertion order.
    n1, n2 = C("edit", {"b": 1, "a": {"x": 1, "y": 2}}), C("edit", {"a": {"x": 1, "y": 2}, "b": 1})
    n3 = C("edit", {"a": {"y": 2, "x": 1}, "b": 1})
    assert verdicts("roo-code", [n1, n2, n1, n2]) == [ok, ok, ok, halt]
    assert verdicts("roo-code", [n1, n2, n3, n1]) == [ok] * 4


def test_opencode_three_identical_parts_of_one_message() -> None:
    assert actions("opencode", [T(None, [A, A, A, A])]) == ["ok", "ok", "ask", "ask"]
    assert verdicts("opencode", [A] * 6) == [ok] * 6  # one call per message never trips
    assert verdicts("opencode", [T(None, [A, A, B, A])]) == [ok] * 4


def test_openhands_identical_pairs_errors_and_alternation() -> None:
    same = C("bash", {"command": "pytest"}, result="1 failed")
    assert verdicts("openhands", [same] * 5) == [ok, ok, ok, halt, halt]
    failing = C("str_replace_editor", {"path": "a.py"}, result="no match", error=True)
    assert verdicts("openhands", [failing] * 3) == [ok, ok, halt]
    X = C("view", {"path": "x"}, result="x body")
    Y = C("view", {"path": "y"}, result="y body")
    assert verdicts("openhands", [X, Y] * 3) == [ok] * 5 + [halt]


def test_openhands_compares_commands_by_exit_status_only() -> None:
    polls = [C("bash", {"command": "gh run view"}, result=f"status: step {i}") for i in range(4)]
    assert verdicts("openhands", polls) == [ok, ok, ok, halt]  # OpenHands #5355: a progressing poll looks stuck
    reads = [C("view", {"path": "log"}, result=f"line {i}") for i in range(4)]
    assert verdicts("openhands", reads) == [ok] * 4


def test_openhands_monologue_and_reset_at_user_message() -> None:
    same = C("bash", {"command": "pytest"}, result="1 failed")
    assert verdicts("openhands", [same] * 3 + [U] + [same] * 3) == [ok] * 6
    from test_replay_support import build

    from analyzer.guards.replay import simulate

    sim = simulate(policy("openhands").guard(), build([T("I am stuck."), T("I am stuck."), T("I am stuck."), A]))
    assert [(st.action, st.call.call_id) for st in sim.stops] == [("stuck", "c0")]
