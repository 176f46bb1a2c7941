"""The scorer's definitions on small hand-made cases: what counts, what is listed, what counts nowhere."""

from __future__ import annotations

from analyzer.evaluate.score import Episode, Found, by_fields, score, table


def found(unit: str, seqs: set[int], stuck: bool = True, repeats: int = 3, kind: str = "streak") -> Found:
    return Found(unit, f"f{min(seqs)}", kind, repeats, stuck, frozenset(seqs), groups={"format": "pi"})


def test_the_three_figures_follow_their_definitions() -> None:
    eps = [
        Episode("a", "loop", 1, 4, groups={"format": "pi"}),  # found
        Episode("a", "loop", 10, 12, groups={"format": "pi"}),  # missed
        Episode("a", "not_loop", 20, 25, groups={"format": "pi"}),  # a stuck finding on it: not kept
        Episode("a", "not_loop", 30, 31, groups={"format": "pi"}),  # kept
        Episode("a", "unsure", 40, 45, groups={"format": "pi"}),  # counts nowhere
    ]
    fs = [
        found("a", {2, 3, 4}),  # on a loop
        found("a", {21, 22, 23}),  # on a not_loop
        found("a", {41, 42, 43}),  # on unsure only: counts nowhere
        found("a", {50, 51, 52}),  # on no label: listed, not counted
        found("a", {30, 31}, stuck=False),  # not stuck: not a stuck finding
        found("a", {11, 12}, repeats=2),  # 2 repeats: not a stuck finding
    ]
    s = score(fs, eps)["all"]
    assert (s.on_labels, s.on_loop, s.precision) == (2, 1, 0.5)
    assert (s.loops, s.loops_found, s.recall) == (2, 1, 0.5)
    assert (s.healthy, s.healthy_kept, s.healthy_kept_rate) == (2, 1, 0.5)
    assert [f.seqs for f in s.unlabelled] == [frozenset({50, 51, 52})]
    assert [e.first for e in s.missed] == [10] and [e.first for e in s.flagged_healthy] == [20]


def test_a_finding_on_a_loop_and_a_not_loop_counts_as_on_a_loop_and_units_never_meet() -> None:
    eps = [Episode("a", "loop", 1, 2), Episode("a", "not_loop", 3, 4), Episode("b", "loop", 1, 4)]
    s = score([found("a", {1, 2, 3, 4})], eps)["all"]
    assert (s.on_labels, s.on_loop) == (1, 1)
    assert (s.loops, s.loops_found) == (2, 1)  # unit b's loop shares seqs, not the unit


def test_text_labels_meet_on_the_message_and_groups_split_the_counts() -> None:
    text = Found("a", "t", "text", 4, True, messages=frozenset({7}), groups={"format": "codex"})
    eps = [Episode("a", "loop", message=7, kind="text", groups={"format": "codex"})]
    scores = score([text], eps, by_fields("format", "kind"))
    assert scores["format=codex"].recall == 1.0 and scores["kind=text"].precision == 1.0
    assert "| format=codex | 1 | 1 | 1.00 | 1 | 1 | 1.00 | 0 | 0 | – |" in table(scores, ["format=codex"])


def test_an_item_of_several_tools_counts_in_each_tool_group() -> None:
    """A cycle of Read and Bash counts in tool=Read and tool=Bash; a label's tools are those of its calls."""
    cycle = Found("a", "c", "cycle", 4, True, frozenset({1, 2, 3, 4}), groups={"tool": ("Read", "Bash")})
    eps = [Episode("a", "loop", 1, 4, groups={"tool": ("Read", "Bash")}), Episode("a", "loop", 9, 9)]
    scores = score([cycle], eps, by_fields("tool"))
    assert scores["tool=Read"].precision == 1.0 and scores["tool=Bash"].recall == 1.0
    assert (scores["all"].loops, scores["all"].loops_found, scores["tool=Bash"].loops) == (2, 1, 1)


def test_a_waiting_finding_is_never_a_stuck_finding() -> None:
    # polls of a running process: not a loop, so not counted even when a store marked it stuck
    eps = [Episode("a", "not_loop", 1, 5, kind="waiting", groups={"format": "pi"})]
    s = score([found("a", {1, 2, 3}, stuck=False, kind="waiting"), found("a", {4, 5}, kind="waiting")], eps)["all"]
    assert (s.on_labels, s.healthy, s.healthy_kept) == (0, 1, 1) and not s.unlabelled


def test_a_loop_label_of_kind_waiting_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from analyzer.errors import UsageError
    from analyzer.evaluate.labels import read_labels

    ok = tmp_path / "ok.json"
    ok.write_text('[{"session_id": "s", "label": "not_loop", "kind": "waiting", "first_seq": 0, "last_seq": 3}]')
    assert read_labels(ok)[0].kind == "waiting"
    bad = tmp_path / "bad.json"
    bad.write_text('[{"session_id": "s", "label": "loop", "kind": "waiting", "first_seq": 0, "last_seq": 3}]')
    with pytest.raises(UsageError, match="a wait is not a loop"):
        read_labels(bad)


def test_one_loop_recorded_twice_is_one_episode_to_find() -> None:
    """A loop labelled as a streak and again as a failure over the same calls is one loop episode: found once when
    a stuck finding is on either record, missed once when none is; labels that do not overlap stay two episodes."""
    twice = [
        Episode("u", "loop", 3, 8, kind="streak", groups={"format": "x"}),
        Episode("u", "loop", 4, 9, kind="failure", groups={"format": "x"}),
    ]
    s = score([found("u", {9})], twice, by_fields("format", "kind"))
    assert (s["all"].loops, s["all"].loops_found) == (1, 1)
    assert (s["format=x"].loops, s["kind=streak"].loops, s["kind=failure"].loops) == (1, 1, 1)
    s = score([], twice)["all"]
    assert (s.loops, s.loops_found, len(s.missed)) == (1, 0, 1)
    chained = twice + [Episode("u", "loop", 9, 12), Episode("u", "loop", 20, 22), Episode("v", "loop", 3, 8)]
    s = score([found("u", {21})], chained)["all"]
    assert (s.loops, s.loops_found) == (3, 1)  # 3-12 (three labels linked by overlaps), 20-22, and v's
