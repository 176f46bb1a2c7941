"""Benchmark: the HTML report for 1,000 sessions with findings.

Budget (issue "HTML report"): under 40 MB on disk, written in under 15 s. Two measurements, both run by default:

1. **the command, on a real corpus**: gen_corpus.py writes a corpus with about 1,000 sessions with findings, it is
   ingested and scanned, then ``loopscope report`` is timed as a user runs it: it replays every preset guard,
   sweeps a calibration and renders the site.
2. **long sessions**: a store synthesised straight into DuckDB (no transcripts): 1,200 sessions of 30–330 calls,
   four of them 20,000 calls long, one in ten results of 20–60 kB, a streak finding every 50 calls in the first
   1,000 sessions; only the rendering is timed. It checks that long sessions are collapsed, never dumped whole.

    python benchmarks/bench_report.py [--corpus /tmp/loopscope-report-corpus] [--sessions 1000] [--keep DIR]
                                      [--single-file] [--synthetic-only]

3. **scaling and incremental rebuilds** (``--scale 75,300``, issue 13): for each corpus size (MB of transcripts,
   about 16 sessions and 5 session pages a MB), in one run: ``loopscope analyze`` cold (ingest, scan, calibrate,
   report), ``loopscope report`` cold (no pages, no cached replay), ``loopscope report`` again on the unchanged store
   (every session page kept), and ``loopscope analyze`` of the unchanged corpus as a whole and split into its
   stages (no-change ingest, no-change scan, calibrate, report). Each figure is wall time, CPU time (user + system
   of the whole process tree: the shared machine's load inflates wall time, not CPU) and the peak summed RSS of the
   process tree; the last lines give the per-session ratio of the larger size to the smaller (1.0: linear) and the
   memory growth.

    python benchmarks/bench_report.py --scale 75,300 [--keep DIR]

4. **before and after** (``--compare CHECKOUT``, issue 31: every session got a page): the report of
   ``bench_scale.py``'s corpus (``--compare-sessions``, default 2,400 sessions, ~2.4 GB), this checkout beside
   another (a checkout folder, run with its own code), in one run: each checkout ingests and scans its own store
   (not timed), then ``loopscope report`` runs for each in turn, ``--repeat`` times, cold (into an empty folder,
   without the guard replays a report keeps beside the store: what ``bench_scale.py`` times) and with those replays
   kept (the rendering alone, which the new pages weigh on). Each run: wall, CPU of the process tree, peak RSS, the
   report's size on disk and its session pages; then after ÷ before, run by run.

    python benchmarks/bench_report.py --compare ../before [--after ../after] [--compare-sessions 2400] [--repeat 3]

Prints the figures and exits non-zero when a budget is exceeded.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from analyzer.store import connection
from reports.data import ReportData
from reports.paths import session_page_path
from reports.render import render_report

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import CHECKOUT, Checkout, Run, loopscope, mb, paired_ratio  # noqa: E402
from gen_corpus import ensure  # noqa: E402

CORPUS_MB = 170  # about 1,000 sessions with findings at gen_corpus.py's default mix

SIZE_BUDGET_MB = 40.0
TIME_BUDGET_S = 15.0

FINDINGS_COLUMNS = (
    "finding_id, session_id, kind, period, tools, call_ids, first_seq, last_seq, repeats, stuck, "
    "user_turn, wasted_tokens, estimated_tokens, cost_usd"
)


def build(db: Path, with_findings: int, extra: int) -> None:
    """Sessions, turns, calls and findings, generated in SQL."""
    con = connection.connect(db)
    try:
        total = with_findings + extra
        con.execute(f"""
            CREATE TEMP TABLE gen AS
            SELECT i, 'bench-' || lpad(i::VARCHAR, 5, '0') AS sid,
                   CASE WHEN i % 250 = 0 THEN 20000 ELSE 30 + (i * 37) % 300 END AS n,
                   TIMESTAMP '2026-02-01' + INTERVAL (i % 28) DAY + INTERVAL (i % 9) HOUR AS t0,
                   ['/home/dev/proj-' || (i % 23), '/srv/app-' || (i % 7)][1 + i % 2] AS cwd,
                   ['pi', 'claude_code', 'codex'][1 + i % 3] AS fmt,
                   ['claude-sonnet-4-5', 'gpt-5', 'claude-opus-4-1'][1 + i % 3] AS model
            FROM range({total}) r(i)""")
        con.execute("""
            CREATE TEMP TABLE gen_calls AS
            SELECT g.sid, s AS seq, g.t0 + INTERVAL (s * 7) SECOND AS ts, g.model,
                   (s % 50 BETWEEN 10 AND 19) AS looping,
                   CASE WHEN s % 50 BETWEEN 10 AND 19 THEN 'bash'
                        ELSE ['read', 'edit', 'bash', 'grep', 'write', 'ls'][1 + (s * 7 + g.i) % 6] END AS tool
            FROM gen g, range(g.n) r(s)""")
        con.execute("""
            INSERT INTO calls (session_id, seq, call_id, turn_id, user_turn, tool, args, call_key, result_text,
                               result_chars, result_key, is_error, ts, result_ts)
            SELECT sid, seq, sid || '-c' || seq, sid || '-a' || seq, seq // 60, tool,
                   CASE WHEN looping THEN '{"command":"npm test -- --run src/app.test.ts"}'
                        ELSE '{"path":"src/module_' || (seq % 97) || '.py","limit":' || (seq % 400) || '}' END,
                   CASE WHEN looping THEN md5(sid || 'loop') ELSE md5(sid || seq) END,
                   rt, length(rt),
                   CASE WHEN looping THEN md5(sid || 'fail') ELSE md5(sid || seq || 'r') END,
                   looping, ts, ts + INTERVAL 2 SECOND
            FROM (SELECT *, CASE
                      WHEN looping
                          THEN 'FAIL src/app.test.ts > renders <App/>\n' || repeat('  at render (app.tsx:12:5)\n', 20)
                      WHEN seq % 10 = 3
                          THEN repeat('def handler(event, context):\n    return process(event)\n', 400 + (seq % 700))
                      ELSE repeat('output line ' || seq || '\n', 5 + seq % 60) END AS rt
                  FROM gen_calls)""")
        con.execute("""
            INSERT INTO turns (session_id, turn_id, turn_index, role, text, model, ts, user_turn, input_tokens,
                               output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_usd,
                               usage_key, usage_counted)
            SELECT sid, sid || '-a' || seq, 2 * seq + 1, 'assistant',
                   CASE WHEN looping THEN 'The test still fails; let me run it again.'
                        ELSE 'Reading the next file.' END,
                   model, ts, seq // 60, 20, 150, ctx - 470, 300, ctx, ctx * 0.3 / 1e6, sid || '-u' || seq, TRUE
            FROM (SELECT *, least(8470 + 40 * seq, 180000) AS ctx FROM gen_calls)""")
        con.execute("""
            INSERT INTO sessions (session_id, format, source_path, started_at, ended_at, cwd, models, user_turns, turns,
                                  calls, error_calls, input_tokens, output_tokens, cache_read_tokens,
                                  cache_write_tokens, total_tokens, cost_usd)
            SELECT g.sid, g.fmt, '/data/' || g.sid || '.jsonl', g.t0, max(c.ts), g.cwd, [g.model], g.n // 60 + 1,
                   count(*), count(*), count(*) FILTER (WHERE c.looping), 20 * count(*), 150 * count(*),
                   sum(least(8470 + 40 * c.seq, 180000) - 470), 300 * count(*), sum(least(8470 + 40 * c.seq, 180000)),
                   sum(least(8470 + 40 * c.seq, 180000) * 0.3 / 1e6)
            FROM gen g JOIN gen_calls c ON c.sid = g.sid
            GROUP BY g.sid, g.fmt, g.t0, g.cwd, g.model, g.n""")
        con.execute("""
            CREATE TABLE IF NOT EXISTS findings (finding_id VARCHAR, session_id VARCHAR, kind VARCHAR, period INTEGER,
              tools VARCHAR[], call_ids VARCHAR[], first_seq INTEGER, last_seq INTEGER, repeats INTEGER,
              stuck BOOLEAN, user_turn INTEGER, wasted_tokens BIGINT, estimated_tokens BIGINT, cost_usd DOUBLE)""")
        con.execute("DELETE FROM findings")
        con.execute(f"""
            INSERT INTO findings ({FINDINGS_COLUMNS})
            SELECT g.sid || '-f' || k, g.sid, 'streak', 1, ['bash'],
                   list_transform(range(k * 50 + 10, k * 50 + 20), lambda x: g.sid || '-c' || x),
                   k * 50 + 10, k * 50 + 19, 10, TRUE, (k * 50 + 10) // 60,
                   9 * least(8470 + 40 * (k * 50 + 15), 180000), 9 * 260,
                   9 * least(8470 + 40 * (k * 50 + 15), 180000) * 0.3 / 1e6
            FROM gen g, range(greatest(g.n // 50, 1)) r(k)
            WHERE g.i < {with_findings}""")
        if connection.one(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'scan_state'")[0]:
            con.execute("INSERT INTO scan_state (session_id) SELECT session_id FROM sessions")
    finally:
        con.close()


def command_on_corpus(corpus: Path, work: Path) -> bool:
    """Ingest and scan a generated corpus, then time ``loopscope report`` end to end."""
    ensure(corpus, CORPUS_MB, 7)
    db = work / "corpus.duckdb"
    for f in (db, Path(f"{db}.wal")):
        f.unlink(missing_ok=True)
    loopscope("ingest", str(corpus), "--db", str(db), "--quiet")
    loopscope("scan", "--db", str(db), "--quiet")
    con = connection.connect(db, read_only=True)
    try:
        ((with_findings,),) = con.execute("SELECT count(DISTINCT session_id) FROM findings").fetchall()
    finally:
        con.close()
    out = work / "corpus-report"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    loopscope("report", "--db", str(db), "--out", str(out), "--quiet")
    seconds = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    pages = len(list((out / "sessions").glob("*.html")))
    print(
        f"command: `loopscope report` on a {CORPUS_MB} MB corpus ({with_findings:,} sessions with findings): "
        f"{pages:,} session pages, {size / 1e6:,.1f} MB in {seconds:.2f} s (replay of 8 presets, calibration "
        f"sweep and rendering; process start included)"
    )
    print(f"budget: size {size / 1e6:,.1f} / {SIZE_BUDGET_MB:.0f} MB, time {seconds:.2f} / {TIME_BUDGET_S:.0f} s")
    return size / 1e6 < SIZE_BUDGET_MB and seconds < TIME_BUDGET_S


def _fig(r: Run) -> str:
    return f"{r.seconds:6.2f} s wall, {r.cpu_seconds:6.2f} s CPU, peak {mb(r.peak_tree_rss)}"


def scaling(sizes: list[float], work: Path, prefix: str = "/tmp/report-c") -> None:
    """Cold and incremental report and analyze at each corpus size (see the module docstring, item 3)."""
    results: dict[float, dict[str, Run]] = {}
    counts: dict[float, int] = {}
    for size in sizes:
        corpus = Path(f"{prefix}{size:g}")
        ensure(corpus, size, 7)
        db, out = work / f"scale-{size:g}.duckdb", work / f"scale-{size:g}-report"
        for f in (db, Path(f"{db}.wal"), Path(f"{db}.report-replay.parquet")):
            f.unlink(missing_ok=True)
        shutil.rmtree(out, ignore_errors=True)
        r: dict[str, Run] = {}
        common = ("--db", str(db), "--out", str(out), "--quiet", "--force")
        r["analyze cold"] = loopscope("analyze", str(corpus), *common)
        shutil.rmtree(out)
        Path(f"{db}.report-replay.parquet").unlink(missing_ok=True)
        r["report cold"] = loopscope("report", *common)
        r["report unchanged"] = loopscope("report", *common)
        r["analyze unchanged"] = loopscope("analyze", str(corpus), *common)
        r["  ingest unchanged"] = loopscope("ingest", str(corpus), "--db", str(db), "--quiet")
        r["  scan unchanged"] = loopscope("scan", "--db", str(db), "--quiet")
        r["  calibrate"] = loopscope("calibrate", "--db", str(db), "--quiet")
        r["  report unchanged"] = loopscope("report", *common)
        con = connection.connect(db, read_only=True)
        try:
            ((sessions, pages),) = con.execute(
                "SELECT (SELECT count(*) FROM sessions), (SELECT count(DISTINCT session_id) FROM findings)"
            ).fetchall()
        finally:
            con.close()
        print(f"\n{size:g} MB corpus: {sessions:,} sessions, {pages:,} session pages")
        for name, run in r.items():
            print(f"  {name:<22} {_fig(run)}")
        counts[size] = sessions
        results[size] = r
    if len(sizes) >= 2:
        small, large = results[sizes[0]], results[sizes[-1]]
        ns, nl = counts[sizes[0]], counts[sizes[-1]]
        print(f"\nper session, {nl:,} vs {ns:,} sessions (1.0 = linear):")
        for name in ("report cold", "report unchanged", "analyze cold"):
            ratio = (large[name].cpu_seconds / nl) / (small[name].cpu_seconds / ns)
            print(
                f"  {name:<18} CPU {large[name].cpu_seconds / nl * 1e3:6.2f} vs "
                f"{small[name].cpu_seconds / ns * 1e3:6.2f} "
                f"ms a session: ratio {ratio:.2f}; peak memory {mb(large[name].peak_tree_rss)} vs "
                f"{mb(small[name].peak_tree_rss)}"
            )


def _folder_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def compare(baseline: Path, sessions: int, repeat: int, work: Path, after: Path | None = None) -> None:
    """This checkout's report (or ``after``'s) beside ``baseline``'s on the same corpus (the module docstring,
    item 4)."""
    from bench_scale import corpus_of

    from analyzer.analyze import replay_cache_path

    corpus, manifest = corpus_of(sessions)
    subjects = {"before": Checkout.at(baseline), "after": Checkout.at(after) if after else CHECKOUT}
    print(f"corpus: {corpus}, {manifest['bytes'] / 1e6:,.0f} MB in {manifest['files']:,} files")
    stores: dict[str, Path] = {}
    for name, co in subjects.items():
        co.compile()
        print(f"{name}: {co.source()}")
        db = work / f"{name}.duckdb"
        for f in (db, Path(f"{db}.wal"), replay_cache_path(db)):
            f.unlink(missing_ok=True)
        co.run("ingest", str(corpus), "--db", str(db), "--quiet")
        co.run("scan", "--db", str(db), "--quiet")
        stores[name] = db
    runs: dict[tuple[str, str], list[tuple[Run, int, int]]] = {}
    for i in range(repeat):
        for how in ("cold", "replays kept"):
            for name, co in subjects.items():
                db, out = stores[name], work / f"{name}-report"
                shutil.rmtree(out, ignore_errors=True)
                if how == "cold":
                    replay_cache_path(db).unlink(missing_ok=True)
                r = co.run("report", "--db", str(db), "--out", str(out), "--quiet")
                size, pages = _folder_bytes(out), len(list((out / "sessions").glob("*.html")))
                runs.setdefault((how, name), []).append((r, size, pages))
                print(
                    f"  run {i + 1} {how:<12} {name:<6} {r.seconds:6.2f} s wall, {r.cpu_seconds:6.2f} s CPU, "
                    f"peak {mb(r.peak_tree_rss)}, {size / 1e6:,.1f} MB, {pages:,} session pages",
                    flush=True,
                )
    print(f"\n`loopscope report`, {sessions:,} sessions, medians of {repeat}; after ÷ before run by run:")
    print("| report | before | after | after ÷ before: wall | CPU | size |")
    print("|---|---|---|---|---|---|")
    for how in ("cold", "replays kept"):
        b, a = runs[(how, "before")], runs[(how, "after")]

        def fig(rs: list[tuple[Run, int, int]]) -> str:
            return (
                f"{statistics.median(r.seconds for r, _, _ in rs):.1f} s, "
                f"{statistics.median(r.cpu_seconds for r, _, _ in rs):.1f} s CPU, "
                f"{statistics.median(s for _, s, _ in rs) / 1e6:,.1f} MB, {rs[0][2]:,} pages"
            )

        print(
            f"| {how} | {fig(b)} | {fig(a)} "
            f"| {paired_ratio([r.seconds for r, _, _ in a], [r.seconds for r, _, _ in b])} "
            f"| {paired_ratio([r.cpu_seconds for r, _, _ in a], [r.cpu_seconds for r, _, _ in b])} "
            f"| {paired_ratio([s for _, s, _ in a], [s for _, s, _ in b])} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path("/tmp/loopscope-report-corpus"))
    ap.add_argument("--sessions", type=int, default=1000, help="sessions with findings (default 1000)")
    ap.add_argument("--keep", type=Path, help="write the store and report here and keep them")
    ap.add_argument("--single-file", action="store_true", help="also time the single-file report")
    ap.add_argument("--synthetic-only", action="store_true", help="skip the measurement on a real corpus")
    ap.add_argument("--corpus-prefix", default="/tmp/report-c", help="--scale: corpora at PREFIX<MB>")
    ap.add_argument("--scale", help="only the scaling measurement, at these corpus sizes in MB (e.g. 75,300)")
    ap.add_argument("--compare", type=Path, help="only the report beside this checkout's, on bench_scale's corpus")
    ap.add_argument("--compare-sessions", type=int, default=2400, help="--compare: corpus size in sessions")
    ap.add_argument("--after", type=Path, help="--compare: this checkout instead of the one running the script")
    ap.add_argument("--repeat", type=int, default=3, help="--compare: runs of each report")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.compare:
        compare(args.compare, args.compare_sessions, args.repeat, work, args.after)
        if not args.keep:
            shutil.rmtree(work)
        return 0
    if args.scale:
        scaling(sorted(float(x) for x in args.scale.split(",")), work, args.corpus_prefix)
        if not args.keep:
            shutil.rmtree(work)
        return 0
    command_ok = True if args.synthetic_only else command_on_corpus(args.corpus, work)
    db = work / "bench.duckdb"
    if db.exists():
        db.unlink()
    t0 = time.perf_counter()
    build(db, args.sessions, extra=args.sessions // 5)
    built = time.perf_counter() - t0

    con = connection.connect(db, read_only=True)
    try:
        ((sessions, calls, findings),) = con.execute(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM calls), (SELECT count(*) FROM findings)"
        ).fetchall()
        # Since issue 31 every session has a page: those without findings show their whole conversation.
        loop_free = {
            session_page_path(sid)
            for (sid,) in con.execute(
                "SELECT session_id FROM sessions WHERE session_id NOT IN (SELECT session_id FROM findings)"
            ).fetchall()
        }
        out = work / "report"
        if out.exists():
            shutil.rmtree(out)
        res = render_report(ReportData(con), out)
        single = render_report(ReportData(con), work / "single.html", single_file=True) if args.single_file else None
    finally:
        con.close()

    pages = sorted((out / "sessions").glob("*.html"), key=lambda p: p.stat().st_size)
    mb = res.bytes / 1e6
    print(f"store: {sessions:,} sessions, {calls:,} calls, {findings:,} findings (built in {built:.1f} s)")
    print(
        f"report: {len(res.files):,} files, {res.session_pages:,} session pages, {mb:,.1f} MB "
        f"in {res.seconds:.2f} s ({res.session_pages / res.seconds:,.0f} pages/s)"
    )
    if loop_free:
        lf = sum((out / p).stat().st_size for p in loop_free if (out / p).is_file())
        print(
            f"of which {len(loop_free):,} pages of sessions without findings (their whole conversation): "
            f"{lf / 1e6:,.1f} MB; the rest {(res.bytes - lf) / 1e6:,.1f} MB"
        )
    if pages:
        median = pages[len(pages) // 2].stat().st_size
        print(
            f"session pages: median {median / 1e3:,.1f} kB, largest {pages[-1].stat().st_size / 1e3:,.1f} kB "
            f"({pages[-1].name}); index {(out / 'index.html').stat().st_size / 1e3:,.1f} kB"
        )
    if single is not None:
        print(f"single file: {single.bytes / 1e6:,.1f} MB in {single.seconds:.2f} s")
    print(f"budget: size {mb:,.1f} / {SIZE_BUDGET_MB:.0f} MB, time {res.seconds:.2f} / {TIME_BUDGET_S:.0f} s")
    if not args.keep:
        shutil.rmtree(work)
    return 0 if command_ok and mb < SIZE_BUDGET_MB and res.seconds < TIME_BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
