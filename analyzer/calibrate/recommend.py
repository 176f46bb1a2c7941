"""Calibration: sweep a guard's warn/halt thresholds (and pi's window and similarity bar) over the whole store, find the
frontier of tokens saved against healthy work interrupted, and recommend the setting for a target false-halt rate.

``calibrate_store`` runs it: the stored signals a batch of sessions at a time (``SESSION_BATCH``), every setting as
a few polars expressions (``analyzer.calibrate.sweep`` documents the measure of each base policy, what a halt saves
and hits, and the approximations), the frontier and the recommendation (below), the text to paste into each guard
(``analyzer.calibrate.paste``), then **one exact replay** of the recommended setting (``analyzer.guards.replay``, in
chunks of sessions on every core: ``verify_parts``) so the sweep's figures can be checked against the real guard's
— both are printed. The result is saved in the store (``calibration_runs``, ``calibration_sweep``);
``latest_calibration`` reads it back for the report.

- **False halt**: a halt whose call is not in a stuck finding or a ``stuck`` label span (it hit a progressing repeat,
  a ``benign`` span, or no loop at all). The false-halt rate is the share of sessions in scope (scanned, matching the
  filter) with at least one false halt.
- **Frontier**: the settings no other setting beats on both axes — more tokens saved at a false-halt rate as low or
  lower. Ties (same rate, same tokens: settings that differ only in the warning, or in a setting that changes
  nothing here) go to a warning held to the target as well (``false_warn_rate``: a warning blocks the call in
  open-codesign and pi), then more stuck episodes caught, fewer sessions warned on healthy work, fewer calls to
  detect, the later halt and warning (gentler for the same effect), and the base guard's own window and similarity.
- **Recommendation**: the frontier setting that saves the most tokens with a false-halt rate at or under the target
  (1% by default). When none qualifies, the setting with the lowest rate is recommended and flagged
  (``qualified`` false).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.calibrate.labels import LabelSpans, read_labels, resolve_labels
from analyzer.calibrate.paste import paste_settings
from analyzer.calibrate.sweep import (
    BASES,
    CLASSES,
    NONE,
    STUCK,
    SWEEP_SCHEMA,
    WINDOW_COLUMNS,
    Frames,
    SweepParts,
    finish_sweep,
    fixed_false_halts,
    load_frames,
    load_scope,
    measures,
    variant_parts,
)
from analyzer.errors import UsageError
from analyzer.guards.policies import PRESETS, Policy, resolve
from analyzer.store.connection import frame, has_table, one, transaction
from analyzer.store.filters import SessionFilter, SessionIds

if TYPE_CHECKING:
    import duckdb

    from analyzer.guards.replay import Corpus, CorpusFrames
    from analyzer.results import Calibration

DEFAULT_BASE = "open-codesign"  # the sweep that matches its guard exactly on the recorded calls
DEFAULT_TARGET = 0.01
# Below these, a sweep's recommendation is noise: a false-halt rate of r cannot be told from 0 over fewer than 1/r
# healthy sessions, and a catch rate over fewer than 20 stuck loops is not worth the name. Calibration then keeps the
# guard's shipped defaults and says why, with the counts.
MIN_STUCK_LOOPS = 20
DEFAULT_RANGE = tuple(range(2, 16))
SIMILARITY_OFF = "off"
PROXY_TEXT = "the scan's findings (a halt in a stuck finding is right; in a progressing one or in none, false)"


# -- the grid ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    """The swept values. ``windows`` / ``similarities`` None = the base's defaults (only a base whose ``SweepSpec``
    sweeps windows has them: pi-anti-doom-loop; a similarity of None means near-identical matching off). Guards with
    one threshold (``SweepSpec.one_threshold``) take it from ``halts``, with ``warn`` = ``halt``."""

    warns: tuple[int, ...] = DEFAULT_RANGE
    halts: tuple[int, ...] = DEFAULT_RANGE
    windows: tuple[int | None, ...] | None = None
    similarities: tuple[float | None, ...] | None = None

    def pairs(self, base: str) -> list[tuple[int, int]]:
        spec = BASES[base]
        if spec.has_warn and not spec.one_threshold:
            return [(w, h) for h in self.halts for w in self.warns if w <= h]
        return [(h, h) for h in self.halts]

    def variants(self, base: str) -> list[tuple[int | None, float | None]]:
        spec = BASES[base]
        if not spec.sweeps_window:
            return [(None, None)]
        windows = self.windows if self.windows is not None else spec.windows
        sims = self.similarities if self.similarities is not None else spec.similarities
        return [(w, s) for w in windows for s in sims]

    def size(self, base: str) -> int:
        return len(self.pairs(base)) * len(self.variants(base))

    def to_json(self, base: str) -> dict[str, Any]:
        vs = self.variants(base)
        pairs = self.pairs(base)
        return {
            "warn": sorted({w for w, _ in pairs}),
            "halt": sorted({h for _, h in pairs}),
            "window": sorted({w for w, _ in vs if w is not None}),
            "similarity": sorted({s for _, s in vs if s is not None})
            + ([SIMILARITY_OFF] if any(s is None for _, s in vs) and BASES[base].sweeps_window else []),
        }


def parse_range(text: str, option: str) -> tuple[int, ...]:
    """``2-15``, ``3,5,8`` or ``4`` (combinable: ``2-5,8``) as sorted thresholds of at least 2."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            a, b = int(lo), int(hi) if sep else int(lo)
            if b < a:
                raise UsageError(f"{option}: {part!r} runs backwards")
            out.update(range(a, b + 1))
    except ValueError:
        raise UsageError(f"{option}: expected thresholds like 2-15 or 3,5,8, got {text!r}") from None
    if not out:
        raise UsageError(f"{option}: no thresholds in {text!r}")
    if min(out) < 2 or max(out) > 1000:
        raise UsageError(f"{option}: thresholds must lie between 2 and 1000, got {text!r}")
    return tuple(sorted(out))


def parse_windows(text: str) -> tuple[int | None, ...]:
    try:
        vals = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--windows: expected window sizes like 5,10,20, got {text!r}") from None
    bad = [v for v in vals if v not in WINDOW_COLUMNS]
    if bad or not vals:
        raise UsageError(
            f"--windows: the store keeps window counts over {', '.join(map(str, WINDOW_COLUMNS))} "
            f"calls only, got {text!r}"
        )
    return tuple(vals)


def parse_similarities(text: str) -> tuple[float | None, ...]:
    out: list[float | None] = []
    for x in text.split(","):
        x = x.strip().lower()
        if not x:
            continue
        if x in (SIMILARITY_OFF, "none", "exact"):
            out.append(None)
            continue
        try:
            v = float(x)
        except ValueError:
            raise UsageError(f"--similarities: expected bars like off,0.55,0.7, got {text!r}") from None
        if not 0 < v <= 1:
            raise UsageError(f"--similarities: a bar is a shared-token score in (0, 1], got {x}")
        out.append(v)
    if not out:
        raise UsageError(f"--similarities: no bars in {text!r}")
    return tuple(dict.fromkeys(out))


# -- results -----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verification:
    """The exact replay of the recommended setting, with the sweep's definitions applied to its halts."""

    policy: str
    halts: int
    halts_stuck: int
    halts_progress: int
    halts_none: int
    halts_benign: int
    sessions_halted: int
    false_halt_sessions: int
    false_halt_rate: float
    stuck_caught: int
    median_calls_to_detect: float | None
    tokens_saved: int
    dollars_saved: float
    calls_saved: int
    seconds: float


COMPARED = (
    "halts",
    "halts_stuck",
    "halts_progress",
    "halts_none",
    "halts_benign",
    "false_halt_sessions",
    "false_halt_rate",
    "stuck_caught",
    "median_calls_to_detect",
    "tokens_saved",
    "dollars_saved",
    "calls_saved",
)


@dataclass
class CalibrationResult:
    """One calibrate run: the sweep (one row per setting, with ``on_frontier`` and ``recommended``), the
    recommendation, the text to paste, and the exact replay of the recommended setting."""

    run_id: str
    base: str
    computed_at: datetime
    scope: str
    target: float
    grid: Grid
    sweep: pl.DataFrame
    sessions: int
    unscanned: int
    stuck_episodes: int
    total_tokens: int
    total_cost: float
    labels: LabelSpans | None = None
    recommended: dict[str, Any] | None = None
    qualified: bool = False
    rationale: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    verification: Verification | None = None
    sweep_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    too_few: str = ""  # why the corpus cannot support the target (the defaults are kept), or ""

    @property
    def frontier(self) -> pl.DataFrame:
        return self.sweep.filter(pl.col("on_frontier")).sort("false_halt_rate", "tokens_saved")

    @property
    def caveat(self) -> str:
        return BASES[self.base].caveat

    @property
    def labels_text(self) -> str:
        return _labels_text(self.labels.source, self.labels.rows) if self.labels else PROXY_TEXT

    def comparison(self) -> pl.DataFrame:
        """The recommended setting's figures from the sweep and from the exact replay, one row per figure."""
        rec = self.recommended or {}
        ver = asdict(self.verification) if self.verification else {}
        rows = [(k, _num(rec.get(k)), _num(ver.get(k)) if ver else None) for k in COMPARED]
        return pl.DataFrame(
            rows, schema={"figure": pl.String, "sweep": pl.Float64, "exact_replay": pl.Float64}, orient="row"
        )

    def to_json(self) -> dict[str, Any]:
        """What ``loopscope calibrate --format json`` prints: the run, the recommendation, the text to paste, the exact
        replay and every sweep row."""
        return {
            "run_id": self.run_id,
            "base_policy": self.base,
            "computed_at": self.computed_at.isoformat(),
            "scope": self.scope,
            "sessions": self.sessions,
            "unscanned_sessions": self.unscanned,
            "stuck_episodes": self.stuck_episodes,
            "total_tokens": self.total_tokens,
            "total_cost_usd": self.total_cost,
            "labels": (
                {"file": self.labels.source, "rows": self.labels.rows, "skipped": self.labels.skipped}
                if self.labels
                else None
            ),
            "target_false_halt_rate": self.target,
            "grid": self.grid.to_json(self.base),
            "recommendation": (
                {**self.recommended, "qualified": self.qualified, "rationale": self.rationale}
                if self.recommended
                else None
            ),
            "settings": self.settings,
            "verification": asdict(self.verification) if self.verification else None,
            "approximation": self.caveat,
            "sweep_seconds": self.sweep_seconds,
            "sweep": self.sweep.to_dicts(),
        }

    def headline(self) -> str:
        """One line for a summary: the recommendation and what it saves, or why there is none."""
        r = self.recommended
        if r is None:
            return f"{self.base}: nothing to sweep"
        where = "".join(f", {k} {r[k]:g}" for k in ("window", "similarity") if r[k] is not None)
        within = (
            f"within the {_pct(self.target)} target"
            if self.qualified
            else f"no setting meets the {_pct(self.target)} target"
        )
        if self.too_few:
            within = "the shipped defaults, kept: too few loops to calibrate"
        exact = ""
        if self.verification is not None:
            exact = (
                f"; exact replay {self.verification.tokens_saved:,} tokens at {_pct(self.verification.false_halt_rate)}"
            )
        return (
            f"{self.base}: warn {r['warn']}, halt {r['halt']}{where} saves {r['tokens_saved']:,} tokens "
            f"(${r['dollars_saved']:,.2f}) at {_pct(r['false_halt_rate'])} sessions with a false halt, {within} "
            f"({self.sweep.height:,} settings){exact}"
        )

    def to_report(self) -> Calibration:
        """The report's ``Calibration`` (sweep, frontier, recommendation with the text to paste)."""
        return _report(self.sweep, self.recommended, self.target, self.settings, self.rationale, self.labels_text)


def _labels_text(source: str, rows: int) -> str:
    return f"labels file {source} ({rows:,} rows), then the scan's findings where unlabelled"


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def _report(
    sweep: pl.DataFrame,
    rec: dict[str, Any] | None,
    target: float,
    settings: dict[str, str],
    rationale: str,
    labels: str,
) -> Calibration:
    from analyzer.results import Calibration, Recommendation

    front = sweep.filter(pl.col("on_frontier")) if "on_frontier" in sweep.columns else None
    recommendation = None
    if rec is not None:
        recommendation = Recommendation(
            warn=int(rec["warn"]),
            halt=int(rec["halt"]),
            window=rec.get("window"),
            similarity=rec.get("similarity"),
            target_false_halt_rate=target,
            stuck_caught=rec.get("stuck_caught"),
            tokens_saved=rec.get("tokens_saved"),
            dollars_saved=rec.get("dollars_saved"),
            false_halt_rate=rec.get("false_halt_rate"),
            settings=dict(settings),
            rationale=rationale,
        )
    return Calibration(sweep=sweep, frontier=front, recommendation=recommendation, labels=labels)


# -- ranking -----------------------------------------------------------------------------------------------------------
def _tie_keys(sweep: pl.DataFrame, params: dict[str, Any], base: str, target: float) -> pl.DataFrame:
    windowed = BASES[base].sweeps_window
    default_w = params.get("window") if windowed else None
    default_s = params.get("similarity") if windowed and params.get("near_identical_calls") else None
    wd = (pl.col("window") - default_w).abs() if default_w is not None else pl.lit(0)
    if default_s is None:
        sd = pl.when(pl.col("similarity").is_null()).then(0.0).otherwise(1.0)
    else:
        sd = pl.when(pl.col("similarity").is_null()).then(1.0).otherwise((pl.col("similarity") - default_s).abs())
    warn_ok = pl.col("false_warn_rate") <= target + 1e-12
    return sweep.with_columns(wd.fill_null(0).alias("_wd"), sd.alias("_sd"), warn_ok.alias("_warn_ok"))


# Between settings that save the same tokens at the same false-halt rate (they differ in the warning, or in settings
# that change nothing): warnings held to the target too, then more stuck episodes caught, fewer sessions warned on
# healthy work, earlier detection, the gentler halt and warning, the guard's own window and similarity.
_TIES = (
    ["_warn_ok", "stuck_caught", "false_warn_sessions", "median_calls_to_detect", "halt", "warn", "_wd", "_sd"],
    [True, True, False, False, True, True, False, False],
)


def rank(sweep: pl.DataFrame, target: float, params: dict[str, Any], base: str) -> tuple[pl.DataFrame, bool]:
    """Mark the frontier and the recommended row; say whether the recommendation meets the target."""
    if sweep.height == 0:
        return sweep.with_columns(pl.lit(False).alias("on_frontier"), pl.lit(False).alias("recommended")), False
    d = _tie_keys(sweep, params, base, target).with_row_index("_i")
    cols, desc = _TIES
    by_rate = d.sort(["false_halt_rate", "tokens_saved", *cols], descending=[False, True, *desc], nulls_last=True)
    best_before = pl.col("tokens_saved").cum_max().shift(1).fill_null(-1)
    front = by_rate.filter(pl.col("tokens_saved") > best_before)["_i"].to_list()
    ok = d.filter(pl.col("false_halt_rate") <= target + 1e-12)
    qualified = ok.height > 0
    if qualified:
        pick = ok.sort(["tokens_saved", "false_halt_rate", *cols], descending=[True, False, *desc], nulls_last=True)
    else:
        pick = by_rate
    chosen = int(pick["_i"][0])
    out = d.with_columns(pl.col("_i").is_in(front).alias("on_frontier"), (pl.col("_i") == chosen).alias("recommended"))
    return out.drop("_i", "_wd", "_sd", "_warn_ok"), qualified


# -- the run -----------------------------------------------------------------------------------------------------------
def base_policy(name: str) -> Policy:
    """The preset whose measure is swept; only the guards the sweep models."""
    (pol,) = resolve([name])
    if pol.engine not in BASES:
        raise UsageError(f"--policy {name}: calibration sweeps {', '.join(BASES)}; {pol.engine} is replay-only")
    return pol


def sweep_frames(base: Policy, frames: Frames, grid: Grid) -> pl.DataFrame:
    """Every setting of ``grid`` for ``base`` over loaded frames (no store access)."""
    return finish_sweep(sweep_parts(base, frames, grid), frames.sessions, frames.episodes.height)


def sweep_parts(base: Policy, frames: Frames, grid: Grid) -> list[SweepParts]:
    """``frames``' share of every setting of ``grid`` for ``base``, one part per variant (``finish_sweep`` adds the
    parts of every batch of sessions up)."""
    pairs = grid.pairs(base.engine)
    return [
        variant_parts(measures(base.engine, frames, base.params, w, s), frames, pairs, w, s)
        for w, s in grid.variants(base.engine)
    ]


SESSION_BATCH = 400
"""Sessions calibrate loads, sweeps and replays at a time. The sweep's figures are sums over sessions, so a batch's
are added to the others' and nothing the size of the corpus is held: the signals of every call and the replay's
Python objects of every call and message (1.4 GB at 2,400 sessions, 346k calls, in one pass) are a batch's only."""


def session_batches(ids: list[str], size: int | None = None) -> list[SessionIds]:
    """``ids`` (the scope, in order) as consecutive batches of ``size`` sessions (default ``SESSION_BATCH``)."""
    n = size or SESSION_BATCH
    return [SessionIds(tuple(ids[i : i + n])) for i in range(0, len(ids), n)]


def policy_for(base: Policy, row: dict[str, Any]) -> Policy:
    """The exact guard a sweep row stands for: the base with the row's thresholds (and window, similarity)."""
    return base.with_settings(base.engine_class.sweep_settings(row, base.params))


def calibrate_store(
    con: duckdb.DuckDBPyConnection,
    base: str = DEFAULT_BASE,
    flt: SessionFilter = SessionFilter(),
    labels: Path | str | LabelSpans | None = None,
    target: float = DEFAULT_TARGET,
    grid: Grid | None = None,
    verify: bool = True,
    save: bool = True,
    workers: int | None = None,
    enough: bool = True,
    alongside: Alongside | None = None,
) -> CalibrationResult:
    """Sweep ``base``'s thresholds over the scanned sessions matching ``flt``, recommend a setting for ``target``,
    verify it with one exact replay (``verify``) and record the run in the store (``save``; needs a writable
    connection). With ``enough`` (the default), a corpus too small to support the target keeps the guard's
    defaults (``CalibrationResult.too_few`` says why); ``enough=False`` recommends from any corpus. ``alongside``:
    policies the exact replay's jobs also replay (``verify_parts``)."""
    if not 0 <= target <= 1:
        raise UsageError(f"--target-false-halt-rate must lie between 0 and 1 (0.01 = 1%), got {target}")
    pol = base_policy(base)
    grid = grid or Grid()
    if not has_table(con, "scan_state"):
        raise UsageError("the store was never scanned: run `loopscope scan` first (calibration reads its signals)")
    spans = (
        labels
        if isinstance(labels, LabelSpans) or labels is None
        else resolve_labels(con, read_labels(Path(labels)), labels)
    )
    t0 = time.perf_counter()
    scope = load_scope(con, flt)
    if not scope.ids:
        what = "matching the filter " if flt.active else ""
        raise UsageError(f"no scanned sessions {what}in the store: run `loopscope scan` first")
    parts: list[SweepParts] = []
    kept: list[Frames] = []  # what the exact replay reads of each batch, without the signals
    stuck = sick = fixed = 0
    # pi's text-rule halts are ordered by position across sessions before their costs are summed, so a batch's
    # cost sums would round differently from one pass: its sweep takes the scope in one batch (the replay does not).
    sweep_batch = len(scope.ids) if BASES[pol.engine].text_rules else None
    for batch in session_batches(scope.ids, sweep_batch):
        frames = load_frames(con, batch, spans.spans if spans is not None else None, texts=BASES[pol.engine].text_rules)
        parts.extend(sweep_parts(pol, frames, grid))
        stuck += frames.episodes.height
        sick += frames.episodes["sidx"].n_unique()
        fixed += fixed_false_halts(frames, pol.engine, pol.params)
        if verify:
            kept.append(frames.for_verification())
        del frames
    sweep = finish_sweep(parts, len(scope.ids), stuck)
    del parts
    sweep, qualified = rank(sweep, target, pol.params, pol.engine)
    too_few = _too_few(len(scope.ids), stuck, sick, target) if enough else ""
    if too_few:
        sweep, qualified = _keep_defaults(sweep, pol), False
    seconds = time.perf_counter() - t0
    res = CalibrationResult(
        run_id=uuid.uuid4().hex[:16],
        base=pol.name,
        computed_at=datetime.now(UTC).replace(tzinfo=None),
        scope=_scope_text(flt),
        target=target,
        grid=grid,
        sweep=sweep,
        sessions=len(scope.ids),
        unscanned=scope.unscanned,
        stuck_episodes=stuck,
        total_tokens=scope.total_tokens,
        total_cost=scope.total_cost,
        labels=spans,
        qualified=qualified,
        sweep_seconds=seconds,
        too_few=too_few,
    )
    _notes(res, fixed)
    rec_rows = sweep.filter(pl.col("recommended")).drop("on_frontier", "recommended").to_dicts()
    if rec_rows:
        res.recommended = rec_rows[0]
        chosen = policy_for(pol, res.recommended)
        res.settings = paste_settings(
            pol.engine,
            int(res.recommended["warn"]),
            int(res.recommended["halt"]),
            res.recommended["window"],
            res.recommended["similarity"],
            chosen.params,
            {k: p.params for k, p in PRESETS.items()},
        )
        if verify:
            t1 = time.perf_counter()
            vparts = verify_parts(con, chosen, kept, workers, alongside)
            res.verification = finish_verification(chosen, vparts, res.sessions, time.perf_counter() - t1)
        res.rationale = _rationale(res, grid.size(pol.engine))
    if save:
        save_calibration(con, res)
    return res


def _too_few(sessions: int, stuck: int, sick: int, target: float) -> str:
    """Why the corpus cannot support a recommendation for ``target``, with the counts (``stuck`` episodes in
    ``sick`` sessions); "" when it can."""
    healthy = sessions - sick
    needed = math.ceil(1 / target) if target > 0 else None
    short = []
    if needed is not None and healthy < needed:
        short.append(
            f"{healthy:,} sessions without a stuck loop (measuring a {_pct(target)} false-halt rate needs {needed:,})"
        )
    if stuck < MIN_STUCK_LOOPS:
        short.append(f"{stuck:,} stuck loops (a catch rate needs {MIN_STUCK_LOOPS})")
    return " and ".join(short)


def _keep_defaults(sweep: pl.DataFrame, pol: Policy) -> pl.DataFrame:
    """Mark the row of the guard's own defaults as the recommendation (none when the grid does not hold them)."""
    rows = sweep.drop("on_frontier", "recommended").to_dicts()
    mine = [i for i, r in enumerate(rows) if policy_for(pol, r).params == pol.params]
    return sweep.with_columns(pl.Series("recommended", [i == (mine[0] if mine else -1) for i in range(len(rows))]))


def _scope_text(flt: SessionFilter) -> str:
    parts = [
        f"since {flt.since}" if flt.since else "",
        f"until {flt.until}" if flt.until else "",
        f"agent {flt.agent}" if flt.agent else "",
        f"project contains {flt.project!r}" if flt.project else "",
    ]
    return ", ".join(p for p in parts if p) or "all sessions"


def _notes(res: CalibrationResult, fixed: int) -> None:
    if res.unscanned:
        res.notes.append(
            f"{res.unscanned:,} sessions matching the filter were never scanned and are left out; run "
            "`loopscope scan` to include them"
        )
    if res.labels is not None and res.labels.skipped:
        res.notes.append(
            f"{res.labels.skipped:,} label rows name sessions that are not in the store; they were skipped"
        )
    if res.stuck_episodes == 0:
        res.notes.append("no stuck episodes in scope: every halt counts as a false halt")
    if fixed and fixed / max(res.sessions, 1) > res.target:
        res.notes.append(
            f"pi's text rules, which no swept setting changes (PI_ANTI_LOOP_TEXT_REPEATS is not swept), "
            f"halt {fixed:,} sessions outside stuck loops on their own "
            f"({_pct(fixed / max(res.sessions, 1))}) unless a tool-call halt stops those runs first"
        )


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def _rationale(res: CalibrationResult, n: int) -> str:
    r = res.recommended or {}
    if res.too_few:
        what = (
            f"Too few loops to calibrate for a {_pct(res.target)} false-halt rate: {res.too_few}. Keeping "
            f"{res.base}'s shipped defaults; here they would save {r['tokens_saved']:,} tokens "
            f"(${r['dollars_saved']:,.2f})"
        )
        text = (
            f"{what}, with {r['false_halt_sessions']:,} of {res.sessions:,} sessions halted falsely "
            f"({_pct(r['false_halt_rate'])}) and {r['stuck_caught']:,} of {res.stuck_episodes:,} stuck episodes "
            f"caught; {n:,} settings of {res.base} swept."
        )
        v = res.verification
        if v is not None:
            text += (
                f" Exact replay of the defaults: {v.tokens_saved:,} tokens (${v.dollars_saved:,.2f}) saved, "
                f"{v.false_halt_sessions:,} sessions with a false halt ({_pct(v.false_halt_rate)})."
            )
        return text
    what = (
        f"Saves the most tokens ({r['tokens_saved']:,}, ${r['dollars_saved']:,.2f}) of the settings whose "
        f"false-halt rate is at most {_pct(res.target)}"
        if res.qualified
        else f"No setting keeps the false-halt rate at or under {_pct(res.target)}; this one has the lowest "
        f"({_pct(r['false_halt_rate'])}): review its false halts before adopting it"
    )
    text = (
        f"{what}: {r['false_halt_sessions']:,} of {res.sessions:,} sessions with a false halt "
        f"({_pct(r['false_halt_rate'])}), {r['stuck_caught']:,} of {res.stuck_episodes:,} stuck episodes caught; "
        f"{n:,} settings of {res.base} swept."
    )
    v = res.verification
    if v is not None:
        text += (
            f" Exact replay of this setting: {v.tokens_saved:,} tokens (${v.dollars_saved:,.2f}) saved, "
            f"{v.false_halt_sessions:,} sessions with a false halt ({_pct(v.false_halt_rate)})."
        )
    else:
        text += " Not verified by an exact replay (`loopscope calibrate` does that)."
    return text


# -- the exact replay --------------------------------------------------------------------------------------------------
def verify_setting(
    con: duckdb.DuckDBPyConnection, policy: Policy, flt: SessionFilter, frames: Frames, workers: int | None = None
) -> Verification:
    """Replay ``policy`` exactly over the sessions the sweep covered and score its halts the sweep's way."""
    t0 = time.perf_counter()
    part = verify_part(con, policy, flt, frames, workers)
    return finish_verification(policy, [part], frames.sessions, time.perf_counter() - t0)


@dataclass
class VerifyPart:
    """One batch of sessions' share of the exact replay's figures: its halts (``cls`` and what each saved; the
    float sum of their cost is taken once over all batches, as one replay would) and the calls to detection of each
    episode caught (``d``: the median needs them all)."""

    halts: pl.DataFrame
    detect: pl.Series
    sessions_halted: int
    false_halt_sessions: int


VERIFY_POOL_MIN = 2 * SESSION_BATCH
"""Fewer sessions to replay than this and the exact replay runs in this process: starting two spawned workers costs
about 1.5 s of CPU (their imports)."""

VERIFY_CHUNK = 125
"""Sessions a job of the exact replay builds and replays: with a whole sweep batch a job, two workers and the jobs in
flight lifted a cold ``analyze`` of 2,400 sessions from 913 to 1,344 MB."""


@dataclass
class Alongside:
    """Policies to replay alongside the exact replay, over those of its sessions that ``sessions`` names: each job
    builds its sessions once for both. ``analyze`` hands the report's preset guards here, so that a cold run reads
    and builds every session once for the calibration and the report, not twice. ``rows`` collects their
    per-session replay rows (``Replay.sessions``), a frame a job; empty when no exact replay ran."""

    policies: tuple[Policy, ...]
    sessions: frozenset[str]
    rows: list[pl.DataFrame] = field(default_factory=list)


def verify_parts(
    con: duckdb.DuckDBPyConnection,
    policy: Policy,
    kept: list[Frames],
    workers: int | None = None,
    alongside: Alongside | None = None,
) -> list[VerifyPart]:
    """The exact replay of ``policy`` over every batch of the sweep (``kept``: each sweep batch's frames), scored
    the sweep's way, one part a batch, in order. The main process reads chunks of ``VERIFY_CHUNK`` sessions that lie
    next to each other in the store (``in_place_order``), each read bounded by their rows (a chunk cut from the
    batches' sessions by id read the whole table: the reads were half a calibration); a pool of spawned workers
    (``workers``; default one per core when there are enough sessions) builds and replays them
    (``machine.run_chunks``). A session's halts come back in run order, so sorting a batch's halts by session,
    stably, gives the order one pass over the batch gives (the cost sums add up in the same order). ``alongside``:
    policies each job also replays over some of its sessions (``exact_replay_alongside``)."""
    from analyzer.guards.replay import read_corpus
    from analyzer.machine import cores, run_chunks
    from analyzer.store.connection import in_place_order, record_places

    record_places(con)
    order = in_place_order(con, [sid for f in kept for sid in f.scope_ids])
    jobs = session_batches(order, VERIFY_CHUNK)
    if not jobs:
        return []
    n = workers if workers is not None else (cores() if len(order) >= VERIFY_POOL_MIN else 1)

    def job(i: int) -> tuple[Any, ...]:
        args = (read_corpus(con, jobs[i], placed=True), policy, list(jobs[i].ids))
        return args if alongside is None else (*args, alongside.policies, alongside.sessions.intersection(jobs[i].ids))

    replayed: dict[int, tuple[pl.DataFrame, ...]] = {}
    run_chunks(exact_replay if alongside is None else exact_replay_alongside, job, len(jobs), n, replayed.__setitem__)
    if alongside is not None:
        alongside.rows.extend(replayed[i][2] for i in range(len(jobs)))
    halts = pl.concat([replayed[i][0] for i in range(len(jobs))])
    acted = pl.concat([replayed[i][1] for i in range(len(jobs))])
    parts = []
    for frames in kept:
        if frames.scope_ids:
            mine = pl.Series("session_id", frames.scope_ids, dtype=pl.String).implode()
            parts.append(
                score_part(
                    halts.filter(pl.col("session_id").is_in(mine)).sort("session_id", maintain_order=True),
                    acted.filter(pl.col("session_id").is_in(mine)).sort("session_id", maintain_order=True),
                    frames,
                )
            )
    return parts


def verify_part(
    con: duckdb.DuckDBPyConnection, policy: Policy, flt: SessionFilter, frames: Frames, workers: int | None = None
) -> VerifyPart:
    """The exact replay of ``policy`` over the sessions of ``frames`` that match ``flt``, scored the sweep's way."""
    from analyzer.guards.replay import read_corpus

    return score_part(*exact_replay(read_corpus(con, flt), policy, frames.scope_ids, workers), frames)


def exact_replay(
    corpus_frames: CorpusFrames, policy: Policy, scope_ids: list[str], workers: int | None = 1
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``policy`` replayed over the sessions of ``corpus_frames`` that lie in ``scope_ids``: its halts, and the
    calls it warned or halted (``session_id, seq``). A job of ``verify_parts`` (in a worker process: the
    sessions' Python objects never reach the main one)."""
    from analyzer.machine import gc_paused

    with gc_paused():
        return _exact(_scoped(corpus_frames, scope_ids), policy, workers)


def exact_replay_alongside(
    corpus_frames: CorpusFrames,
    policy: Policy,
    scope_ids: list[str],
    policies: tuple[Policy, ...],
    sessions: set[str] | frozenset[str],
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``exact_replay``, and ``policies`` replayed over its ``sessions`` from the same built sessions: their
    per-session rows (``Replay.sessions``), the rows a replay of those sessions alone gives (a session's replay
    depends on its own calls and findings)."""
    from analyzer.guards.replay import Corpus, replay
    from analyzer.machine import gc_paused

    with gc_paused():
        corpus = _scoped(corpus_frames, scope_ids)
        halts, acted = _exact(corpus, policy, 1)
        mine = Corpus([s for s in corpus.sessions if s.session_id in sessions], corpus.findings, corpus.scanned)
        return halts, acted, replay(mine, policies, workers=1).sessions


def _scoped(corpus_frames: CorpusFrames, scope_ids: list[str]) -> Corpus:
    """The sessions of ``corpus_frames`` that lie in ``scope_ids``, built."""
    from analyzer.guards.replay import build_corpus

    corpus = build_corpus(corpus_frames)
    keep = set(scope_ids)
    corpus.sessions = [s for s in corpus.sessions if s.session_id in keep]
    return corpus


def _exact(corpus: Corpus, policy: Policy, workers: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``policy``'s halts over ``corpus`` and the calls it warned or halted (``session_id, seq``)."""
    from analyzer.guards.replay import replay

    rep = replay(corpus, [policy], workers=workers, verdicts=True)
    halts = rep.halts.select(
        "session_id", pl.col("halt_seq").alias("seq"), "tokens_after_halt", "cost_after_halt_usd", "calls_after_halt"
    )
    return halts, rep.verdicts.filter(pl.col("at") == "call").select("session_id", "seq")


def score_part(halts: pl.DataFrame, acted: pl.DataFrame, frames: Frames) -> VerifyPart:
    """One batch's exact replay (``exact_replay``) scored against the sweep's frames of its sessions."""
    calls = frames.calls.select("session_id", "sidx", "seq", "run", "cls", "nested")
    h = halts.join(calls, on=["session_id", "seq"], how="left", maintain_order="left")
    # A halt without a call (a text rule stopped a run that issued none) interrupted no loop: "none".
    h = h.with_columns(pl.col("cls").fill_null(NONE))
    false_sessions = h.filter(pl.col("cls") != STUCK)["session_id"].n_unique()
    # Episodes caught: the first warning or halt inside each, no later than its run's halt.
    acts = acted.join(calls.select("session_id", "sidx", "seq", "run"), on=["session_id", "seq"])
    mem = frames.members.select("ep", "sidx", "seq").join(acts.select("sidx", "seq", "run"), on=["sidx", "seq"])
    first = mem.group_by("ep").agg(pl.col("seq").min().alias("det_seq"), pl.col("run").sort_by("seq").first())
    trips = h.filter(pl.col("run").is_not_null()).group_by("run").agg(pl.col("seq").min().alias("halt_seq"))
    det = (
        first.join(frames.episodes.select("ep", "first_seq"), on="ep")
        .join(trips, on="run", how="left")
        .filter(pl.col("halt_seq").is_null() | (pl.col("det_seq") <= pl.col("halt_seq")))
    )
    return VerifyPart(
        h.select("cls", "tokens_after_halt", "cost_after_halt_usd", "calls_after_halt"),
        det.select((pl.col("det_seq") - pl.col("first_seq") + 1).alias("d"))["d"],
        h["session_id"].n_unique(),
        false_sessions,
    )


def finish_verification(policy: Policy, parts: list[VerifyPart], sessions: int, seconds: float) -> Verification:
    """The exact replay's figures over every batch's ``parts`` (``sessions``: the sessions in scope)."""
    h = pl.concat([p.halts for p in parts]).rechunk()
    d = pl.concat([p.detect for p in parts]).rechunk()
    on = h["cls"].to_list()
    false_sessions = sum(p.false_halt_sessions for p in parts)
    med = d.median() if d.len() else None
    return Verification(
        policy=policy.name,
        halts=h.height,
        halts_stuck=on.count(0),
        halts_progress=on.count(1),
        halts_none=on.count(2),
        halts_benign=on.count(3),
        sessions_halted=sum(p.sessions_halted for p in parts),
        false_halt_sessions=false_sessions,
        false_halt_rate=false_sessions / max(sessions, 1),
        stuck_caught=d.len(),
        median_calls_to_detect=None if med is None else float(med),  # type: ignore[arg-type]
        tokens_saved=int(h["tokens_after_halt"].sum() or 0),
        dollars_saved=float(h["cost_after_halt_usd"].sum() or 0),
        calls_saved=int(h["calls_after_halt"].sum() or 0),
        seconds=seconds,
    )


# -- the store ---------------------------------------------------------------------------------------------------------
def save_calibration(con: duckdb.DuckDBPyConnection, res: CalibrationResult) -> None:
    """Append the run to ``calibration_runs`` and replace its base policy's rows in ``calibration_sweep``."""
    from analyzer.store.schema import CALIBRATION_RUNS, CALIBRATION_SWEEP

    run = {
        "run_id": res.run_id,
        "base_policy": res.base,
        "computed_at": res.computed_at,
        "scope": res.scope,
        "sessions": res.sessions,
        "unscanned_sessions": res.unscanned,
        "stuck_episodes": res.stuck_episodes,
        "total_tokens": res.total_tokens,
        "total_cost_usd": res.total_cost,
        "labels_file": res.labels.source if res.labels else None,
        "label_rows": res.labels.rows if res.labels else 0,
        "target_false_halt_rate": res.target,
        "grid": json.dumps(res.grid.to_json(res.base)),
        "settings": res.sweep.height,
        "recommended": json.dumps(res.recommended) if res.recommended else None,
        "qualified": res.qualified,
        "rationale": res.rationale,
        "paste": json.dumps(res.settings),
        "verification": json.dumps(asdict(res.verification)) if res.verification else None,
        "sweep_seconds": res.sweep_seconds,
        "verify_seconds": res.verification.seconds if res.verification else None,
    }
    runs = pl.DataFrame([run], schema={c.name: _PL[c.sql] for c in CALIBRATION_RUNS.columns})
    rows = res.sweep.with_columns(
        pl.lit(res.run_id).alias("run_id"), pl.lit(res.base).alias("base_policy"), pl.col("window").alias("window_size")
    )
    rows = rows.select([pl.col(c.name).cast(_PL[c.sql]) for c in CALIBRATION_SWEEP.columns])
    with transaction(con):
        con.execute("DELETE FROM calibration_sweep WHERE base_policy = ?", [res.base])
        for table, df in (("calibration_runs", runs), ("calibration_sweep", rows)):
            con.register("_cal_rows", df.to_arrow())
            try:
                con.execute(f"INSERT INTO {table} SELECT * FROM _cal_rows")
            finally:
                con.unregister("_cal_rows")


_PL: dict[str, Any] = {
    "VARCHAR": pl.String,
    "BIGINT": pl.Int64,
    "INTEGER": pl.Int32,
    "DOUBLE": pl.Float64,
    "BOOLEAN": pl.Boolean,
    "TIMESTAMP": pl.Datetime("us"),
}


def latest_calibration(con: duckdb.DuckDBPyConnection, scope: SessionFilter | None = None) -> Calibration | None:
    """The most recent calibrate run in the store (with ``scope``: the most recent over the same session filter),
    as the report's ``Calibration``; None when there is none (or the store predates the calibration tables). Only
    the latest run of each base policy keeps its sweep rows, so an older run of the scope may have none: None."""
    if not (has_table(con, "calibration_runs") and has_table(con, "calibration_sweep")):
        return None
    where, params = ("scope = ?", [_scope_text(scope)]) if scope is not None else ("TRUE", [])
    row = one(
        con,
        f"""SELECT run_id, recommended, target_false_halt_rate, paste, rationale, labels_file, label_rows
                       FROM calibration_runs WHERE {where} ORDER BY computed_at DESC LIMIT 1""",
        params,
    )
    if row is None:
        return None
    run_id, rec, target, paste, rationale, labels_file, label_rows = row
    cols = ", ".join('window_size AS "window"' if c == "window" else c for c in SWEEP_SCHEMA)
    sweep = frame(
        con,
        f"SELECT {cols}, on_frontier, recommended FROM calibration_sweep WHERE run_id = ? "
        "ORDER BY window_size NULLS FIRST, similarity NULLS FIRST, halt, warn",
        [run_id],
    )
    if sweep.height == 0:
        return None
    sweep = sweep.with_columns([pl.col(c).cast(t) for c, t in SWEEP_SCHEMA.items()])
    labels = _labels_text(labels_file, int(label_rows or 0)) if labels_file else PROXY_TEXT
    return _report(
        sweep, json.loads(rec) if rec else None, float(target), json.loads(paste or "{}"), rationale or "", labels
    )


def calibration_for_report(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter()) -> Calibration | None:
    """What the report draws: the latest ``loopscope calibrate`` run over the same sessions, else a fresh sweep of the
    default base policy (not saved, not verified by an exact replay — the connection may be read-only); None when the
    store has no scanned session in scope."""
    stored = latest_calibration(con, flt)
    if stored is not None:
        return stored
    try:
        res = calibrate_store(con, DEFAULT_BASE, flt, verify=False, save=False)
    except UsageError:
        return None
    return res.to_report()


__all__ = [
    "BASES",
    "CLASSES",
    "DEFAULT_BASE",
    "CalibrationResult",
    "Grid",
    "Verification",
    "calibrate_store",
    "calibration_for_report",
    "latest_calibration",
    "parse_range",
    "parse_similarities",
    "parse_windows",
    "rank",
    "save_calibration",
    "verify_setting",
]
