"""Where replay puts each warning and halt: every warning has a place (its call, or its message), and the per-session
row and the per-call rows (``--calls``) of one replay agree on which call is the halt and what it saves."""

from __future__ import annotations

from test_replay_support import C, T, U, build, policy

from analyzer.guards.replay import HALT_COLUMNS, SESSION_COLUMNS, VERDICT_COLUMNS, replay_session

LOOP_TEXT = "Let me fetch the merge ref:"


def _rows(pol, events):
    s = build(events)
    r = replay_session(pol, s, None, False, verdicts=True)
    row = dict(zip(SESSION_COLUMNS, r.row))
    return row, [dict(zip(HALT_COLUMNS, h)) for h in r.halts], [dict(zip(VERDICT_COLUMNS, v)) for v in r.verdicts]


def test_a_text_warning_at_a_message_without_calls_keeps_its_place_across_a_prompt() -> None:
    # The third identical text steers (a warning) at a message that issued no call; the user prompts next.
    events = [U, T(LOOP_TEXT), T(LOOP_TEXT), T(LOOP_TEXT), U, C("bash", {"command": "ls"}), T(LOOP_TEXT), T(LOOP_TEXT)]
    row, halts, verdicts = _rows(policy("pi-anti-doom-loop"), events)
    assert row["warns"] == 1
    assert row["first_warn_call_id"] is None  # the warning applies to no call ...
    assert row["first_warn_turn_id"] == "a3"  # ... but to the message that carried the loop
    assert row["first_warn_seq"] == 0  # and sits before the next call recorded
    assert [(v["at"], v["turn_id"], v["seq"], v["call_id"], v["level"], v["action"]) for v in verdicts] == [
        ("message", "a3", 0, None, "warn", "steer")
    ]
    assert halts == [] and row["halts"] == 0


def test_a_warning_on_a_call_names_the_call_and_its_message() -> None:
    grep = C("bash", {"command": "grep foo"})
    row, _, verdicts = _rows(policy("pi-anti-doom-loop"), [U, grep, grep, T(None, [grep])])
    assert (row["first_warn_call_id"], row["first_warn_turn_id"], row["first_warn_seq"]) == ("c2", "a3", 2)
    assert [(v["at"], v["call_id"], v["turn_id"]) for v in verdicts] == [("call", "c2", "a3")]


def test_gitagent_max_turns_on_a_two_call_turn_session_and_call_rows_agree() -> None:
    # maxTurns 3 trips on the result of the first call of the third tool-requesting turn; both calls of that turn
    # say terminate, the batch is all-terminate, so the run stops after its second call.
    events = [
        U,
        C("read", {"path": "a"}),
        C("read", {"path": "b"}),
        T(None, [C("read", {"path": "c"}), C("read", {"path": "d"})]),
        C("read", {"path": "e"}),
        C("read", {"path": "f"}),
        U,
        C("read", {"path": "g"}),
    ]
    row, halts, verdicts = _rows(policy("gitagent", max_turns=3), events)
    halted = [v for v in verdicts if v["level"] == "halt"]
    assert [v["call_id"] for v in halted][:2] == ["c2", "c3"]  # the guard's verdicts: both calls terminate
    marked = [v for v in verdicts if v["halt"]]
    assert len(marked) == 1 == row["halts"] == len(halts)
    (h,) = marked
    assert (h["call_id"], h["seq"]) == (row["halt_call_id"], row["halt_seq"]) == ("c3", 3)
    assert (h["calls_after_halt"], h["tokens_after_halt"]) == (row["calls_after_halt"], row["tokens_after_halt"])
    assert row["calls_after_halt"] == 2  # c4, c5; the next prompt's call is another run
    assert (halts[0]["halt_seq"], halts[0]["calls_after_halt"]) == (3, 2)
    assert all(not v["halt"] and v["calls_after_halt"] is None for v in verdicts if v is not h)


def test_a_text_halt_at_a_message_without_calls_is_one_halt_in_both_views() -> None:
    grep = C("bash", {"command": "grep foo"})
    events = [U, T(LOOP_TEXT), T(LOOP_TEXT), T(LOOP_TEXT), T(LOOP_TEXT), grep, C("bash", {"command": "ls"})]
    row, halts, verdicts = _rows(policy("pi-anti-doom-loop"), events)
    marked = [v for v in verdicts if v["halt"]]
    assert len(marked) == 1 and marked[0]["at"] == "message" and marked[0]["turn_id"] == "a4"
    assert (marked[0]["call_id"], marked[0]["seq"]) == (row["halt_call_id"], row["halt_seq"]) == ("c0", 0)
    assert marked[0]["calls_after_halt"] == row["calls_after_halt"] == halts[0]["calls_after_halt"] == 1


def test_the_report_counts_a_session_warned_at_a_message_as_warned() -> None:
    import polars as pl

    from analyzer.guards.replay import Corpus, replay
    from reports.pages import preset_table

    events = [U, T(LOOP_TEXT), T(LOOP_TEXT), T(LOOP_TEXT), U, C("bash", {"command": "ls"})]
    rep = replay(Corpus([build(events)]), [policy("pi-anti-doom-loop")], workers=1)
    table = preset_table(rep.sessions)
    assert table.rows[0][2] == "1"  # Warned
    assert rep.sessions.filter(pl.col("first_warn_turn_id") == "a3").height == 1
