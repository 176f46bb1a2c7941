"""pi-anti-doom-loop twice: ``pi-anti-doom-loop@0.0.7``, exactly the published code, and ``pi-anti-doom-loop``, the seed
README's behaviour (near-identical calls, over words that keep paths, patterns and file names).

The published cases are taken from the guard's own test suite, repository irfndi/pi-anti-doom-loop at tag v0.0.7,
commit a2e33d96fdacc4e76051dc6aefc9b85f188c0d4d: ``tests/unit.test.ts`` (describe blocks "identical-call detection",
"consecutive-failure detection", "failure-rate detection", "tool exclusion", "verbatim text detection",
"near-identical text (tokenSimilarity)") and ``tests/integration.test.ts`` ("controller: tool-call lifecycle",
"controller: steer → abort → bounded resume"), driven here event by event through the replay instead of through
``LoopDetector`` / ``createController``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_replay_support import C, T, U, actions, build, policy

from analyzer.guards.policies import PRESETS, policies_frame, resolve
from analyzer.guards.replay import simulate

PUB = "pi-anti-doom-loop@0.0.7"
SEED = "pi-anti-doom-loop"


def bash(command: str, result: str = "ok", error: bool = False) -> C:
    return C("bash", {"command": command}, result=result, error=error)


def read(path: str) -> C:
    return C("read", {"path": path})


def reasons(pol, events) -> list[str | None]:  # type: ignore[no-untyped-def]
    pol = PRESETS[pol] if isinstance(pol, str) else pol
    return simulate(pol.guard(), build(events)).reasons


def text_actions(pol, events) -> list[str]:  # type: ignore[no-untyped-def]
    """The action of each text verdict, at messages without calls, in order."""
    pol = PRESETS[pol] if isinstance(pol, str) else pol
    return [v.action for _, v in simulate(pol.guard(), build(events)).msg_verdicts]


# -- unit.test.ts: identical-call detection -------------------------------------------------------------------------
def test_blocks_the_3rd_identical_call_escalates_on_reissue() -> None:
    events = [U] + [bash("grep foo")] * 4
    assert actions(PUB, events) == ["ok", "ok", "block", "abort"]
    assert "identical arguments 3 times" in (reasons(PUB, events)[2] or "")


def test_does_not_block_different_arguments() -> None:
    events = [U] + [read(p) for p in ("a.ts", "b.ts", "c.ts", "d.ts", "a.ts", "a.ts")]
    assert actions(PUB, events) == ["ok"] * 5 + ["block"]


def test_ignores_key_order_in_arguments() -> None:
    events = [
        U,
        C("read", {"a": 1, "b": {"c": 2}}),
        C("read", {"b": {"c": 2}, "a": 1}),
        C("read", {"a": 1, "b": {"c": 2}}),
    ]
    assert actions(PUB, events) == ["ok", "ok", "block"]


def test_evicts_stale_repeats_beyond_the_window() -> None:
    events = [U] + [bash(f"cmd {i}") for i in range(10)] + [bash("cmd 0")]
    assert actions(PUB, events)[-1] == "ok"
    # and an old repeat pushed out by 10 different calls no longer counts
    events = [U, bash("cmd 0"), bash("cmd 0")] + [bash(f"other {i}") for i in range(10)] + [bash("cmd 0")]
    assert actions(PUB, events)[-1] == "ok"


# -- unit.test.ts: consecutive failures, failure rate, exclusion -------------------------------------------------------
def test_blocks_after_fail_threshold_consecutive_same_tool_errors() -> None:
    events = [U] + [bash(f"try {i}", "boom", True) for i in range(3)] + [bash("npm test")]
    assert actions(PUB, events)[-1] == "block"
    assert "failed 3 consecutive times" in (reasons(PUB, events)[-1] or "")


def test_an_interleaved_success_or_another_tools_failure_breaks_the_streak() -> None:
    err, ok = (lambda i: bash(f"e{i}", "boom", True)), (lambda i: bash(f"o{i}"))
    assert actions(PUB, [U, err(1), ok(2), err(3), err(4), bash("npm test")])[-1] == "ok"
    events = [U, err(1), C("read", {"path": "x"}, result="no such file", error=True), err(3), bash("npm test")]
    assert actions(PUB, events)[-1] == "ok"


def test_blocks_on_a_failure_rate_threshold_with_interleaved_successes() -> None:
    pol = policy(PUB, fail_rate=0.6, fail_rate_min=3)
    events = [U, bash("a", "boom", True), bash("b"), bash("c", "boom", True), bash("npm test")]
    assert actions(pol, events)[-1] == "block"
    assert "failed 2 of 3 calls in the window" in (reasons(pol, events)[-1] or "")
    assert actions(policy(PUB, fail_rate=0.8, fail_rate_min=3), events)[-1] == "ok"  # 67% < 80%
    assert actions(pol, events[:3] + [bash("npm test")])[-1] == "ok"  # 2 calls < fail_rate_min


def test_excluded_tools_never_block_and_never_enter_the_window() -> None:
    pol = policy(PUB, exclude_tools=("bash",))
    assert actions(pol, [U] + [bash("grep foo")] * 5) == ["ok"] * 5
    assert actions(pol, [U, read("a"), read("a"), read("a")]) == ["ok", "ok", "block"]


# -- integration.test.ts: the controller -------------------------------------------------------------------------------
def test_blocked_calls_result_is_not_counted_and_a_reissue_still_blocks() -> None:
    events = [U, bash("grep foo"), bash("grep foo"), bash("grep foo", "boom", True), bash("other"), bash("grep foo")]
    assert actions(PUB, events) == ["ok", "ok", "block", "ok", "abort"]


def test_three_different_failing_commands_block_the_next_by_the_failure_streak() -> None:
    events = [U] + [bash(c, "boom", True) for c in ("npm test", "npm run lint", "npm run build")] + [bash("npm test")]
    assert actions(PUB, events)[-1] == "block"
    assert "failed 3 consecutive times" in (reasons(PUB, events)[-1] or "")


LOOP = "Let me fetch the merge ref:"


def test_text_steers_then_aborts_with_resume_then_aborts() -> None:
    assert text_actions(PUB, [U] + [T(LOOP)] * 5) == ["steer", "abort+resume", "abort"]


def test_a_prompt_rearms_the_steer_but_keeps_the_resume_budget() -> None:
    events = [U] + [T(LOOP)] * 4 + [U] + [T(LOOP)] * 4
    assert text_actions(PUB, events) == ["steer", "abort+resume", "steer", "abort"]


def test_near_identical_text_streak_and_window() -> None:
    variants = [
        "Let me re-download the log and inspect the failing test",
        "Let me re-download the log and examine the failing assertion",
        "Let me re-download the run log and inspect the failing test's assertion",
    ]
    assert text_actions(PUB, [U] + [T(v) for v in variants]) == ["steer"]
    spread = [variants[0], variants[1], "The build passed and all tests are green now", variants[0], variants[1]]
    assert text_actions(PUB, [U] + [T(v) for v in spread]) == ["steer"]


# -- published vs seed -------------------------------------------------------------------------------------------
SED_A = bash("sed -n '1,200p' src/a.py")
SED_B = bash("sed -n '1,200p' src/b.py")
SED_C = bash("sed -n '1,200p' src/c.py")


def test_published_code_has_no_near_identical_call_rule() -> None:
    assert actions(PUB, [U, SED_A, SED_B, SED_C]) == ["ok", "ok", "ok"]
    drift = [bash(f"sleep {s} && curl -s http://ci/api/status") for s in (5, 10, 30)]
    assert actions(PUB, [U] + drift) == ["ok", "ok", "ok"]


def test_seed_near_identical_rule_keeps_paths_so_calls_on_different_files_never_match() -> None:
    # The text rule's words would reduce all three to {bash?, sed}: the call rule keeps the paths and the pattern.
    assert actions(SEED, [U, SED_A, SED_B, SED_C]) == ["ok", "ok", "ok"]
    assert actions(
        SEED,
        [
            U,
            C("grep", {"pattern": "foo.*bar", "path": "src/"}),
            C("grep", {"pattern": "baz.*qux", "path": "src/"}),
            C("grep", {"pattern": "login(", "path": "src/"}),
        ],
    ) == ["ok", "ok", "ok"]


def test_seed_near_identical_rule_still_catches_a_drifting_retry_on_the_same_object() -> None:
    drift = [bash(f"sleep {s} && curl -s http://ci/api/status") for s in (5, 10, 30)]
    assert actions(SEED, [U] + drift) == ["ok", "ok", "block"]
    why = reasons(SEED, [U] + drift)[2] or ""
    assert why.startswith("near-identical: 'bash' called with the same or near-identical arguments 3 times")
    assert "1 identical" in why and "shared-token score 1.00 with call c1" in why


def test_block_reasons_name_the_rule_that_fired() -> None:
    assert (reasons(SEED, [U] + [bash("grep foo")] * 3)[2] or "").startswith(
        "exact repeat: 'bash' called with the same arguments 3 times"
    )
    fails = [U] + [bash(f"t{i}", "boom", True) for i in range(3)] + [bash("npm test")]
    assert (reasons(SEED, fails)[-1] or "").startswith("failure run: 'bash' failed 3 consecutive times")
    events = [U, T(LOOP), T(LOOP), T(LOOP, [bash("ls")])]
    assert (reasons(SEED, events)[0] or "").startswith("text: ")
    # Calls with different arguments never get the exact-repeat wording.
    near = reasons(SEED, [U] + [bash(f"sleep {s} && curl -s http://ci/api/status") for s in (5, 10, 30)])[2] or ""
    assert "same arguments" not in near


def test_policies_lists_both_and_says_which_is_which() -> None:
    df = policies_frame(resolve(["all"]))
    rows = {r["policy"]: r for r in df.to_dicts()}
    assert "exactly as published in v0.0.7" in rows[PUB]["description"]
    assert "No near-identical call rule" in rows[PUB]["description"]
    assert "seed README" in rows[SEED]["description"] and PUB in rows[SEED]["description"]
    assert [p.name for p in resolve(["pi@0.0.7", "pi-anti-doom-loop@seed"])] == [PUB, SEED]


CALLS = [
    read("a"),
    read("b"),
    bash("make", "err", True),
    bash("make"),
    bash("sed -n '1,200p' src/a.py"),
    bash("sed -n '1,200p' src/b.py"),
    C("edit", {"path": "a", "old": "x", "new": "y"}),
    bash("npm test -- --grep login flow"),
    C("read", {"path": "a"}, result=None),
]
TEXTS = [None, "", "Let me check the build.", "Let me check the build again.", "Done."]
message = st.builds(
    lambda text, calls: T(text, calls, tokens=10), st.sampled_from(TEXTS), st.lists(st.sampled_from(CALLS), max_size=4)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(message, st.just(U)), max_size=40))
def test_published_equals_the_seed_without_near_identical_calls(evs: list) -> None:
    # Without nested calls or loop_ack, the seed engine with near_identical_calls=false is the published code.
    s = build(evs)
    pub = simulate(PRESETS[PUB].guard(), s)
    seed = simulate(policy(SEED, near_identical_calls=False).guard(), s)
    assert pub.levels == seed.levels and pub.actions == seed.actions
    assert [(m.turn, v.action) for m, v in pub.msg_verdicts] == [(m.turn, v.action) for m, v in seed.msg_verdicts]


def test_call_words_gives_the_object_words_with_the_words() -> None:
    # One pass finds both: the words compared, and the object words that must match for a call to be near-identical.
    from analyzer.guards.engines.pi import call_words

    words, objects = call_words("sed -n '1,200p' src/a.py && grep -r Foo")
    assert words == {"sed", "1,200p", "src/a.py", "grep", "foo"}
    assert objects == {"1,200p", "src/a.py"}
