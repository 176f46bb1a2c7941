"""Scoring stuck findings against a person's labels: precision, recall and healthy-kept, overall and by group.

One scorer for every truth a person writes down: the project's hand-labelled real transcripts
(``benchmarks/bench_realdata.py``, ``tests/test_realdata_score.py``) and a user's own labels. It knows no store and
no file format: a finding and a labelled episode meet on a *unit* (the transcript file, or the session) and overlap
when they share a call (``seq``) or, for text, a message.

The definitions (docs/detectors.md, "Measuring findings"):

- a **stuck finding** is a finding with ``stuck`` and at least ``MIN_REPEATS`` repeats, never a ``waiting`` one
  (polls of a process that still runs: not a loop);
- **precision** = stuck findings on a ``loop`` label / stuck findings on a ``loop`` or ``not_loop`` label (a stuck
  finding on no label is listed as unlabelled, not counted; one on ``unsure`` labels only counts nowhere);
- **recall** = ``loop`` episodes overlapped by a stuck finding / ``loop`` episodes, where ``loop`` labels of one unit
  that overlap (share a call or the message) are one episode: a person may record one loop twice, as a streak and as
  a failure (``loop_episodes``), and it is still one loop to find;
- **healthy-kept** = ``not_loop`` labels with no stuck finding on them / ``not_loop`` labels;
- ``unsure`` counts nowhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from analyzer.detect.rules import MIN_REPEATS, WAITING

LOOP, NOT_LOOP, UNSURE = "loop", "not_loop", "unsure"
LABELS = (LOOP, NOT_LOOP, UNSURE)


@dataclass(frozen=True)
class Episode:
    """A labelled span: ``first``..``last`` call seqs (inclusive) and/or one message, in one unit."""

    unit: str
    label: str
    first: int | None = None
    last: int | None = None
    message: int | None = None
    kind: str = ""
    groups: Mapping[str, Any] = field(default_factory=dict)
    record: Any = None  # the label as read, for listing it back

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"label must be one of {LABELS}, got {self.label!r}")


@dataclass(frozen=True)
class Found:
    """A finding as the scorer sees it: where it is, the calls and messages it covers, and whether it is stuck."""

    unit: str
    finding_id: str
    kind: str
    repeats: int
    stuck: bool
    seqs: frozenset[int] = frozenset()
    messages: frozenset[int] = frozenset()
    groups: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""

    @property
    def counts(self) -> bool:
        """A stuck finding in the sense of the definitions: stuck, with at least ``MIN_REPEATS`` repeats, and not a
        wait (a ``waiting`` finding is never stuck; a store written otherwise does not make it one)."""
        return self.stuck and self.repeats >= MIN_REPEATS and self.kind != WAITING


def overlaps(found: Found, episode: Episode) -> bool:
    """They share a call, or (for text) the labelled message."""
    if found.unit != episode.unit:
        return False
    if episode.first is not None and episode.last is not None:
        if any(episode.first <= s <= episode.last for s in found.seqs):
            return True
    return episode.message is not None and episode.message in found.messages


@dataclass
class Score:
    """The three figures of one group, with what lies behind them."""

    on_loop: int = 0  # stuck findings on a loop label
    on_labels: int = 0  # stuck findings on a loop or not_loop label
    loops: int = 0
    loops_found: int = 0
    healthy: int = 0
    healthy_kept: int = 0
    false: list[tuple[Found, list[Episode]]] = field(default_factory=list)  # stuck findings on not_loop labels only
    unlabelled: list[Found] = field(default_factory=list)
    missed: list[Episode] = field(default_factory=list)
    flagged_healthy: list[Episode] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.on_loop / self.on_labels if self.on_labels else None

    @property
    def recall(self) -> float | None:
        return self.loops_found / self.loops if self.loops else None

    @property
    def healthy_kept_rate(self) -> float | None:
        return self.healthy_kept / self.healthy if self.healthy else None


GroupBy = Callable[[Mapping[str, Any], str], Iterable[str]]
"""Given an item's groups and its kind, the keys of the groups the item counts in."""


def by_fields(*names: str) -> GroupBy:
    """Count each item in ``"all"`` and in the group of each named field (``"format=claude_code"``); ``kind`` is the
    finding's kind for precision and the label's kind for recall. A field whose value is a tuple (the tools of a
    span) puts the item in the group of each of its values."""

    def keys(groups: Mapping[str, Any], kind: str) -> Iterable[str]:
        yield "all"
        for n in names:
            value = kind if n == "kind" else groups.get(n)
            if value is None:
                continue
            for v in value if isinstance(value, tuple) else (value,):
                yield f"{n}={v}"

    return keys


def _meet(a: Episode, b: Episode) -> bool:
    """Two labels of one unit cover a common call or the same message."""
    if a.unit != b.unit:
        return False
    if None not in (a.first, a.last, b.first, b.last) and a.first <= b.last and b.first <= a.last:  # type: ignore[operator]
        return True
    return a.message is not None and a.message == b.message


def loop_episodes(labels: Iterable[Episode]) -> list[list[Episode]]:
    """The ``loop`` labels grouped into loop episodes: labels of one unit that overlap, directly or through another
    label, are one episode (in the order of their first label)."""
    groups: list[list[Episode]] = []
    by_unit: dict[str, list[list[Episode]]] = defaultdict(list)
    for e in labels:
        if e.label != LOOP:
            continue
        touching = [g for g in by_unit[e.unit] if any(_meet(e, x) for x in g)]
        if not touching:
            g = [e]
            groups.append(g)
            by_unit[e.unit].append(g)
            continue
        keep = touching[0]
        keep.append(e)
        for g in touching[1:]:  # e joins episodes that were apart until now
            keep.extend(g)
            by_unit[e.unit].remove(g)
            groups.remove(g)
    return groups


def score(found: Iterable[Found], episodes: Iterable[Episode], group_by: GroupBy | None = None) -> dict[str, Score]:
    """Score the stuck findings among ``found`` against ``episodes``, per group key of ``group_by``."""
    group_by = group_by or by_fields()
    stuck = [f for f in found if f.counts]
    eps = list(episodes)
    by_unit: dict[str, list[Episode]] = defaultdict(list)
    for e in eps:
        by_unit[e.unit].append(e)
    hits_of: dict[int, list[Found]] = defaultdict(list)  # id(episode) -> stuck findings on it
    out: dict[str, Score] = defaultdict(Score)
    for f in stuck:
        hits = [e for e in by_unit.get(f.unit, ()) if overlaps(f, e)]
        for e in hits:
            hits_of[id(e)].append(f)
        labels = {e.label for e in hits}
        for key in group_by(f.groups, f.kind):
            s = out[key]
            if LOOP in labels:
                s.on_loop += 1
                s.on_labels += 1
            elif NOT_LOOP in labels:
                s.on_labels += 1
                s.false.append((f, [e for e in hits if e.label == NOT_LOOP]))
            elif not hits:
                s.unlabelled.append(f)
    for group in loop_episodes(eps):
        hit = any(hits_of.get(id(e)) for e in group)
        keys = dict.fromkeys(k for e in group for k in group_by(e.groups, e.kind))  # each group once, in order
        for key in keys:
            s = out[key]
            s.loops += 1
            if hit:
                s.loops_found += 1
            else:
                s.missed.append(group[0])
    for e in eps:
        hit = bool(hits_of.get(id(e)))
        for key in group_by(e.groups, e.kind):
            s = out[key]
            if e.label == NOT_LOOP:
                s.healthy += 1
                if hit:
                    s.flagged_healthy.append(e)
                else:
                    s.healthy_kept += 1
    return dict(out)


def ratio(value: float | None) -> str:
    """A figure as the tables print it: two decimals, or a dash when nothing stands behind it."""
    return "–" if value is None else f"{value:.2f}"


def table(scores: Mapping[str, Score], keys: Iterable[str], title: str = "group") -> str:
    """A Markdown table of the figures of ``keys`` (in that order), with the counts behind each ratio."""
    lines = [
        f"| {title} | stuck findings on labels | on a loop | precision | loops | found | recall | "
        "healthy | kept | healthy-kept |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in keys:
        s = scores.get(k, Score())
        lines.append(
            f"| {k} | {s.on_labels} | {s.on_loop} | {ratio(s.precision)} | {s.loops} | {s.loops_found} | "
            f"{ratio(s.recall)} | {s.healthy} | {s.healthy_kept} | {ratio(s.healthy_kept_rate)} |"
        )
    return "\n".join(lines)
