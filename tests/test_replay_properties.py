"""Invariants of the simulators on random sessions: every preset, any stream of prompts, messages and calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_replay_support import C, T, U, build

from analyzer.guards import HALT
from analyzer.guards.policies import PRESETS
from analyzer.guards.replay import replay_session, simulate

CALLS = [
    C("read", {"path": "a"}),
    C("read", {"path": "b"}),
    C("bash", {"command": "make"}, result="err", error=True),
    C("bash", {"command": "make"}, result="ok"),
    C("edit", {"path": "a", "old": "x", "new": "y"}),
    C("bash", {"command": "npm test -- --grep login flow"}),
    C("read", {"path": "a"}, result=None),
]
TEXTS = [None, "", "Let me check the build.", "Let me check the build again.", "Done."]

message = st.builds(
    lambda text, calls: T(text, calls, tokens=10), st.sampled_from(TEXTS), st.lists(st.sampled_from(CALLS), max_size=4)
)
events = st.lists(st.one_of(message, st.just(U)), max_size=40)
RESETTING = ["open-codesign", "gitagent", "gemini-cli", "opencode", "openhands"]  # all state per user prompt


@settings(max_examples=150, deadline=None)
@given(events)
def test_stops_are_one_per_run_and_land_on_halting_calls(evs: list) -> None:
    s = build(evs)
    for name, pol in PRESETS.items():
        sim = simulate(pol.guard(), s)
        assert len(sim.levels) == len(s.calls)
        runs = [st_.user_turn for st_ in sim.stops]
        assert len(runs) == len(set(runs)), name
        for stop in sim.stops:
            if stop.call is not None:
                assert stop.call.user_turn == stop.user_turn, name
                if stop.call.turn == stop.turn:  # halted at the call itself (not a text halt resolved forward)
                    assert sim.levels[stop.call.index] == HALT, name
        # Every warning has a place: the call it applies to (which then carries a warning or more), or the message.
        assert sim.first_warn_seen == (sim.warns > 0), name
        if sim.warns:
            assert (sim.first_warn is None) != (sim.first_warn_msg is None), name
        if sim.first_warn is not None:
            assert sim.levels[sim.first_warn.index] > 0, name
        if sim.first_warn_msg is not None:  # only a text rule warns at a message without calls
            assert name.startswith("pi-anti-doom-loop"), name
        again = simulate(pol.guard(), s)
        assert again.levels == sim.levels and again.actions == sim.actions, name


@settings(max_examples=100, deadline=None)
@given(events)
def test_guards_that_reset_per_prompt_judge_each_prompt_alone(evs: list) -> None:
    whole = build(evs)
    # Split at user prompts and replay each prompt's events on its own.
    chunks: list[list] = [[]]
    for ev in evs:
        if ev == U:
            chunks.append([U])
        else:
            chunks[-1].append(ev)
    for name in RESETTING:
        full = simulate(PRESETS[name].guard(), whole).levels
        parts: list[int] = []
        for chunk in chunks:
            parts.extend(simulate(PRESETS[name].guard(), build(chunk)).levels)
        assert full == parts, name


@settings(max_examples=100, deadline=None)
@given(events)
def test_saved_figures_never_exceed_what_came_after(evs: list) -> None:
    s = build(evs)
    total_tokens = sum(s.turn_tokens)
    for pol in PRESETS.values():
        r = replay_session(pol, s, None, False)
        (
            sid,
            _,
            calls,
            warns,
            fw,
            fw_turn,
            fw_seq,
            halts,
            hc,
            hseq,
            hut,
            act,
            reason,
            after_calls,
            after_tokens,
            after_cost,
            halt_on,
        ) = r.row
        assert calls == len(s.calls) and halt_on is None
        if halts == 0:
            assert hc is None and after_calls is None
            continue
        assert 0 <= after_calls <= len(s.calls) - (hseq + 1 if hseq is not None else 0)
        assert 0 <= after_tokens <= total_tokens
        assert len(r.halts) == halts == len({h[2] for h in r.halts})  # at most one halt per user turn
