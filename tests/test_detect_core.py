"""The detector core against docs/detectors.md#the-seed-guards: each seed guard's vectors as a test of the signal it
rests on."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.detect.stream.calls import Config
from analyzer.detect.stream.live import Detector, Level, Thresholds

A = ("read", {"path": "a", "n": 1})
A2 = ("read", {"n": 1, "path": "a"})  # A with its keys in the other order
B = ("grep", {"q": "x"})
C = ("ls", {"d": "."})
D = ("done", {})
U = "user"

# open-codesign: warn at 3, halt at 5 over max(streak, 2-cycle, 3-cycle); `done` is not recorded.
CODESIGN = Thresholds(warn=3, halt=5, max_period=3, window=None, drift=False, failures=False, nested=None)
CODESIGN_CONFIG = Config(exempt_tools=frozenset({"done"}))
V = {"ok": Level.ok, "warn": Level.warn, "halt": Level.halt}


def codesign_verdicts(seq: list[Any]) -> list[str]:
    g = Detector(CODESIGN, CODESIGN_CONFIG)
    out = []
    for item in seq:
        if item == U:
            g.observe_user()
            out.append("·")
            continue
        tool, args = item
        out.append(g.observe_call(tool, args).verdict.value)
        g.observe_result("ok", False)
    return out


@pytest.mark.parametrize(
    "seq, expected",
    [
        ([A] * 7, "ok ok warn warn halt halt halt"),
        ([A, A2, A, A2, A], "ok ok warn warn halt"),
        ([A, B] * 6, "ok ok ok ok ok warn warn warn warn halt halt halt"),
        ([A, B, C] * 5, " ".join(["ok"] * 8 + ["warn"] * 6 + ["halt"])),
        ([A, D, A, D, A, D, A, D, A], "ok ok ok ok warn ok warn ok halt"),
        ([A, A, A, A, U, A, A], "ok ok warn warn · ok ok"),
        ([A] * 4 + [B] + [A] * 4, "ok ok warn warn ok ok ok warn warn"),
        ([A, B, B, A, C, A, B, C, B, A], " ".join(["ok"] * 10)),
    ],
    ids=["A x7", "key order", "AB x6", "ABC x5", "done between", "user resets", "streak broken", "no pattern"],
)
def test_open_codesign_vectors(seq: list[Any], expected: str) -> None:
    assert " ".join(codesign_verdicts(seq)) == expected


def test_open_codesign_does_not_see_4_cycles_but_the_core_counts_them() -> None:
    g = Detector(CODESIGN)
    seq = [("a", {}), ("b", {}), ("c", {}), ("d", {})] * 5
    obs = [g.observe_call(*c) for c in seq]
    assert {o.verdict for o in obs} == {Level.ok}
    assert obs[-1].signals.cycle4 == 5 and obs[-1].signals.cycle2 == obs[-1].signals.cycle3 == 1


# gitagent: maxRepeats consecutive identical calls -> the streak signal.
@pytest.mark.parametrize(
    "calls, max_repeats, first_terminate",
    [
        ([("write", {"path": "a", "content": ""})] * 10, 5, 5),
        ([("x", {"p": 1}), ("x", {"p": 1}), ("x", {"p": 2}), ("x", {"p": 2})], 3, None),
    ],
)
def test_gitagent_max_repeats_vectors(calls: list[Any], max_repeats: int, first_terminate: int | None) -> None:
    g = Detector()
    streaks = [g.observe_call(*c).signals.streak for c in calls]
    hits = [i + 1 for i, s in enumerate(streaks) if s >= max_repeats]
    assert (hits[0] if hits else None) == first_terminate


# pi-anti-doom-loop: a call blocks when its key occurs 3+ times in the window (current call + the 10 before it).
def window_counts(calls: list[Any], config: Config | None = None) -> list[int]:
    g = Detector(config=config)
    return [g.observe_call(*c).signals.window_count for c in calls]


@pytest.mark.parametrize(
    "calls, blocked",
    [
        ([("bash", {"command": "grep foo"})] * 4, [False, False, True, True]),
        ([("read", {"path": p}) for p in "abcdaa"], [False] * 5 + [True]),
        (
            [
                ("read", {"q": {"a": 1, "b": [1, 2]}}),
                ("read", {"q": {"b": [1, 2], "a": 1}}),
                ("read", {"q": {"b": [1, 2], "a": 1}}),
            ],
            [False, False, True],
        ),
        (
            [("bash", {"command": "cmd 0"})]
            + [("bash", {"command": f"cmd {i}"}) for i in range(1, 11)]
            + [("bash", {"command": "cmd 0"})] * 2,
            [False] * 13,
        ),
    ],
    ids=["grep x4", "abcdaa", "key order at depth", "pushed out of the window"],
)
def test_pi_repeat_vectors(calls: list[Any], blocked: list[bool]) -> None:
    assert [c >= 3 for c in window_counts(calls)] == blocked


@pytest.mark.parametrize("others, count", [(8, 3), (9, 2)])
def test_pi_window_is_the_current_call_and_the_ten_before_it(others: int, count: int) -> None:
    # pi keeps the last 10 executed calls and adds the current one: an `a` 10 calls back still counts, 11 back not.
    calls = [("r", {"p": "a"})] + [("r", {"p": str(i)}) for i in range(others)] + [("r", {"p": "a"})] * 2
    assert window_counts(calls)[-1] == count


def test_pi_excluded_tool_never_counts() -> None:
    assert window_counts([("bash", {"command": "x"})] * 5, Config(exempt_tools=frozenset({"bash"}))) == [0] * 5


def fail_runs(results: list[tuple[str, bool]]) -> list[int]:
    g = Detector()
    out = []
    for i, (tool, err) in enumerate(results):
        g.observe_call(tool, {"command": f"c{i}"})
        out.append(g.observe_result("boom" if err else "fine", err).signals.fail_run)
    return out


@pytest.mark.parametrize(
    "results, runs, blocks_next",
    [
        ([("bash", True)] * 3, [1, 2, 3], True),
        ([("bash", True), ("bash", False), ("bash", True), ("bash", True)], [1, 0, 1, 2], False),
        ([("bash", True), ("read", True), ("bash", True)], [1, 1, 1], False),
    ],
    ids=["err x3", "success breaks", "other tool breaks"],
)
def test_pi_repeated_failure_vectors(results: list[tuple[str, bool]], runs: list[int], blocks_next: bool) -> None:
    got = fail_runs(results)
    assert got == runs
    assert (got[-1] >= 3) == blocks_next  # pi checks the run before the next call of that tool


def text_hits(texts: list[str]) -> list[bool]:
    g = Detector()
    out = []
    for t in texts:
        o = g.observe_text(t)
        out.append(o is not None and o.verdict is Level.halt)
    return out


@pytest.mark.parametrize(
    "texts, hits",
    [
        (["Let me fetch the merge ref:"] * 5, [False, False, True, True, True]),
        (["Read the region:", "Read  the   region:", " Read the region: "], [False, False, True]),
        (["A", "B", "A", "C", "A"], [False, False, False, False, True]),
        (["", "   ", ""], [False, False, False]),
        (["Error. Error. Error."], [False]),
    ],
    ids=["identical x5", "whitespace drift", "ABACA", "blank", "short sentences"],
)
def test_pi_text_vectors(texts: list[str], hits: list[bool]) -> None:
    assert text_hits(texts) == hits


def test_pi_text_controller_escalation_from_the_hits() -> None:
    # steer on the first hit, abort and resume on the second, abort after that
    ladder = iter(["steer", "abort+resume", "abort"])
    actions = [next(ladder, "abort") if hit else "ok" for hit in text_hits(["same words again here"] * 5)]
    assert actions == ["ok", "ok", "steer", "abort+resume", "abort"]


def test_text_rules_each_count() -> None:
    g = Detector()
    sentence = "I will now run the test suite again."
    chant = g.observe_text(" ".join([sentence] * 4))
    assert chant is not None and chant.signals.sentence_repeats == 4
    g2 = Detector()
    similar = [
        "Let me re-download the log and inspect the failing test",
        "Let me re-download the log and examine the failing assertion",
        "Let me re-download the log and inspect the failing assertion",
    ]
    sigs = [g2.observe_text(t).signals for t in similar]  # type: ignore[union-attr]
    assert [s.same_count for s in sigs] == [1, 1, 1]
    assert [s.similar_run for s in sigs] == [1, 2, 3]
    assert [s.similar_count for s in sigs] == [1, 2, 3]


def test_similar_count_needs_mutual_similarity() -> None:
    # the third message resembles each earlier one, but they do not resemble each other: no set of 3
    g = Detector()
    texts = ["one two three four five", "three four five six seven", "one two three four five six seven"]
    sigs = [g.observe_text(t).signals for t in texts]  # type: ignore[union-attr]
    assert sigs[2].similar_count == 2


def test_chunk_repeats_count_a_chanted_50_char_chunk() -> None:
    g = Detector()
    line = "the quick brown fox jumps over the lazy dog again!"  # 50 characters
    assert len(line) == 50
    o = g.observe_text("Intro text that is unique. " + line * 12)
    assert o is not None and o.signals.chunk_repeats == 12 and o.verdict is Level.halt
    fenced = Detector().observe_text("```\n" + line * 12 + "\n```")
    assert fenced is not None and fenced.signals.chunk_repeats == 0


def test_user_prompt_resets_every_counter() -> None:
    g = Detector()
    for _ in range(3):
        g.observe_call("bash", {"command": "make"})
        g.observe_result("error", True)
        g.observe_text("Trying again:")
    g.observe_user()
    s = g.observe_call("bash", {"command": "make"}).signals
    assert (s.streak, s.window_count, s.cycle2) == (1, 1, 0)
    assert g.observe_result("error", True).signals.fail_run == 1  # type: ignore[union-attr]
    assert g.observe_text("Trying again:").signals.same_count == 1  # type: ignore[union-attr]


def test_no_reset_keeps_counting_across_prompts() -> None:
    g = Detector(config=Config(reset_on_user=False))
    for _ in range(3):
        g.observe_call("bash", {"command": "make"})
    g.observe_user()
    assert g.observe_call("bash", {"command": "make"}).signals.streak == 4


@pytest.mark.parametrize(
    "first, second, same",
    [
        ({"path": "a", "n": 1}, {"n": 1, "path": "a"}, True),
        ({"o": {"x": 1, "y": {"b": 2, "a": 1}}}, {"o": {"y": {"a": 1, "b": 2}, "x": 1}}, True),
        ({"paths": ["a", "b"]}, {"paths": ["b", "a"]}, False),
    ],
    ids=["top-level keys", "nested keys", "array order"],
)
def test_key_order_is_irrelevant_array_order_is_not(first: dict, second: dict, same: bool) -> None:
    g = Detector()
    g.observe_call("read", first)
    assert (g.observe_call("read", second).signals.streak == 2) is same


def test_different_tools_with_the_same_arguments_differ() -> None:
    g = Detector()
    g.observe_call("read", {"path": "a"})
    s = g.observe_call("grep", {"path": "a"}).signals
    assert (s.streak, s.sim_prev, s.drift_run) == (1, None, 1)


def drift_runs(commands: list[str]) -> list[int]:
    g = Detector()
    return [g.observe_call("bash", {"command": c}).signals.drift_run for c in commands]


@pytest.mark.parametrize(
    "commands",
    [
        [
            "sleep 5 && curl -s http://ci/status",
            "sleep 10 && curl -s http://ci/status",
            "sleep 120 && curl -s http://ci/status",
        ],
        ["npm test 2>&1 | tail -20", "npm test 2>&1 | tail -50", "npm test 2>&1 | tail -100"],
        [
            "python -m pytest tests unit",
            "python -m pytest tests unit --verbose",
            "python -m pytest tests unit --verbose --color",
        ],
    ],
    ids=["sleep wrapper", "tail -N", "extra flag"],
)
def test_drift_by_small_argument_changes(commands: list[str]) -> None:
    assert drift_runs(commands) == [1, 2, 3]


def test_identical_calls_continue_a_drift_run() -> None:
    # the drift run counts identical and near-identical repeats alike (a run that mixes them is one loop); the streak
    # counts the identical ones
    assert drift_runs(["make all"] * 3) == [1, 2, 3]
    assert drift_runs(["make all", "make all", "make all --verbose", "make all --verbose"]) == [1, 2, 3, 4]
    assert drift_runs(["git status", "cargo build --release"]) == [1, 1]  # unrelated commands


def test_wrappers_that_do_not_change_the_action_make_a_streak() -> None:
    g = Detector()
    commands = [
        "sleep 5 && curl -s http://ci/status",
        "sleep 10 && curl -s http://ci/status",
        "curl -s http://ci/status",
    ]
    assert [g.observe_call("bash", {"command": c}).signals.streak for c in commands] == [1, 2, 3]
    g = Detector()
    descriptions = ["Run the tests", "Run the tests again", "Check whether the fix worked"]
    calls = [{"command": "npm test", "description": d, "timeout": 60_000 * i} for i, d in enumerate(descriptions)]
    assert [g.observe_call("Bash", c).signals.streak for c in calls] == [1, 2, 3]


def test_same_result_and_progress() -> None:
    g = Detector()
    g.observe_call("bash", {"command": "ci status"})
    first = g.observe_result("pending", False).signals  # type: ignore[union-attr]
    g.observe_call("bash", {"command": "ci status"})
    again = g.observe_result("pending", False).signals  # type: ignore[union-attr]
    g.observe_call("bash", {"command": "ci status"})
    moved = g.observe_result("passed", False).signals  # type: ignore[union-attr]
    assert (first.same_result, again.same_result, moved.same_result) == (None, True, False)
    assert (first.progress, again.progress, moved.progress) == (True, False, True)


def test_successful_near_identical_edits_are_progress() -> None:
    g = Detector()
    progress = []
    for i in range(3):
        g.observe_call("edit", {"path": "a.py", "old": f"x = {i}", "new": f"x = {i + 1}"})
        progress.append(g.observe_result("Successfully replaced text in a.py", False).signals.progress)  # type: ignore
    assert progress == [True, True, True]


def test_nested_calls_inside_one_script() -> None:
    g = Detector()
    g.observe_call("codemode", {"script": "for (...) await tools.read(...)"})
    g.observe_result(None, None)
    nested = []
    for path, err in (("a", False), ("a", False), ("b", True), ("b", True)):
        s = g.observe_call("read", {"path": path}, parent_call_id="script-1").signals
        nested.append(s.nested_repeat)
        assert (s.streak, s.window_count) == (0, 0)  # never in the top-level window
        g.observe_result("boom" if err else "content", err)
    assert nested == [1, 2, 1, 2]  # the 2nd identical call blocks, and so does an identical retry of a failure
    # another script starts clean; the top level never saw the nested reads
    assert g.observe_call("read", {"path": "a"}, parent_call_id="script-2").signals.nested_repeat == 1
    assert g.observe_call("read", {"path": "a"}).signals.window_count == 1


def test_nested_near_identical_and_script_memory() -> None:
    g = Detector()
    sig = [
        g.observe_call("bash", {"command": c}, parent_call_id="s").signals.nested_repeat
        for c in ("sleep 5 && curl -s http://x/status", "sleep 10 && curl -s http://x/status")
    ]
    assert sig == [1, 2]
    g2 = Detector(config=Config(script_memory=3))
    for c in ("x1", "x2", "x3", "x4"):
        g2.observe_call("t", {"c": c}, parent_call_id="s")
    assert g2.observe_call("t", {"c": "x1"}, parent_call_id="s").signals.nested_repeat == 1  # forgotten


def test_result_before_any_call_is_none_and_a_missing_result_is_no_progress() -> None:
    g = Detector()
    assert g.observe_result("x") is None
    g.observe_call("bash", {"command": "a"})
    s = g.observe_call("bash", {"command": "a"})  # the first one never got a result
    assert s.signals.streak == 2
    done = g.observe_result(None, None)
    assert done is not None and done.signals.progress is False and done.signals.same_result is None


def test_guard_api_as_documented() -> None:
    guard = Detector(Thresholds(warn=3, halt=5))
    verdicts = []
    for _ in range(5):
        seen = guard.observe_call("bash", {"command": "make"})
        verdicts.append(seen.verdict)
        done = guard.observe_result("make: *** [all] Error 2", is_error=True)
        assert done is not None and done.signals.fail_run == seen.signals.streak
    assert verdicts == [Level.ok, Level.ok, Level.warn, Level.warn, Level.halt]
    said = [guard.observe_text("Let me try the build once more:") for _ in range(3)]
    assert [s.verdict for s in said if s] == [Level.ok, Level.ok, Level.halt]
    guard.observe_user()
    assert guard.observe_call("bash", {"command": "make"}).verdict is Level.ok


def test_thresholds_choose_their_signals() -> None:
    calls = [("read", {"path": p}) for p in "abacada"]  # `a` recurs, never twice in a row
    plain, windowed = Detector(Thresholds(warn=3, halt=4)), Detector(Thresholds(warn=3, halt=4, window=10))
    assert {plain.observe_call(*c).verdict for c in calls} == {Level.ok}
    assert [windowed.observe_call(*c).verdict.value for c in calls][-1] == "halt"
    drifting = Detector(Thresholds(warn=3, halt=None, drift=True))
    last = [
        drifting.observe_call("bash", {"command": f"sleep {s} && curl -s http://ci/status"}).verdict
        for s in (30, 60, 90)
    ]
    assert last[-1] is Level.warn
    nested = Detector()
    nested.observe_call("read", {"path": "x"}, parent_call_id="s")
    assert nested.observe_call("read", {"path": "x"}, parent_call_id="s").verdict is Level.halt
