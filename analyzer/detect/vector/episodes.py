"""Loop episodes of a whole group of sessions from their signals: the batch scan's form of ``episodes.build_findings``.

``episodes.py`` states the rules and stays the readable reference (a property test requires the same findings from
both). Here the per-call work is done on frames: which user turns are hot, the links that hold each kind of episode
together (cycle, streak, drift, failure) and their runs, window candidates, and every figure of a finding (turns,
tokens, cost, tools, stuck). Python keeps only what is sequential and small: claiming runs in order inside each hot
segment (a call belongs to one call episode), window chains, and the union-find of nested and text links.

Two things are read from the store on demand, for the few rows that need them (``HeadsFn``, ``TurnsFn``): the
result heads a drift check compares, and the index and counted usage of the turns findings charge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from analyzer.detect.judge import CallView, judge_calls, judge_text, short_replies
from analyzer.detect.keys import REFUSED_NUMBER, digest, normalize_result
from analyzer.detect.rules import (
    CLAIM_ORDER,
    CYCLE_PERIODS,
    FINDINGS,
    HOT_SIGNALS,
    LABEL_CHARS,
    MAX_PERIOD,
    MIN_CHUNKS,
    MIN_NESTED,
    MIN_REPEATS,
    MIN_SHARED_WORDS,
    MIN_SHORT_REPEATS,
    MIN_TEXT_WORDS,
    REFUSED_TOOL,
    SIMILARITY,
    WINDOW,
    is_mutating,
    period_of,
)
from analyzer.detect.semantics import EDIT_FAMILY, PATCH_CALL_WORDS
from analyzer.detect.stream.episodes import components, normalized, text_pieces, unclaimed_pieces
from analyzer.detect.vector.frames import jaccard
from analyzer.detect.vector.words import words

# (session_id, seq) in, (session_id, seq, head) out: the first ``episodes.RESULT_HEAD`` characters of each call's
# result (None without one).
HeadsFn = Callable[[pl.DataFrame], pl.DataFrame]
# (session_id, turn_id) in, (session_id, turn_id, turn_index, tokens, cost) out, one row per pair that names an
# assistant message: the largest turn_index with that id (the reference's dict keeps the last), and the summed
# usage of its counted rows (null when none counts). A null turn_id matches a null turn_id.
TurnsFn = Callable[[pl.DataFrame], pl.DataFrame]

_EMPTY_STRINGS = pl.lit([], pl.List(pl.String))

# seg, kind, period, n_first, repeats, positions (in the segment), stuck, why: a judged top-level episode
Emitted = tuple[int, str, "int | None", int, int, list[int], bool, str]
# A judged call episode: kind, period, n_first, repeats, rows (of the calls frame), stuck, why.
Judged = tuple[str, "int | None", int, int, list[int], bool, str]


@dataclass
class Episodes:
    """The findings of a group (``schema.FINDINGS`` columns) and the finding each call and message belongs to
    (null: none)."""

    findings: pl.DataFrame
    call_finding: pl.Series
    message_finding: pl.Series


def find_episodes(
    calls: pl.DataFrame,
    messages: pl.DataFrame,
    nested_links: pl.DataFrame,
    text_links: pl.DataFrame,
    heads: HeadsFn,
    turns: TurnsFn,
) -> Episodes:
    """``calls``: one row per call of the group (sorted by session, seq) with ``session_id, seq, call_id, turn_id,
    user_turn, tool, k, args, result_key, is_error, parent_call_id, est_tokens``, the signals and ``shared`` (words
    shared with the previous call when it used the same tool). ``messages``: the assistant messages (sorted by
    session, turn_index) with ``session_id, turn_id, turn_index, user_turn, text, est_tokens``, the text counters
    (null on blank messages) and ``n_words``. Links are row numbers of those frames."""
    c = calls.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("row"))
    m = messages.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("mrow"))
    nested = _nested_clusters(c, nested_links)
    heads = _HeadCache(heads, c, nested)
    emitted, top = _top_level(c, heads)
    judged = _judged(emitted, top, nested, c, heads)
    call_members, meta = _call_members(judged)
    groups, single, periods = _text_groups(c, m, text_links, call_members)
    texts = m["text"].fill_null("").to_list() if groups else []
    verdicts = [judge_text([texts[x] for x in g], s, k) for g, s, k in zip(groups, single, periods)]
    kept = [i for i, v in enumerate(verdicts) if v is not None]
    # short replies count only as the whole of steps that changed nothing (``stream.episodes._Builder.texts``)
    short = [i for i in kept if not single[i] and short_replies([texts[x] for x in groups[i]])]
    if short:
        moved = _progress_after_first(c, m, [groups[i] for i in short], [periods[i] for i in short])
        kept = [i for i in kept if i not in {j for j, p in zip(short, moved) if p}]
    groups, single, periods = [groups[i] for i in kept], [single[i] for i in kept], [periods[i] for i in kept]
    text_verdicts = [verdicts[i] for i in kept]
    text_members = _text_members(m, groups, periods)
    needed = pl.concat(
        [
            call_members.select(pl.col("row"))
            .join(c.select("row", "session_id", "turn_id"), on="row")
            .select("session_id", "turn_id"),
            text_members.select("session_id", "turn_id"),
        ]
    ).unique()
    info = turns(needed) if needed.height else _no_turns()
    call_eps = _call_findings(c, call_members, meta, info)
    text_eps = _text_findings(c, text_members, single, text_verdicts, info)
    findings = pl.concat([call_eps, text_eps], how="vertical_relaxed")
    return _assign(c, m, findings, text_members)


def _no_turns() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "session_id": pl.String,
            "turn_id": pl.String,
            "turn_index": pl.Int32,
            "tokens": pl.Int64,
            "cost": pl.Float64,
        }
    )


def _changed(col: str) -> pl.Expr:
    """Differs from the previous row, nulls compared as values (true on the first row)."""
    return pl.col(col).ne_missing(pl.col(col).shift(1)) | (pl.int_range(pl.len()) == 0)


# -- top-level call episodes -----------------------------------------------------------------------------------------


def _top_level(c: pl.DataFrame, heads: _HeadCache) -> tuple[list[Emitted], pl.DataFrame]:
    """Cycles, streaks, drift, failures and windows among the top-level calls of each hot user turn: the emitted
    episodes (positions inside their segment) and the frame of segment rows."""
    run = (_changed("session_id") | _changed("user_turn")).cum_sum()
    runs = c.group_by(run.alias("_run")).agg(
        pl.col("session_id").first(),
        pl.col("user_turn").first(),
        (pl.max_horizontal(*HOT_SIGNALS) > 2).any().alias("_hot"),
    )
    hot = pl.concat([runs.filter("_hot").select("session_id", "user_turn"), _failing_turns(c)]).unique()
    # (a user turn is hot wherever it recurs)
    if not hot.height:
        return [], c.clear()
    hot_runs = runs.join(hot, on=["session_id", "user_turn"], how="semi", nulls_equal=True)["_run"]
    top = c.filter(run.is_in(hot_runs.implode()) & pl.col("parent_call_id").is_null() & (pl.col("streak") > 0))
    scripts = (
        c.filter(pl.col("parent_call_id").is_not_null())
        .select("session_id", pl.col("parent_call_id").alias("call_id"))
        .unique()
    )
    start = _changed("session_id") | _changed("user_turn")
    i = pl.int_range(pl.len(), dtype=pl.Int64)
    top = top.with_columns(
        start.cum_sum().alias("seg"),
        (i - pl.when(start).then(i).forward_fill()).alias("j"),
        start.alias("_start"),
        pl.struct("session_id", "call_id")
        .is_in(scripts.select(pl.struct("session_id", "call_id")).to_series().implode())
        .alias("_script"),
    )
    j, key = pl.col("j"), pl.col("k")
    back = {d: (j >= d) & (key == key.shift(d)) for d in (1, *CYCLE_PERIODS)}
    links = {f"cycle{k}": back[k] & (pl.col("streak") < k) for k in CYCLE_PERIODS}
    links["streak"] = back[1]
    links["drift"] = (
        (j >= 1)
        & (pl.col("drift_run") > 1)
        & ~pl.col("_script")
        & ~pl.col("_script").shift(1)
        & (pl.col("shared").fill_null(0) >= MIN_SHARED_WORDS)
    )
    links["failure"] = (j >= 1) & (pl.col("fail_run") > 1)
    mutating = _mutating(top)
    step = (pl.col("progress").fill_null(False) & pl.col("tool").is_in(mutating)).cast(pl.Int64)
    top = top.with_columns(*[v.fill_null(False).alias(n) for n, v in links.items()], step.alias("_step"))
    done = pl.col("_step").cum_sum()  # successful state changes up to each call of its segment, and before it
    top = top.with_columns(
        (done - pl.when(pl.col("_start")).then(done - pl.col("_step")).forward_fill()).alias("_chg_after")
    )
    top = top.with_columns((pl.col("_chg_after") - pl.col("_step")).alias("_chg"))
    heads.expect(top)
    top = top.with_columns(pl.col("drift") & _results_alike(top, heads))
    runs_by_kind = _runs(top)
    windows = _window_candidates(top, mutating)
    if not runs_by_kind.height and not windows:
        return [], top
    seg_len = dict(top.group_by("seg").len().iter_rows())
    where = _row_at(top)
    need: set[int] = set()
    for seg, first, last, _ in runs_by_kind.iter_rows():
        need.update(where(seg, j) for j in range(first, last + 1))
    for seg, keyed in windows.items():
        for occ in keyed:
            rows = [where(seg, o[0]) for o in occ]
            need.update(range(min(rows), max(rows) + 1))
    views = _Views(c, heads, need)

    def judge(seg: int, kind: str, period: int | None, positions: list[int]) -> list[tuple[list[int], bool, str, str]]:
        rows = [where(seg, j) for j in positions]
        back = {r: j for r, j in zip(rows, positions)}
        return [
            ([back[r] for r in v.positions], v.stuck, v.why, v.kind or kind)
            for v in judge_calls(kind, rows, period, views.view, views.between)
        ]

    return _claim(runs_by_kind, windows, seg_len, judge, _streak_at(top)), top


class _HeadCache:
    """The group's result heads, read once: a lookup scans the store's result texts over the group's files,
    whatever its size, and the episodes ask up to three times (drift links, the calls judged, the nested clusters).
    The first ask reads, with its own keys, those of every call a later one may ask for (each call the hot segments
    span, the nested clusters); a key outside them is read when asked. Keys are unique calls, so an answer holds
    the same rows as the lookup's own (in another order, which no caller reads)."""

    _KEY = ["session_id", "seq"]

    def __init__(self, heads: HeadsFn, c: pl.DataFrame, nested: list[list[int]]) -> None:
        self.heads, self.c = heads, c
        self.likely = [r for cl in nested for r in cl]
        self.known: pl.DataFrame | None = None

    def expect(self, top: pl.DataFrame) -> None:
        """Add the calls of the hot segments of ``top``, from the first to the last of each."""
        spans = top.group_by("seg").agg(pl.col("row").min().alias("a"), (pl.col("row").max() + 1).alias("b"))
        self.likely += spans.select(pl.int_ranges("a", "b")).to_series().explode().drop_nulls().to_list()

    def __call__(self, keys: pl.DataFrame) -> pl.DataFrame:
        keys = keys.select(self._KEY).unique()
        if self.known is None:
            rows = sorted(set(self.likely))
            likely = self.c.select(*self._KEY, "result_key")[rows].filter(pl.col("result_key").is_not_null())
            self.known = self.heads(pl.concat([keys, likely.select(self._KEY)]).unique())
        missing = keys.join(self.known, on=self._KEY, how="anti")
        if missing.height:
            self.known = pl.concat([self.known, self.heads(missing)])
        return keys.join(self.known, on=self._KEY)


def _row_at(top: pl.DataFrame) -> Callable[[int, int], int]:
    """The row (of the calls frame) of position ``j`` in segment ``seg``: ``top`` holds the segments in order,
    numbered from 1, each from its ``_start``, so it is a lookup by offset (a dict of every hot call cost more than
    the claiming it serves)."""
    rows, first = top["row"].to_list(), top["_start"].arg_true().to_list()
    return lambda seg, j: rows[first[seg - 1] + j]


def _streak_at(top: pl.DataFrame) -> Callable[[int, int], bool]:
    """Whether position ``j`` of segment ``seg`` repeats the call before it (its ``streak`` link), looked up as
    ``_row_at`` looks up rows."""
    repeats, first = top["streak"].to_list(), top["_start"].arg_true().to_list()
    return lambda seg, j: repeats[first[seg - 1] + j]


def _results_alike(top: pl.DataFrame, heads: HeadsFn) -> pl.Series:
    """``episodes._results_alike`` for each drift link (the call and the one before it): both failed, the same
    result, or result heads with shared-token similarity at the bar."""
    err, res = pl.col("is_error").fill_null(False), pl.col("result_key")
    f = top.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_t"),
        "session_id",
        "seq",
        pl.col("seq").shift(1).alias("p_seq"),
        pl.col("drift").alias("_cand"),
        (err & err.shift(1)).fill_null(False).alias("_both_err"),
        (res.is_null() | res.shift(1).is_null()).fill_null(True).alias("_missing"),
        (res == res.shift(1)).fill_null(False).alias("_same"),
    )
    need = f.filter(pl.col("_cand") & ~pl.col("_both_err") & ~pl.col("_missing") & ~pl.col("_same"))
    similar = pl.Series("_similar", [False] * f.height)
    if need.height:
        keys = pl.concat(
            [need.select("session_id", "seq"), need.select("session_id", pl.col("p_seq").alias("seq"))]
        ).unique()
        got = heads(keys)
        norm = pl.Series([normalize_result(h or "") for h in got["head"].to_list()], dtype=pl.String)
        table = got.select("session_id", "seq", words(pl.lit(norm)).alias("w"))
        need = need.join(table, on=["session_id", "seq"], how="left").join(
            table.rename({"seq": "p_seq", "w": "p_w"}), on=["session_id", "p_seq"], how="left"
        )
        sim = need.filter(jaccard(pl.col("w"), pl.col("p_w")) >= SIMILARITY)["_t"]
        similar = f["_t"].is_in(sim.implode())
    return (f["_both_err"] | (~f["_missing"] & (f["_same"] | similar))).alias("_alike")


def _runs(top: pl.DataFrame) -> pl.DataFrame:
    """Runs of each link kind as (seg, first, last, kind): the range an episode of that kind may cover, before
    claims (a run of links from j0 to j1 holds the calls j0 - period .. j1)."""
    frames = []
    for order, kind in enumerate(CLAIM_ORDER):
        link = pl.col(kind)
        start = link & ~link.shift(1).fill_null(False)
        end = link & ~link.shift(-1).fill_null(False)
        back = period_of(kind) or 1
        s = top.filter(start).select("seg", (pl.col("j") - back).alias("first"))
        if s.height:
            e = top.filter(end).select(pl.col("j").alias("last"))
            frames.append(pl.concat([s, e], how="horizontal").with_columns(pl.lit(order, pl.Int32).alias("kind")))
    if not frames:
        return pl.DataFrame(schema={"seg": pl.Int64, "first": pl.Int64, "last": pl.Int64, "kind": pl.Int32})
    return pl.concat(frames, how="vertical_relaxed").sort(["seg", "kind", "first"])


def _failure_key(mutating: list[str]) -> pl.Expr:
    """``rules.failure_key`` as a number: a change's failure (a change-making tool, or a patch applied through a
    shell: ``semantics.applies_patch``), by tool and result, or any tool's permission refusal (one key, whatever the
    tool); null otherwise."""
    failing = pl.col("is_error").fill_null(False) & pl.col("result_key").is_not_null()
    refused = pl.col("result_key").cast(pl.UInt64, strict=False) == REFUSED_NUMBER
    patch = pl.all_horizontal(pl.col("args").str.contains(w, literal=True) for w in PATCH_CALL_WORDS).fill_null(False)
    return (
        pl.when(failing & refused)
        .then(pl.struct(pl.lit(REFUSED_TOOL).alias("tool"), "result_key").hash(7))
        .when(failing & (pl.col("tool").is_in(mutating) | patch))
        .then(pl.struct(pl.col("tool").replace(EDIT_FAMILY), "result_key").hash(7))
        .otherwise(None)
    )


def _mutating(frame: pl.DataFrame) -> list[str]:
    return [t for t in frame["tool"].unique().to_list() if t is not None and is_mutating(t)]


def _failing_turns(c: pl.DataFrame) -> pl.DataFrame:
    """The user turns where a change failed the same way a third time within a window of top-level calls
    (``stream.episodes._hot_turns``)."""
    top = c.filter(pl.col("parent_call_id").is_null() & (pl.col("streak") > 0)).select(
        "session_id", "user_turn", _failure_key(_mutating(c)).alias("fk"), pl.int_range(pl.len()).alias("_i")
    )
    top = top.filter(pl.col("fk").is_not_null()).sort(["session_id", "user_turn", "fk", "_i"])
    ahead = MIN_REPEATS - 1
    same = (
        (pl.col("session_id") == pl.col("session_id").shift(-ahead))
        & pl.col("user_turn").eq_missing(pl.col("user_turn").shift(-ahead))
        & (pl.col("fk") == pl.col("fk").shift(-ahead))
    )
    near = (same & (pl.col("_i").shift(-ahead) - pl.col("_i") <= WINDOW)).fill_null(False)
    return top.filter(near).select("session_id", "user_turn")


def _window_candidates(top: pl.DataFrame, mutating: list[str]) -> dict[int, list[list[tuple[int, int, int]]]]:
    """Per segment, the keys with 3 occurrences within one window of 10 calls (a window episode needs them; claims
    only remove occurrences), each as its occurrences (j, changes before j, changes up to j): the action keys, then
    one target's failed changes (``rules.failure_key``: an edit refused the same way, its text varied)."""
    out = _key_windows(top.select("seg", "k", "j", "_chg", "_chg_after"))
    failing = top.select("seg", _failure_key(mutating).alias("k"), "j", "_chg", "_chg_after")
    for seg, occ in _key_windows(failing.filter(pl.col("k").is_not_null())).items():
        out.setdefault(seg, []).extend(occ)
    return out


def _key_windows(occ: pl.DataFrame) -> dict[int, list[list[tuple[int, int, int]]]]:
    occ = occ.sort(["seg", "k", "j"])
    ahead = MIN_REPEATS - 1
    near = (
        (pl.col("j").shift(-ahead) - pl.col("j") <= WINDOW)
        & (pl.col("seg") == pl.col("seg").shift(-ahead))
        & (pl.col("k") == pl.col("k").shift(-ahead))
    ).fill_null(False)
    keys = occ.filter(near).select("seg", "k").unique()
    if not keys.height:
        return {}
    grouped = (
        occ.join(keys, on=["seg", "k"], how="semi", maintain_order="left")
        .group_by("seg", "k", maintain_order=True)
        .agg("j", "_chg", "_chg_after")
    )
    out: dict[int, list[list[tuple[int, int, int]]]] = {}
    for seg, _, js, before, after in grouped.iter_rows():
        out.setdefault(seg, []).append(list(zip(js, before, after)))
    return out


JudgeFn = Callable[[int, str, "int | None", list[int]], list[tuple[list[int], bool, str, str]]]


def _claim(
    runs: pl.DataFrame,
    windows: dict[int, list[list[tuple[int, int, int]]]],
    seg_len: dict[int, int],
    judge: JudgeFn,
    repeats: Callable[[int, int], bool],
) -> list[Emitted]:
    """The reference's claiming, segment by segment: cycles by period, then drift, streak and failure runs, each
    offering only unclaimed pieces long enough to count (a drift piece only when one of its calls is not identical
    to the one before: ``repeats``), then window chains over the calls left. Each offer is judged
    (``judge.judge_calls``); only the calls of the episodes it keeps are claimed."""
    by_seg: dict[int, list[tuple[int, int, int]]] = {}
    for seg, first, last, kind in runs.iter_rows():
        by_seg.setdefault(seg, []).append((kind, first, last))
    out: list[Emitted] = []
    for seg in sorted(set(by_seg) | set(windows)):
        claimed = bytearray(seg_len[seg])
        for kind, first, last in by_seg.get(seg, ()):
            name = CLAIM_ORDER[kind]
            period = period_of(name)
            for s, e in unclaimed_pieces(first, last, claimed):
                length = e - s + 1
                if period is not None and length // period >= MIN_REPEATS:
                    kind_name, n_first, per = "cycle", period, period
                elif period is None and length >= MIN_REPEATS:
                    kind_name, n_first, per = name, 1, (1 if name == "streak" else None)
                    if name == "drift" and all(repeats(seg, q) for q in range(s + 1, e + 1)):
                        continue  # identical calls only: a streak, not a drift
                else:
                    continue
                for pos, stuck, why, found in judge(seg, kind_name, per, list(range(s, e + 1))):
                    n = len(pos) // period if period else len(pos)
                    out.append((seg, found, per, n_first, n, pos, stuck, why))
                    for q in pos:
                        claimed[q] = 1
        for occurrences in windows.get(seg, ()):
            free = [o for o in occurrences if not claimed[o[0]]]
            if len(free) < MIN_REPEATS:
                continue
            for chain in _window_chains(free):
                for pos, stuck, why, found in judge(seg, "window", None, chain):
                    out.append((seg, found, None, 1, len(pos), pos, stuck, why))
                    for q in pos:
                        claimed[q] = 1
    return out


def _window_chains(occurrences: list[tuple[int, int, int]]) -> list[list[int]]:
    """Chains of one key's occurrences, each within ``WINDOW`` calls of the one before with no state change in
    between, kept when 3 of them fit in one window."""
    out = []
    chain = [occurrences[0]]
    for o in occurrences[1:] + [None]:  # type: ignore[list-item]
        if o is not None and o[0] - chain[-1][0] <= WINDOW and o[1] == chain[-1][2]:
            chain.append(o)
            continue
        pos = [x[0] for x in chain]
        if len(pos) >= MIN_REPEATS and any(
            pos[x + MIN_REPEATS - 1] - pos[x] <= WINDOW for x in range(len(pos) - MIN_REPEATS + 1)
        ):
            out.append(pos)
        if o is not None:
            chain = [o]
    return out


# -- nested call episodes and membership ----------------------------------------------------------------------------


def _same_turn_edges(links: pl.DataFrame, user_turn: pl.Series) -> list[tuple[int, int]]:
    """The links whose two ends belong to the same user turn (rows index ``user_turn``)."""
    if not links.height:
        return []
    same = user_turn.gather(links["row"]).eq_missing(user_turn.gather(links["partner"]))
    return list(links.filter(same).iter_rows())


def _nested_clusters(c: pl.DataFrame, links: pl.DataFrame) -> list[list[int]]:
    """A call repeated inside one script: clusters of nested links within one user turn (rows)."""
    return [cl for cl in components(_same_turn_edges(links, c["user_turn"])) if len(cl) >= MIN_NESTED]


class _Views:
    """The calls the judgement reads (``judge.CallView``), for a set of rows of the calls frame, read at once (the
    result heads in one lookup)."""

    def __init__(self, c: pl.DataFrame, heads: HeadsFn, rows: set[int]) -> None:
        order = sorted(rows)
        sub = c.select("session_id", "seq", "tool", "args", "result_key", "is_error", "parent_call_id", "turn_id")[
            order
        ]
        keys = sub.filter(pl.col("result_key").is_not_null()).select("session_id", "seq")
        if keys.height:
            got = heads(keys).unique(["session_id", "seq"], keep="last")
            sub = sub.join(got, on=["session_id", "seq"], how="left", maintain_order="left")
        else:
            sub = sub.with_columns(pl.lit(None, pl.String).alias("head"))
        sub = sub.with_columns(pl.when(pl.col("result_key").is_not_null()).then(pl.col("head")).alias("head"))
        self.index = {r: i for i, r in enumerate(order)}
        self.columns = [sub[col].to_list() for col in ("tool", "args", "head", "is_error", "turn_id")]
        self.top_level = dict(zip(order, sub["parent_call_id"].is_null().to_list()))
        self.views: dict[int, CallView] = {}  # made when first asked for: most rows are only gaps between repeats

    def view(self, row: int) -> CallView:
        v = self.views.get(row)
        if v is None:
            i = self.index[row]
            tool, args, head, err, turn = (col[i] for col in self.columns)
            v = self.views[row] = CallView(tool, args, head, err, turn)
        return v

    def between(self, a: int, b: int) -> list[int]:
        return [r for r in range(a + 1, b) if self.top_level[r]]


def _judged(
    emitted: list[Emitted], top: pl.DataFrame, nested: list[list[int]], c: pl.DataFrame, heads: HeadsFn
) -> list[Judged]:
    """Every kept call episode, with rows of the calls frame: the judged top-level ones, then the nested ones
    (judged here)."""
    out: list[Judged] = []
    if emitted:
        where = _row_at(top)
        for s, kind, period, n_first, repeats, members, stuck, why in emitted:
            out.append((kind, period, n_first, repeats, [where(s, j) for j in members], stuck, why))
    if nested:
        views = _Views(c, heads, {r for cl in nested for r in cl})
        for cluster in nested:
            for v in judge_calls("nested", cluster, None, views.view, views.between):
                out.append((v.kind or "nested", None, 1, len(v.positions), v.positions, v.stuck, v.why))
    return out


def _call_members(judged: list[Judged]) -> tuple[pl.DataFrame, list[tuple[str, int | None, int, bool, str]]]:
    """Every call episode as (fid, row, first) rows, and its (kind, period, repeats, stuck, why)."""
    meta = [(kind, period, repeats, stuck, why) for kind, period, _, repeats, _, stuck, why in judged]
    fid, row, first = [], [], []
    for n, (_, _, n_first, _, rows, _, _) in enumerate(judged):
        fid.extend([n] * len(rows))
        row.extend(rows)
        first.extend([x < n_first for x in range(len(rows))])
    member = pl.DataFrame(
        {"fid": fid, "row": row, "first": first}, schema={"fid": pl.Int64, "row": pl.Int64, "first": pl.Boolean}
    )
    return member.sort(["fid", "row"]), meta


# -- text episodes ---------------------------------------------------------------------------------------------------


def _text_groups(
    c: pl.DataFrame, m: pl.DataFrame, links: pl.DataFrame, call_members: pl.DataFrame
) -> tuple[list[list[int]], list[bool], list[int]]:
    """Text loops as message rows: the runs and repeated blocks (``episodes.text_pieces``) of clusters of repeated
    or similar messages (unless every repeat only narrates calls already in a call episode), then single chanting
    messages; which are single; and each one's period."""
    sig = m.filter(pl.col("same_count").is_not_null())
    hits = sig.filter(
        (
            ((pl.col("same_count") > 2) | (pl.col("similar_run") > 2) | (pl.col("similar_count") > 2))
            & (pl.col("n_words") >= MIN_TEXT_WORDS)
        )
        | (pl.col("same_count") >= MIN_SHORT_REPEATS)
    )["mrow"]
    chants = sig.filter((pl.col("sentence_repeats") >= MIN_REPEATS) | (pl.col("chunk_repeats") >= MIN_CHUNKS))
    groups: list[list[int]] = []
    single: list[bool] = []
    periods: list[int] = []
    clustered: set[int] = set()
    if hits.len():
        edges = _same_turn_edges(links.filter(pl.col("row").is_in(hits.implode())), m["user_turn"])
        clusters = sorted(components(edges))
        pieces = _text_pieces(m, clusters) if clusters else []
        flat = [p for ps in pieces for p in ps]
        keep = _not_narration(c, m, flat, call_members) if flat else []
        kept = iter(keep)
        for cluster, ps in zip(clusters, pieces):
            clustered.update(cluster)
            for piece, period in ps:
                clustered.update(piece)  # a block holds messages of other clusters too
                if next(kept):
                    groups.append(piece)
                    single.append(False)
                    periods.append(period)
    for mrow in chants["mrow"].to_list():
        if mrow not in clustered:
            groups.append([mrow])
            single.append(True)
            periods.append(1)
    return groups, single, periods


def _text_pieces(m: pl.DataFrame, clusters: list[list[int]]) -> list[list[tuple[list[int], int]]]:
    """Each cluster's runs and repeated blocks (``episodes.text_pieces``), message rows with their periods."""
    nonblank = m["same_count"].is_not_null().arg_true().to_list()
    where = {r: o for o, r in enumerate(nonblank)}
    text, session, turn = m["text"], m["session_id"], m["user_turn"]
    norm = normalized(text.__getitem__)

    def scope(r: int) -> tuple:
        return session[r], turn[r]

    used: set[int] = set()
    return [text_pieces(cl, nonblank, where.__getitem__, norm, scope, used) for cl in clusters]


def _progress_after_first(c: pl.DataFrame, m: pl.DataFrame, groups: list[list[int]], periods: list[int]) -> list[bool]:
    """Per text loop: some call issued by a message after its first occurrence (its first ``period`` messages)
    made progress."""
    rows = [(g, r, i < p) for g, (grp, p) in enumerate(zip(groups, periods)) for i, r in enumerate(grp)]
    frame = pl.DataFrame(rows, schema={"g": pl.Int64, "mrow": pl.Int64, "first": pl.Boolean}, orient="row")
    frame = frame.with_columns(m["session_id"].gather(frame["mrow"]), m["turn_id"].gather(frame["mrow"]))
    firsts = frame.filter("first").select("g", "session_id", "turn_id").unique()
    later = (
        frame.select("g", "session_id", "turn_id")
        .unique()
        .join(firsts, on=["g", "session_id", "turn_id"], how="anti", nulls_equal=True)
    )
    moved = later.join(
        c.select("session_id", "turn_id", pl.col("progress").fill_null(False)),
        on=["session_id", "turn_id"],
        nulls_equal=True,
    ).filter("progress")["g"]
    done = set(moved.to_list())
    return [g in done for g in range(len(groups))]


def _not_narration(
    c: pl.DataFrame, m: pl.DataFrame, clusters: list[tuple[list[int], int]], call_members: pl.DataFrame
) -> list[bool]:
    """Per piece (its messages and period): some repeat (a member after the first occurrence) issued a call outside
    every call episode, or none."""
    members = pl.DataFrame(
        {
            "cid": [i for i, (cl, k) in enumerate(clusters) for _ in cl[k:]],
            "mrow": [x for cl, k in clusters for x in cl[k:]],
        },
        schema={"cid": pl.Int64, "mrow": pl.Int64},
    )
    members = members.with_columns(m["session_id"].gather(members["mrow"]), m["turn_id"].gather(members["mrow"]))
    turns = members.select("session_id", "turn_id").unique()
    issued = c.select("row", "session_id", "turn_id").join(turns, on=["session_id", "turn_id"], how="semi")
    issued = issued.with_columns(pl.col("row").is_in(call_members["row"].unique().implode()).alias("_claimed"))
    narrated = issued.group_by("session_id", "turn_id").agg(pl.col("_claimed").all().alias("_narrated"))
    per = (
        members.join(narrated, on=["session_id", "turn_id"], how="left")
        .group_by("cid")
        .agg(pl.col("_narrated").fill_null(False).all().alias("_all"))
    )
    narrated_all = dict(per.iter_rows())
    return [not narrated_all.get(i, False) for i in range(len(clusters))]


def _text_members(m: pl.DataFrame, groups: list[list[int]], periods: list[int]) -> pl.DataFrame:
    """(tid, mrow, lead, first) per message of each text loop, with the message's columns: ``lead`` its first
    message, ``first`` the messages of its first occurrence (its first block of ``period`` messages)."""
    frame = pl.DataFrame(
        {
            "tid": [g for g, grp in enumerate(groups) for _ in grp],
            "mrow": [x for grp in groups for x in grp],
            "lead": [i == 0 for grp in groups for i in range(len(grp))],
            "first": [i < k for grp, k in zip(groups, periods) for i in range(len(grp))],
        },
        schema={"tid": pl.Int64, "mrow": pl.Int64, "lead": pl.Boolean, "first": pl.Boolean},
    )
    cols = (
        "session_id",
        "turn_id",
        "turn_index",
        "user_turn",
        "text",
        "est_tokens",
        "sentence_repeats",
        "chunk_repeats",
    )
    return frame.with_columns(*[m[col].gather(frame["mrow"]) for col in cols])


# -- figures ---------------------------------------------------------------------------------------------------------


def _label(tool: str | None, args: str | None, width: int = LABEL_CHARS) -> str:
    s = f"{tool} {args or ''}"
    return s if len(s) <= width else s[: width - 1] + "…"


def _with_turns(members: pl.DataFrame, info: pl.DataFrame) -> pl.DataFrame:
    return members.join(
        info.select(
            "session_id",
            "turn_id",
            pl.col("turn_index").alias("_ti"),
            pl.col("tokens").alias("_tok"),
            pl.col("cost").alias("_cost"),
        ),
        on=["session_id", "turn_id"],
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )


def _costs(members: pl.DataFrame) -> pl.DataFrame:
    """Per finding: the turns of its repeats that did not also issue its first occurrence, in turn order, their
    usage and cost (summed in that order, as the reference does). ``members``: fid, turn_id, first, _ti, _tok,
    _cost."""
    turns = (
        members.filter(pl.col("turn_id").is_not_null())
        .group_by("fid", "turn_id")
        .agg(
            pl.col("first").any().alias("_in_first"),
            pl.col("_ti").first(),
            pl.col("_tok").first(),
            pl.col("_cost").first(),
        )
        .filter(~pl.col("_in_first"))
        .sort(["fid", pl.col("_ti").fill_null(-1), "turn_id"])
    )
    return turns.group_by("fid", maintain_order=True).agg(
        pl.col("turn_id").alias("turn_ids"),
        pl.col("_tok").fill_null(0).sum().alias("wasted_tokens"),
        pl.col("_cost").fill_null(0.0).cum_sum().last().alias("cost_usd"),
    )


def _call_findings(
    c: pl.DataFrame, members: pl.DataFrame, meta: list[tuple[str, int | None, int, bool, str]], info: pl.DataFrame
) -> pl.DataFrame:
    """The figures of every call episode, as ``schema.FINDINGS`` rows (plus ``_rows``: its calls)."""
    if not meta:
        return _empty_findings()
    cols = ("session_id", "seq", "call_id", "turn_id", "user_turn", "tool", "args", "est_tokens", "progress")
    members = _with_turns(members.with_columns(*[c[col].gather(members["row"]) for col in cols]), info)
    kinds = pl.DataFrame(
        {
            "fid": range(len(meta)),
            "kind": [x[0] for x in meta],
            "period": [x[1] for x in meta],
            "repeats": [x[2] for x in meta],
            "stuck": [x[3] for x in meta],
            "why": [x[4] for x in meta],
        },
        schema={
            "fid": pl.Int64,
            "kind": pl.String,
            "period": pl.Int32,
            "repeats": pl.Int32,
            "stuck": pl.Boolean,
            "why": pl.String,
        },
    )
    rest = ~pl.col("first")
    per = (
        members.group_by("fid", maintain_order=True)
        .agg(
            pl.col("session_id").first(),
            pl.col("user_turn").first(),
            pl.col("tool").unique(maintain_order=True).alias("tools"),
            pl.col("call_id").alias("call_ids"),
            pl.col("seq").first().alias("first_seq"),
            pl.col("seq").last().alias("last_seq"),
            pl.col("est_tokens").filter(rest).sum().alias("estimated_tokens"),
            pl.col("_ti").min().alias("first_turn_index"),
            pl.col("_ti").max().alias("last_turn_index"),
            pl.col("row").alias("_rows"),
            pl.col("tool").head(MAX_PERIOD).alias("_tools5"),  # a cycle's label names its block
            pl.col("args").head(MAX_PERIOD).alias("_args5"),
        )
        .join(kinds, on="fid", maintain_order="left")
        .join(_costs(members), on="fid", how="left", maintain_order="left")
    )
    labels, ids = [], []
    for kind, period, sid, seq, tools, args in per.select(
        "kind", "period", "session_id", "first_seq", "_tools5", "_args5"
    ).iter_rows():
        if period and period > 1:
            labels.append(" → ".join(_label(t, a, 60) for t, a in zip(tools[:period], args[:period])))
        else:
            labels.append(_label(tools[0], args[0]))
        ids.append(digest(f"{sid}\x00{kind}\x00{seq}"))
    return _finish(per.with_columns(pl.Series("repeated", labels, pl.String), pl.Series("finding_id", ids, pl.String)))


def _split_waste(frame: pl.DataFrame) -> pl.DataFrame:
    """``repeat_tokens``/``repeat_cost_usd`` for every finding; ``wasted_tokens``/``cost_usd`` only for stuck ones."""
    tok, cost = pl.col("wasted_tokens").fill_null(0), pl.col("cost_usd").fill_null(0.0)
    return frame.with_columns(
        tok.alias("repeat_tokens"),
        cost.alias("repeat_cost_usd"),
        pl.when(pl.col("stuck")).then(tok).otherwise(0).alias("wasted_tokens"),
        pl.when(pl.col("stuck")).then(cost).otherwise(0.0).alias("cost_usd"),
    )


def _text_findings(
    c: pl.DataFrame, members: pl.DataFrame, single: list[bool], verdicts: list[tuple[int, str]], info: pl.DataFrame
) -> pl.DataFrame:
    """The figures of every text loop; its calls are the calls its messages issued, anywhere in the session."""
    if not single:
        return _empty_findings()
    head = (
        members.filter(pl.col("lead"))
        .sort("tid")
        .with_columns(
            pl.Series("single", single, pl.Boolean),
            pl.Series("_judged_repeats", [v[0] for v in verdicts], pl.Int32),
            pl.Series("why", [v[1] for v in verdicts], pl.String),
        )
    )
    per_msg = members.group_by("tid", maintain_order=True).agg(
        pl.len().alias("_n"),
        pl.col("turn_index").last().alias("last_turn_index"),
        pl.col("est_tokens").filter(~pl.col("first")).sum().alias("_est_rest"),
    )
    member_turns = members.group_by("tid", "session_id", "turn_id").agg(pl.col("first").any().alias("_in_first"))
    issued = (
        member_turns.join(
            c.select("row", "session_id", "turn_id", "seq", "call_id", "tool", "progress"),
            on=["session_id", "turn_id"],
            nulls_equal=True,
        )
        .sort(["tid", "row"])
        .with_columns((~pl.col("_in_first")).alias("_later"))
    )
    per_call = issued.group_by("tid", maintain_order=True).agg(
        pl.col("tool").unique(maintain_order=True).alias("tools"),
        pl.col("call_id").alias("call_ids"),
        pl.col("seq").first().alias("first_seq"),
        pl.col("seq").last().alias("last_seq"),
        pl.col("progress").filter(pl.col("_later")).fill_null(False).any().alias("_progress"),
        pl.col("row").alias("_rows"),
    )
    costs = _costs(_with_turns(members.select(pl.col("tid").alias("fid"), "session_id", "turn_id", "first"), info))
    t = (
        head.join(per_msg, on="tid", maintain_order="left")
        .join(per_call, on="tid", how="left", maintain_order="left")
        .join(costs.rename({"fid": "tid"}), on="tid", how="left", maintain_order="left")
        .with_columns(
            pl.col("tools").fill_null(_EMPTY_STRINGS),
            pl.col("call_ids").fill_null(_EMPTY_STRINGS),
            pl.col("_rows").fill_null(pl.lit([], pl.List(pl.Int64))),
            pl.col("_progress").fill_null(False),
        )
    )
    t = t.with_columns(pl.col("_judged_repeats").alias("repeats"))
    single_est = (pl.col("est_tokens") * (pl.col("repeats") - 1)) // pl.max_horizontal(pl.col("repeats"), 1)
    ids = [digest(f"{s}\x00text\x00t{i}") for s, i in zip(t["session_id"].to_list(), t["turn_index"].to_list())]
    alone = pl.col("single")
    t = t.with_columns(
        pl.Series("finding_id", ids, pl.String),
        pl.lit("text").alias("kind"),
        pl.lit(None, pl.Int32).alias("period"),
        pl.when(alone).then(True).otherwise(~pl.col("_progress")).alias("stuck"),
        pl.when(alone).then(_EMPTY_STRINGS).otherwise(pl.col("turn_ids").fill_null(_EMPTY_STRINGS)).alias("turn_ids"),
        pl.when(alone).then(0).otherwise(pl.col("wasted_tokens").fill_null(0)).alias("wasted_tokens"),
        pl.when(alone).then(0.0).otherwise(pl.col("cost_usd").fill_null(0.0)).alias("cost_usd"),
        pl.when(alone).then(single_est).otherwise(pl.col("_est_rest")).alias("estimated_tokens"),
        pl.col("turn_index").alias("first_turn_index"),
        pl.Series("repeated", [_text_label(x) for x in t["text"].to_list()], pl.String),
    )
    return _finish(t.with_columns(pl.col("tid").alias("_tid")))


def _text_label(text: str | None) -> str:
    norm = " ".join((text or "").split())
    return norm if len(norm) <= LABEL_CHARS else norm[: LABEL_CHARS - 1] + "…"


def _empty_findings() -> pl.DataFrame:
    return pl.DataFrame(
        schema={**{c.name: c.polars for c in FINDINGS.columns}, "_rows": pl.List(pl.Int64), "_tid": pl.Int64}
    )


def _finish(per: pl.DataFrame) -> pl.DataFrame:
    """Columns in ``schema.FINDINGS`` order and types, plus ``_rows`` (the calls) and ``_tid`` (text loops)."""
    if "_tid" not in per.columns:
        per = per.with_columns(pl.lit(None, pl.Int64).alias("_tid"))
    per = _split_waste(per)
    return per.with_columns(
        pl.col("turn_ids").fill_null(_EMPTY_STRINGS),
        pl.col("wasted_tokens").fill_null(0),
        pl.col("cost_usd").fill_null(0.0),
    ).select(*[pl.col(c.name).cast(c.polars) for c in FINDINGS.columns], "_rows", "_tid")


# -- order and membership --------------------------------------------------------------------------------------------


def _assign(c: pl.DataFrame, m: pl.DataFrame, findings: pl.DataFrame, text_members: pl.DataFrame) -> Episodes:
    """Sort each session's findings as the reference does and point every call to the first finding (in that
    order) that holds it, every message to its text finding."""
    ranked = (
        findings.with_columns(
            pl.col("first_seq").fill_null(-1).alias("_s"),
            pl.col("first_turn_index").fill_null(0).alias("_t"),
        )
        .sort(["session_id", "user_turn", "_s", "_t", "kind"], maintain_order=True)
        .with_row_index("_rank")
    )
    member = (
        ranked.select("_rank", "finding_id", pl.col("_rows").alias("row"))
        .explode("row")
        .drop_nulls("row")
        .sort("_rank")
        .unique("row", keep="first")
    )
    call_finding = c.select("row").join(member, on="row", how="left", maintain_order="left")["finding_id"]
    texts = text_members.select("mrow", "tid").join(
        ranked.filter(pl.col("_tid").is_not_null()).select("_tid", "finding_id"), left_on="tid", right_on="_tid"
    )
    message_finding = m.select("mrow").join(
        texts.select("mrow", "finding_id"), on="mrow", how="left", maintain_order="left"
    )["finding_id"]
    return Episodes(ranked.select(FINDINGS.names), call_finding, message_finding)
