"""The main job, end to end: ingest, scan, calibrate, report. Also what the report needs beyond the store's tables:
every preset guard's replay and the latest calibration."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.errors import UsageError
from analyzer.store.filters import SessionFilter, SessionIds

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from analyzer.evaluate.evaluation import Evaluation
    from analyzer.guards.policies import Policy
    from analyzer.guards.replay import CorpusFrames
    from analyzer.results import Calibration, Replay
    from reports.render import ReportResult

Progress = Callable[[int, int], None]
StageProgress = Callable[[str], Progress | None]


def replay_cache_path(db: Path) -> Path:
    """Where the report keeps its guard replays between runs: beside the store, never in the report folder (the rows
    hold raw session and call ids, which a shared report must not carry)."""
    return db.with_name(db.name + ".report-replay.parquet")


def _scope_fingerprints(con: duckdb.DuckDBPyConnection, flt: SessionFilter) -> dict[str, str | None]:
    """Every session in scope, with its scan fingerprint (None when it was never scanned)."""
    from analyzer.store.connection import columns, has_table

    where, params = flt.where("s")
    if has_table(con, "scan_state") and "fingerprint" in columns(con, "scan_state"):
        sql = (
            f"SELECT s.session_id, st.fingerprint FROM sessions s LEFT JOIN scan_state st USING (session_id) "
            f"WHERE {where}"
        )
    else:
        sql = f"SELECT s.session_id, NULL FROM sessions s WHERE {where}"
    return {str(sid): fp for sid, fp in con.execute(sql, params).fetchall()}


def _replay_key(policies: Sequence[object]) -> str:
    """What every cached replay row depends on besides its session: the presets and the replay code."""
    import hashlib

    from analyzer import __version__

    h = hashlib.blake2b(f"{__version__} {policies!r}".encode(), digest_size=10)
    guards = Path(__file__).parent / "guards"
    for f in sorted(guards.rglob("*.py")):  # the engines too
        h.update(f.relative_to(guards).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _report_state(
    con: duckdb.DuckDBPyConnection, flt: SessionFilter, evaluation: Evaluation | None = None
) -> str | None:
    """What a report of ``flt`` is made from besides the report code and options: the store's state
    (``store_state``), the latest calibration run of the scope, the preset replays' code and the calibration's (a
    report without a stored calibration sweeps afresh), and the evaluation on a person's labels (``analyze
    --labels``), whose figures are on its Evaluation page. None for a source that is no store."""
    import hashlib

    from analyzer.calibrate.recommend import _scope_text
    from analyzer.guards.policies import resolve
    from analyzer.store.connection import has_table, one
    from reports.data import store_state

    state = store_state(con, flt)
    if state is None:
        return None
    run = (
        one(
            con,
            "SELECT run_id FROM calibration_runs WHERE scope = ? ORDER BY computed_at DESC LIMIT 1",
            [_scope_text(flt)],
        )
        if has_table(con, "calibration_runs")
        else None
    )
    h = hashlib.blake2b(f"{state} {run!r} {_replay_key(resolve(['all']))}".encode(), digest_size=16)
    if evaluation is not None:
        import orjson

        h.update(orjson.dumps(evaluation.to_json(), option=orjson.OPT_NON_STR_KEYS))
    for f in sorted((Path(__file__).parent / "calibrate").glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()


REPLAY_CHUNK = 125
"""Sessions read and replayed per job: the replay holds its sessions' calls as Python objects, so a bounded chunk
keeps a cold report's memory flat however large the corpus; small enough that every worker gets several."""

REPLAY_POOL_MIN = 2 * REPLAY_CHUNK
"""Fewer sessions to replay than this and they are replayed in this process: starting two spawned workers costs
about 1.5 s of CPU (their imports)."""


def _replay_chunk(frames: CorpusFrames, policies: Sequence[Policy]) -> pl.DataFrame:
    """One job: build a chunk's sessions from the frames the main process read, replay every policy over them, and
    return only the small per-session rows (in a worker, so the sessions' Python objects never reach the main
    process)."""
    from analyzer.guards.replay import build_corpus, replay
    from analyzer.machine import gc_paused

    # A chunk of REPLAY_CHUNK sessions leaves ~90k cyclic objects (guard state), collected once the collector is back.
    with gc_paused():
        return replay(build_corpus(frames), policies, workers=1).sessions


@dataclass(frozen=True)
class _ReplayPlan:
    """What a replay of the presets has to do: the rows a cache still holds, and the sessions to replay."""

    policies: tuple[Policy, ...]
    key: str  # ``_replay_key``: what every cached row depends on besides its session
    fingerprints: dict[str, str | None]  # every session in scope, with its scan fingerprint
    kept: pl.DataFrame | None  # the cached rows still valid (without ``_key`` and ``_fp``)
    todo: tuple[str, ...]  # the sessions to replay
    cache: Path | None

    def finish(self, new: list[pl.DataFrame]) -> Replay | None:
        """Every row (the kept ones and ``new``), sorted, as one Replay; the cache rewritten when anything changed."""
        import polars as pl

        from analyzer.results import Replay

        parts = ([self.kept] if self.kept is not None and self.kept.height else []) + new
        if not parts:
            return None
        frame = pl.concat(parts, how="vertical_relaxed").sort("session_id", "policy")
        fps = self.fingerprints
        if self.cache is not None and (self.todo or self.kept is None or self.kept.height != frame.height):
            tagged = frame.join(
                pl.DataFrame(
                    {"session_id": list(fps), "_fp": list(fps.values())},
                    schema={"session_id": pl.String, "_fp": pl.String},
                ),
                on="session_id",
                how="left",
            ).filter(pl.col("_fp").is_not_null())
            try:
                tagged.with_columns(pl.lit(self.key).alias("_key")).write_parquet(self.cache)
            except OSError:
                pass  # a read-only folder: the next report replays again
        return Replay(frame) if frame.height else None


def _replay_plan(con: duckdb.DuckDBPyConnection, flt: SessionFilter, cache: Path | None) -> _ReplayPlan:
    """The presets' replay of the filtered sessions, as far as ``cache`` (a Parquet file) already holds it: a
    session's replay depends on its own calls and findings alone, so only sessions whose scan fingerprint changed
    since their cached rows were computed are replayed again."""
    import polars as pl

    from analyzer.guards.policies import resolve

    policies = resolve(["all"])
    key = _replay_key(policies)  # of the list, as ``_report_state`` keys it
    fps = _scope_fingerprints(con, flt)
    kept = None
    if cache is not None:
        try:
            old = pl.read_parquet(cache)
            if old.height and old["_key"][0] == key:
                valid = [sid for sid, fp in fps.items() if fp is not None]
                want = pl.DataFrame(
                    {"session_id": valid, "_fp": [fps[s] for s in valid]},
                    schema={"session_id": pl.String, "_fp": pl.String},
                )
                kept = old.join(want, on=["session_id", "_fp"], how="semi").drop("_key", "_fp")
        except (OSError, pl.exceptions.PolarsError):
            kept = None
    done = set(kept["session_id"].unique().to_list()) if kept is not None else set()
    return _ReplayPlan(tuple(policies), key, fps, kept, tuple(sid for sid in fps if sid not in done), cache)


def _replay_chunks(
    con: duckdb.DuckDBPyConnection, todo: tuple[str, ...], policies: Sequence[Policy], workers: int | None
) -> list[pl.DataFrame]:
    """The replay rows of the sessions ``todo``, a chunk at a time: the main process reads each chunk from the store
    and a pool of spawned workers (``workers``; default one per core when there are enough sessions) builds and
    replays it, with a bounded number of chunks in flight."""
    from analyzer.guards.replay import read_corpus
    from analyzer.machine import cores, run_chunks
    from analyzer.store.connection import in_place_order, read_capped, record_places
    from reports.data import PAGE_READS

    # A session's replay depends on its own rows alone: chunks of sessions whose rows are neighbours read the fewest.
    record_places(con)
    order = in_place_order(con, todo)
    chunks = [tuple(order[i : i + REPLAY_CHUNK]) for i in range(0, len(order), REPLAY_CHUNK)]
    n = workers if workers is not None else (cores() if len(todo) >= REPLAY_POOL_MIN else 1)
    parts: dict[int, pl.DataFrame] = {}

    def job(i: int) -> tuple[CorpusFrames, Sequence[Policy]]:  # read under the report's cap, beside the pool
        return read_capped(con, PAGE_READS, lambda: read_corpus(con, SessionIds(chunks[i]), placed=True)), policies

    run_chunks(_replay_chunk, job, len(chunks), n, parts.__setitem__)
    return [parts[i] for i in range(len(chunks))]


def replay_presets(
    con: duckdb.DuckDBPyConnection,
    flt: SessionFilter = SessionFilter(),
    workers: int | None = None,
    cache: Path | None = None,
) -> Replay | None:
    """Every preset guard replayed over the filtered sessions (``_replay_chunks``). With ``cache`` (a Parquet file),
    only sessions whose scan fingerprint changed since the cached rows were computed are replayed again
    (``_replay_plan``)."""
    plan = _replay_plan(con, flt, cache)
    return plan.finish(_replay_chunks(con, plan.todo, plan.policies, workers))


def report_inputs(
    con: duckdb.DuckDBPyConnection,
    flt: SessionFilter = SessionFilter(),
    workers: int | None = None,
    cache: Path | None = None,
) -> tuple[Replay | None, Calibration | None]:
    """Every preset guard replayed over the filtered sessions (``replay_presets``), and the latest stored calibration
    (or a fresh one when ``loopscope calibrate`` never ran)."""
    from analyzer.calibrate.recommend import calibration_for_report

    return replay_presets(con, flt, workers, cache), calibration_for_report(con, flt)


def show_command(db: Path | None) -> str:
    """``loopscope show``, naming the store ``db`` when it is not the one the command finds by default."""
    import shlex

    from analyzer.store.connection import default_db_path

    if db is None or db.absolute() == default_db_path().absolute():
        return "loopscope show"
    return f"loopscope show --db {shlex.quote(str(db))}"


def evaluate_labels(
    con: duckdb.DuckDBPyConnection,
    labels: Sequence[str | Path],
    flt: SessionFilter = SessionFilter(),
    by: Sequence[str] = (),
    policies: Sequence[Policy] | None = None,
    roots: Sequence[str | Path] = (),
    guards: bool = True,
    workers: int | None = None,
    show: str = "loopscope show",
) -> Evaluation:
    """The findings and (``guards``) the guards measured on a person's labels (``analyzer.evaluate.evaluation``):
    the guards are ``policies`` (default: every preset) replayed over the labelled sessions."""
    from analyzer.evaluate.evaluation import evaluate_store
    from analyzer.guards.policies import resolve
    from analyzer.guards.replay import replay_store
    from analyzer.store.connection import store_id

    chosen = list(policies) if policies is not None else resolve(["all"])

    def halts_of(ids: Sequence[str]) -> tuple[list[str], pl.DataFrame]:
        rep = replay_store(con, chosen, SessionIds(tuple(ids)), workers=workers)
        return [p.name for p in chosen], rep.halts

    return evaluate_store(con, labels, flt, by, roots, halts_of if guards else None, show=show, store_id=store_id(con))


def _drop_cached_blocks(con: duckdb.DuckDBPyConnection) -> None:
    """Make DuckDB let go of the table blocks it keeps cached after reading them (it holds them up to its memory
    limit, ~200 MB after the report's page reads of the 2,400-session store): a memory limit it cannot meet evicts
    every unpinned block, then the limit goes back. Called before the steps that need the most memory, so that the
    cache does not add to them; when DuckDB refuses (a source that is no store), nothing changes."""
    from analyzer.store.connection import duckdb_settings

    with duckdb_settings(con, {"memory_limit": "1MB"}):
        pass


def write_report(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    flt: SessionFilter = SessionFilter(),
    single_file: bool = False,
    redact: bool = True,
    workers: int | None = None,
    progress: Progress | None = None,
    cache: Path | None = None,
    evaluation: Evaluation | None = None,
) -> ReportResult:
    """The report of the sessions ``flt`` selects, with every preset's replay and the latest calibration (and, with
    ``evaluation``, its Evaluation page). The result's ``seconds`` covers everything this did: the replay and
    calibration as well as the rendering. ``cache``: where replays are kept between runs (``replay_cache_path`` of
    the store). A folder report made from the same state of the store, options and code is kept as it is
    (``kept_report``): nothing is read or written."""
    from analyzer.calibrate.recommend import calibration_for_report
    from analyzer.store.connection import read_capped
    from reports.data import PAGE_READS, ReportData
    from reports.render import kept_report, render_report

    t0 = time.perf_counter()
    state = None if single_file else _report_state(con, flt, evaluation)  # a single file is always written
    if state is not None:
        kept = kept_report(out, state, redact)
        if kept is not None:
            kept.seconds = time.perf_counter() - t0
            return kept

    def calibration() -> Calibration | None:
        _drop_cached_blocks(con)  # the sweep reads every session again: the page reads' cache goes first
        # and the sweep's own reads are capped, so its cache does not grow with the store either
        return read_capped(con, PAGE_READS, lambda: calibration_for_report(con, flt))

    replay = replay_presets(con, flt, workers, cache)
    _drop_cached_blocks(con)  # what the replay read, before the page workers start beside this process
    result = render_report(
        ReportData(con, flt, read_cap=PAGE_READS),
        out,
        replay=replay,
        calibration=calibration,
        single_file=single_file,
        redact=redact,
        progress=progress,
        workers=workers,
        state=state,
        evaluation=evaluation,
    )
    result.seconds = time.perf_counter() - t0
    return result


def _current_calibration(con: duckdb.DuckDBPyConnection, flt: SessionFilter) -> str | None:
    """When the latest calibration of this scope is ``analyze``'s own (the default base, no labels file) and no
    session was scanned since it was computed, it still holds: a line saying it was kept; else None (calibrate)."""

    from analyzer.calibrate.recommend import DEFAULT_BASE, _scope_text
    from analyzer.store.connection import has_table, one

    if not (has_table(con, "calibration_runs") and has_table(con, "scan_state")):
        return None
    try:
        row = one(
            con,
            "SELECT base_policy, labels_file, computed_at FROM calibration_runs WHERE scope = ? "
            "ORDER BY computed_at DESC LIMIT 1",
            [_scope_text(flt)],
        )
        last_scan = one(con, "SELECT max(scanned_at)::TIMESTAMPTZ FROM scan_state")
    except Exception:  # noqa: BLE001 - an older store's shape: calibrate again
        return None
    if row is None or row[0] != DEFAULT_BASE or row[1] is not None or row[2] is None:
        return None
    computed = row[2].replace(tzinfo=UTC)
    if last_scan is None or last_scan[0] is None or last_scan[0] > computed:
        return None
    return (
        f"kept the {DEFAULT_BASE} calibration of {computed:%Y-%m-%d %H:%M} UTC: nothing was ingested or scanned since"
    )


@dataclass
class AnalyzeResult:
    index: Path
    stages: list[tuple[str, str]] = field(default_factory=list)  # (stage, one-line outcome)
    seconds: float = 0.0


def analyze(
    paths: Sequence[Path] | None,
    db: Path,
    out: Path,
    flt: SessionFilter = SessionFilter(),
    single_file: bool = False,
    redact: bool = True,
    workers: int | None = None,
    full_results: bool | None = None,
    stage_progress: StageProgress | None = None,
    on_stage: Callable[[str, str], None] | None = None,
    labels: Path | None = None,
) -> AnalyzeResult:
    """Ingest ``paths`` into ``db``, scan what changed, calibrate the default base policy, write the report to
    ``out``. Each stage reports a one-line outcome through ``on_stage``; ``stage_progress(stage)`` gives a progress
    callback for that stage (or None). With ``labels`` (a labels file, read before any work), the calibration
    takes its truth from them, and the findings and guards are measured on them (``eval``, the report's Evaluation
    page)."""
    from analyzer.calibrate.recommend import DEFAULT_BASE, Alongside, calibrate_store
    from analyzer.evaluate.labels import read_label_file
    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan
    from analyzer.store import connection

    if labels is not None:
        read_label_file(labels)  # a bad file fails here, before the ingest
    t0 = time.perf_counter()
    stages: list[tuple[str, str]] = []

    def done(stage: str, text: str) -> None:
        stages.append((stage, text))
        if on_stage:
            on_stage(stage, text)

    def progress(stage: str) -> Progress | None:
        return stage_progress(stage) if stage_progress else None

    s = ingest(paths, db, workers=workers, progress=progress("ingest"), full_results=full_results)
    done(
        "ingest",
        f"{s.files_ingested:,} files ingested{s.companion_text()}, {s.files_unchanged:,} unchanged, {len(s.skipped):,} "
        f"skipped; {s.sessions:,} sessions, {s.calls:,} calls, {s.errors:,} unreadable lines"
        + "".join(f"\n  {line}" for line in s.skipped_lines())
        + "".join(f"\n  note: {note}" for note in s.notes),
    )
    sc = scan(db, workers=workers, progress=progress("scan"))
    done("scan", f"{sc.scanned:,} sessions scanned ({sc.unchanged:,} unchanged), {sc.findings:,} loop episodes")
    con = connection.connect(db)
    try:
        unchanged = s.files_ingested == 0 and sc.scanned == 0 and labels is None
        kept = _current_calibration(con, flt) if unchanged else None
        cache = replay_cache_path(db)
        if kept is not None:
            done("calibrate", kept)
        else:
            # The calibration's exact replay builds every session it scores: the report's preset replays of the
            # sessions its cache lacks are run from the same built sessions, and cached for it.
            plan = _replay_plan(con, flt, cache)
            along = Alongside(plan.policies, frozenset(plan.todo)) if plan.todo else None
            try:
                res = calibrate_store(con, DEFAULT_BASE, flt, labels, workers=workers, alongside=along)
                done("calibrate", res.headline() + (f"; stuck from {res.labels_text}" if labels else ""))
            except UsageError as exc:  # e.g. the filters match no scanned session: report what there is
                done("calibrate", f"skipped: {exc}")
            if along is not None and along.rows:
                plan.finish(along.rows)
        evaluation = None
        if labels is not None:
            evaluation = evaluate_labels(con, [labels], flt, workers=workers, show=show_command(db))
            done("eval", f"{evaluation.labels.text()}; {evaluation.headline()}")
        r = write_report(con, out, flt, single_file, redact, workers, progress("report"), cache, evaluation)
    finally:
        con.close()
    done(
        "report",
        f"kept the report of {r.generated_at:%Y-%m-%d %H:%M} UTC ({len(r.files):,} files): nothing changed since"
        if r.kept and r.generated_at
        else f"{len(r.files):,} files written",
    )
    return AnalyzeResult(index=r.index, stages=stages, seconds=time.perf_counter() - t0)
