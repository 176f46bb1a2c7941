"""``loopscope eval``: the findings and the guards of a store measured on a person's labels.

``evaluate_store`` reads the labels files (``labels``), resolves them against the store, scores the stuck findings of
the labelled sessions on them (``score``: precision, recall, healthy-kept, overall and per group), lists every
disagreement, and scores the guards' halts on the same labels (``guard_scorecard``). It runs no guard itself: the
caller hands it the replay's halts of the labelled sessions (``HaltsOf``), so this package stays below the guards.

The guard scorecard, per policy (halts as ``loopscope replay`` finds them: the first halt of each run, and what it
saves: the counted usage of the assistant messages after the halting one, up to the next user prompt):

- **loops halted**: ``loop`` labels with calls that a halt lands in (the halting call lies in the span);
  **median calls to halt**: over those, the halting call's seq minus the span's first seq, plus one (the first halt in
  the span);
- **false halts**: halts on a ``not_loop`` span or anywhere in a ``loop-free`` session (and not on a ``loop`` span);
  **healthy halted**: the ``not_loop`` and ``loop-free`` labels such a halt lands in;
- **tokens / dollars saved**: what the halts on ``loop`` spans save; **tokens / dollars cut**: what the false halts
  would have cut short (healthy work);
- **other halts**: halts in labelled sessions on calls no label covers: counted nowhere.
"""

from __future__ import annotations

import shlex
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.detect.rules import MIN_REPEATS
from analyzer.errors import UsageError
from analyzer.evaluate.found import read_found
from analyzer.evaluate.labels import (
    LOOP_FREE,
    LabelFile,
    Resolution,
    Resolved,
    read_label_file,
    resolve,
    session_key,
)
from analyzer.evaluate.score import LOOP, NOT_LOOP, UNSURE, Episode, Found, Score, by_fields, overlaps, score
from analyzer.store.filters import SessionFilter

if TYPE_CHECKING:
    import duckdb

GROUPS = ("format", "kind", "tool")  # what ``--by`` may name
HaltsOf = Callable[[Sequence[str]], tuple[list[str], pl.DataFrame]]
"""The labelled sessions' ids -> the policies replayed (names, in order) and their halts (``replay.HALT_COLUMNS``:
``session_id``, ``policy``, ``halt_seq``, ``tokens_after_halt``, ``cost_after_halt_usd``)."""

FIGURE_COLUMNS: dict[str, Any] = {
    "group": pl.String,
    "value": pl.String,
    "stuck_on_labels": pl.Int64,
    "on_loop": pl.Int64,
    "precision": pl.Float64,
    "loops": pl.Int64,
    "found": pl.Int64,
    "recall": pl.Float64,
    "healthy": pl.Int64,
    "kept": pl.Int64,
    "healthy_kept": pl.Float64,
    "false_findings": pl.Int64,
    "missed": pl.Int64,
    "unlabelled": pl.Int64,
}
FIGURE_TABLE_COLUMNS = [
    "group",
    "value",
    "stuck_on_labels",
    "on_loop",
    "precision",
    "loops",
    "found",
    "recall",
    "healthy",
    "kept",
    "healthy_kept",
]
FALSE, FLAGGED, MISSED, UNLABELLED = "false finding", "healthy flagged", "missed loop", "unlabelled"
DISAGREEMENT_COLUMNS: dict[str, Any] = {
    "disagreement": pl.String,
    "session_id": pl.String,
    "session_key": pl.String,
    "format": pl.String,
    "kind": pl.String,
    "calls": pl.String,
    "first_seq": pl.Int64,
    "last_seq": pl.Int64,
    "message_index": pl.Int64,
    "finding_id": pl.String,
    "repeats": pl.Int64,
    "label": pl.String,
    "labels_file": pl.String,
    "line": pl.Int64,
    "note": pl.String,
    "why": pl.String,
    "show": pl.String,
}
DISAGREEMENT_TABLE_COLUMNS = ["disagreement", "session_id", "kind", "calls", "label", "note", "show"]
GUARD_COLUMNS: dict[str, Any] = {
    "policy": pl.String,
    "loops": pl.Int64,
    "loops_halted": pl.Int64,
    "halted_share": pl.Float64,
    "median_calls_to_halt": pl.Float64,
    "healthy": pl.Int64,
    "healthy_halted": pl.Int64,
    "false_halts": pl.Int64,
    "false_halt_sessions": pl.Int64,
    "other_halts": pl.Int64,
    "tokens_saved": pl.Int64,
    "dollars_saved": pl.Float64,
    "tokens_cut": pl.Int64,
    "dollars_cut": pl.Float64,
}
GUARD_TABLE_COLUMNS = [
    "policy",
    "loops",
    "loops_halted",
    "median_calls_to_halt",
    "healthy",
    "false_halts",
    "tokens_saved",
    "dollars_saved",
]


@dataclass
class Evaluation:
    """What ``loopscope eval`` prints: the labels used, the figures per group, the disagreements, the guard
    scorecard (None when no guard was replayed) and notes."""

    store_id: str
    files: list[LabelFile]
    labels: Resolution
    by: tuple[str, ...]
    scores: dict[str, Score]
    figures: pl.DataFrame
    disagreements: pl.DataFrame
    guards: pl.DataFrame | None
    other_stuck: tuple[int, int] = (0, 0)  # stuck findings in scope in sessions without labels: (findings, sessions)
    notes: list[str] = field(default_factory=list)

    @property
    def overall(self) -> Score:
        return self.scores.get("all", Score())

    def headline(self) -> str:
        """One line: the three figures with the counts behind them."""
        s = self.overall

        def r(v: float | None) -> str:
            return "–" if v is None else f"{v:.2f}"

        return (
            f"precision {r(s.precision)} ({s.on_loop:,} of {s.on_labels:,} stuck findings on labels), "
            f"recall {r(s.recall)} ({s.loops_found:,} of {s.loops:,} loops), "
            f"healthy-kept {r(s.healthy_kept_rate)} ({s.healthy_kept:,} of {s.healthy:,} healthy labels)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "store_id": self.store_id,
            "labels": {
                "files": [{"path": f.path, "rows": len(f.labels), "store_id": f.store_id} for f in self.files],
                "rows": self.labels.rows,
                "resolved": len(self.labels.labels),
                "counts": dict(self.labels.counts()),
                "skipped": dict(self.labels.skipped),
            },
            "by": list(self.by),
            "headline": self.headline(),
            "figures": self.figures.to_dicts(),
            "disagreements": self.disagreements.to_dicts(),
            "stuck_findings_in_unlabelled_sessions": {"findings": self.other_stuck[0], "sessions": self.other_stuck[1]},
            "guards": self.guards.to_dicts() if self.guards is not None else None,
            "notes": self.notes,
        }


def parse_by(text: str | None) -> tuple[str, ...]:
    """``--by format,kind,tool`` as a tuple of group names."""
    if not text:
        return ()
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in GROUPS]
    if bad:
        raise UsageError(f"--by: unknown group(s) {', '.join(map(repr, bad))}; choose from {', '.join(GROUPS)}")
    return tuple(dict.fromkeys(names))


def evaluate_store(
    con: duckdb.DuckDBPyConnection,
    labels: Sequence[str | Path],
    flt: SessionFilter = SessionFilter(),
    by: Sequence[str] = (),
    roots: Iterable[str | Path] = (),
    halts_of: HaltsOf | None = None,
    show: str = "loopscope show",
    store_id: str = "",
) -> Evaluation:
    """Measure the store's findings (and, with ``halts_of``, the guards) on the labels files ``labels``, for the
    sessions ``flt`` selects. ``show``: the command that prints a call (``loopscope show``, with ``--db`` when the
    store is not the default one)."""
    from analyzer.store.connection import has_table

    if not labels:
        raise UsageError("--labels: give at least one labels file")
    scanned = has_table(con, "findings") and has_table(con, "scan_state")
    if not scanned or not con.execute("SELECT count(*) FROM scan_state").fetchall()[0][0]:
        raise UsageError("the store was never scanned: run `loopscope scan` first (eval scores its findings)")
    files = [read_label_file(p) for p in labels]
    res = resolve(con, [lb for f in files for lb in f.labels], roots)
    notes = [
        f"labels file {f.path} was exported from another store ({f.store_id}, this one is {store_id}); its labels "
        "are matched by session"
        for f in files
        if store_id and f.store_id and f.store_id != store_id
    ]
    where, params = flt.where("s")
    labelled = sorted({r.session_id for r in res.labels})
    formats = dict(
        con.execute(
            f"SELECT s.session_id, s.format FROM sessions s WHERE {where} AND list_contains(?, s.session_id)",
            [*params, labelled],
        ).fetchall()
    )
    outside = [r for r in res.labels if r.session_id not in formats]
    if outside:
        res.skipped["outside the session filters"] += len(outside)
        res.labels = [r for r in res.labels if r.session_id in formats]
    sids = sorted(formats)
    found = read_found(con, sids)
    tools = _tools(con, sids)
    found_in: dict[str, list[Found]] = defaultdict(list)
    for f in found:
        found_in[f.unit].append(f)
    episodes = [_episode(r, formats[r.session_id], found_in[r.session_id], tools) for r in res.labels]
    groups = tuple(by)
    scores = score(found, episodes, by_fields(*groups))
    other = con.execute(
        f"SELECT count(*), count(DISTINCT f.session_id) FROM findings f JOIN sessions s USING (session_id) "
        f"WHERE {where} AND f.stuck AND f.repeats >= ? AND NOT list_contains(?, f.session_id)",
        [*params, MIN_REPEATS, sids],
    ).fetchall()[0]
    guards = None
    if halts_of is not None:
        names, halts = halts_of(sids)
        guards = guard_scorecard(names, halts, res.labels)
    if res.skipped_rows:
        notes.append(
            f"{res.skipped_rows:,} label rows were skipped: "
            + ", ".join(f"{n:,} {why}" for why, n in res.skipped.most_common())
        )
    unsure = res.counts()[UNSURE]
    if unsure:
        notes.append(f"{unsure:,} unsure label{'s are' if unsure != 1 else ' is'} kept and counted nowhere")
    return Evaluation(
        store_id=store_id,
        files=files,
        labels=res,
        by=groups,
        scores=scores,
        figures=_figures(scores, groups),
        disagreements=_disagreements(scores.get("all", Score()), formats, show),
        guards=guards,
        other_stuck=(int(other[0]), int(other[1])),
        notes=notes,
    )


def _tools(con: duckdb.DuckDBPyConnection, sids: list[str]) -> dict[str, list[tuple[int, str]]]:
    """Each session's (seq, tool) in order: a label's tools are those of the calls it spans."""
    out: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for sid, seq, tool in con.execute(
        "SELECT session_id, seq, coalesce(tool, '?') FROM calls WHERE list_contains(?, session_id) "
        "ORDER BY session_id, seq",
        [sids],
    ).fetchall():
        out[sid].append((seq, tool))
    return out


def _episode(r: Resolved, fmt: str, mine: list[Found], tools: dict[str, list[tuple[int, str]]]) -> Episode:
    """A resolved label as the scorer's episode (``mine``: the findings of its session). A ``loop-free`` session is a
    ``not_loop`` span over all its calls; a label by finding id covers what that finding covers; the kind is the
    label's own, else that of the findings it meets (stuck first), else ``none``; the tools are those of its
    calls."""
    first, last, message = r.first, r.last, r.message
    if r.label.finding_id:
        f = next((f for f in mine if f.finding_id == r.label.finding_id), None)
        if f is not None and first is None:
            if f.seqs:
                first, last = min(f.seqs), max(f.seqs)
            elif f.messages:
                message = min(f.messages)
    ep = Episode(
        unit=r.session_id,
        label=NOT_LOOP if r.name == LOOP_FREE else r.name,
        first=first,
        last=last,
        message=message,
        record=r,
    )
    kind = r.label.kind
    if not kind:
        met = sorted((f for f in mine if overlaps(f, ep)), key=lambda f: (not f.counts, f.finding_id))
        kind = met[0].kind if met else "none"
    span = (
        tuple(dict.fromkeys(t for s, t in tools.get(r.session_id, []) if first <= s <= last))
        if first is not None and last is not None
        else ()
    )
    return replace(ep, kind=kind, groups={"format": fmt, "tool": span})


def _figures(scores: dict[str, Score], groups: tuple[str, ...]) -> pl.DataFrame:
    """One row per group: ``all`` first, then each ``--by`` field's values."""

    def counts(s: Score) -> bool:  # a group only unsure labels fell in has nothing to show
        return bool(s.on_labels or s.loops or s.healthy or s.unlabelled)

    keys = ["all"] + [
        k
        for g in groups
        for k in sorted((k for k in scores if k.startswith(f"{g}=") and counts(scores[k])), key=str.lower)
    ]
    rows = []
    for k in keys:
        s = scores.get(k, Score())
        group, _, value = k.partition("=")
        rows.append(
            (
                group,
                value,
                s.on_labels,
                s.on_loop,
                s.precision,
                s.loops,
                s.loops_found,
                s.recall,
                s.healthy,
                s.healthy_kept,
                s.healthy_kept_rate,
                len(s.false),
                len(s.missed),
                len(s.unlabelled),
            )
        )
    return pl.DataFrame(rows, schema=FIGURE_COLUMNS, orient="row")


def _calls(first: int | None, last: int | None) -> str:
    if first is None:
        return ""
    return str(first) if last is None or last == first else f"{first}–{last}"


def _disagreements(s: Score, formats: dict[str, str], show: str) -> pl.DataFrame:
    """Every stuck finding on a ``not_loop`` label only (a false finding), every ``not_loop`` label a stuck finding
    is on that is also on a ``loop`` label (healthy flagged: overlapping labels of two kinds), every ``loop`` label no
    stuck finding is on (missed), and apart, counted nowhere, every stuck finding on no label; each with the command
    that prints its first call."""
    rows: list[tuple[Any, ...]] = []

    def cmd(sid: str, seq: int | None) -> str:
        return f"{show} {shlex.quote(f'{sid}:{seq}')}" if seq is not None else ""

    def finding_row(what: str, f: Found, eps: list[Episode]) -> tuple[Any, ...]:
        first = min(f.seqs) if f.seqs else None
        last = max(f.seqs) if f.seqs else None
        recs: list[Resolved] = [e.record for e in eps]
        return (
            what,
            f.unit,
            session_key(f.unit),
            formats.get(f.unit, ""),
            f.kind,
            _calls(first, last),
            first,
            last,
            min(f.messages) if f.messages and first is None else None,
            f.finding_id,
            f.repeats,
            ", ".join(dict.fromkeys(r.name for r in recs)) or None,
            ", ".join(dict.fromkeys(r.label.source for r in recs)) or None,
            recs[0].label.line if recs else None,
            "; ".join(r.label.note for r in recs if r.label.note) or None,
            f.why,
            cmd(f.unit, first),
        )

    for f, eps in s.false:
        rows.append(finding_row(FALSE, f, eps))

    def label_row(what: str, e: Episode) -> tuple[Any, ...]:
        r: Resolved = e.record
        return (
            what,
            e.unit,
            session_key(e.unit),
            formats.get(e.unit, ""),
            e.kind,
            _calls(e.first, e.last),
            e.first,
            e.last,
            e.message,
            r.label.finding_id,
            None,
            r.name,
            r.label.source,
            r.label.line,
            r.label.note,
            None,
            cmd(e.unit, e.first),
        )

    for e in s.missed:
        rows.append(label_row(MISSED, e))
    falsely = {id(e) for _, eps in s.false for e in eps}
    for e in s.flagged_healthy:  # a not_loop label whose stuck finding is also on a loop label: not kept all the same
        if id(e) not in falsely:
            rows.append(label_row(FLAGGED, e))
    for f in s.unlabelled:
        rows.append(finding_row(UNLABELLED, f, []))
    order = {FALSE: 0, FLAGGED: 1, MISSED: 2, UNLABELLED: 3}
    rows.sort(key=lambda r: (order[r[0]], r[1], r[6] if r[6] is not None else -1))
    return pl.DataFrame(rows, schema=DISAGREEMENT_COLUMNS, orient="row")


def guard_scorecard(policies: Sequence[str], halts: pl.DataFrame, labels: Sequence[Resolved]) -> pl.DataFrame:
    """One row per policy: its halts in the labelled sessions scored on the labels (the module's docstring)."""
    loops: dict[str, list[tuple[int, int]]] = defaultdict(list)
    healthy: dict[str, list[tuple[int, int]]] = defaultdict(list)
    loop_free: set[str] = set()
    for r in labels:
        if r.name == LOOP_FREE:
            loop_free.add(r.session_id)
        elif r.first is not None and r.last is not None and r.name in (LOOP, NOT_LOOP):
            (loops if r.name == LOOP else healthy)[r.session_id].append((r.first, r.last))
    n_healthy = sum(len(v) for v in healthy.values()) + len(loop_free)
    n_loops = sum(len(v) for v in loops.values())
    cols = ["session_id", "policy", "halt_seq", "tokens_after_halt", "cost_after_halt_usd"]
    by_policy: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in halts.select(cols).iter_rows():
        by_policy[row[1]].append(row)
    out = []
    for name in policies:
        first_halt: dict[tuple[str, int, int], int] = {}
        hit_healthy: set[tuple[str, int, int]] = set()
        false_sessions: set[str] = set()
        n_false = other = tok_saved = tok_cut = 0
        usd_saved = usd_cut = 0.0
        for sid, _, seq, tok, usd in by_policy.get(name, []):
            tok, usd = int(tok or 0), float(usd or 0.0)
            on_loop = [(a, b) for a, b in loops.get(sid, ()) if seq is not None and a <= seq <= b]
            on_healthy = [(a, b) for a, b in healthy.get(sid, ()) if seq is not None and a <= seq <= b]
            if on_loop:
                tok_saved += tok
                usd_saved += usd
                for a, b in on_loop:
                    key = (sid, a, b)
                    first_halt[key] = min(first_halt.get(key, seq), seq)
            elif on_healthy or sid in loop_free:
                n_false += 1
                tok_cut += tok
                usd_cut += usd
                false_sessions.add(sid)
                hit_healthy.update((sid, a, b) for a, b in on_healthy)
                if sid in loop_free:
                    hit_healthy.add((sid, -1, -1))
            else:
                other += 1
        # per loop label (a span labelled twice counts twice, as the figures count it)
        to_halt = [
            first_halt[(sid, a, b)] - a + 1
            for sid, spans in loops.items()
            for a, b in spans
            if (sid, a, b) in first_halt
        ]
        n_halted = len(to_halt)
        out.append(
            (
                name,
                n_loops,
                n_halted,
                n_halted / n_loops if n_loops else None,
                float(statistics.median(to_halt)) if to_halt else None,
                n_healthy,
                _healthy_halted(hit_healthy, healthy, loop_free),
                n_false,
                len(false_sessions),
                other,
                tok_saved,
                usd_saved,
                tok_cut,
                usd_cut,
            )
        )
    return pl.DataFrame(out, schema=GUARD_COLUMNS, orient="row")


def _healthy_halted(
    hit: set[tuple[str, int, int]], healthy: dict[str, list[tuple[int, int]]], loop_free: set[str]
) -> int:
    """The healthy labels a false halt lands in (a span labelled twice counts twice, as the figures count it)."""
    n = sum(1 for sid, spans in healthy.items() for a, b in spans if (sid, a, b) in hit)
    return n + sum(1 for sid in loop_free if (sid, -1, -1) in hit)
