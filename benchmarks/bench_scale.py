#!/usr/bin/env python3
"""Scale benchmark (issue 13): every step of the pipeline at two corpus sizes, next to its references and targets,
before and after, in one table.

    python benchmarks/bench_scale.py                                   # 600 and 2,400 sessions, medians of 3
    python benchmarks/bench_scale.py --baseline ../wt-before           # with a "before" column, same run
    python benchmarks/bench_scale.py --sessions 60,240 --repeat 1      # a quick check
    python benchmarks/bench_scale.py --sessions 2400 --steps report --repeat 5 --baseline ../wt-before
                                                                       # one step, paired run by run

Corpora: gen_corpus.py with ``--sessions N``, ~1 MB a session and ~146 calls a MB (``--big-rate 0.09``), as the
issue's (600 sessions, 596 MB, 87k calls), written to ``/tmp/bench-scale-<N>s-seed<seed>`` and reused while their
manifest matches. Every measured command runs as its own
process on a warm page cache (the corpus was just written or read), ``--repeat`` times, and the median counts; peak
RSS is the sampled sum over the whole process tree (``_measure.py``). Per size:

- references, on the same files: DuckDB's bare parse (``_references.py``, the query's own time) and ccusage
  20.0.24 ``daily --offline`` over its three agents (Claude Code, Codex, pi), when installed;
- for each checkout (this one, and ``--baseline``'s, interleaved run by run so both see the same machine): cold
  ``ingest`` (a fresh store each run), ``ingest --full-results`` (when the checkout has the option), no-change
  re-ingest, cold ``scan`` (on a fresh copy of the ingested store each run), scan start-up (the no-change rescan:
  the command with nothing to do), ``report`` (into an empty folder), cold ``analyze`` (fresh store and folder) and
  ``analyze`` of the unchanged corpus.

Ends with a markdown table: the issue's filed figures ("as filed"), before, after, the target and whether "after"
meets it. The first size plays the issue's 600 sessions and the last its 2,400 in the ratio targets; targets in
absolute seconds or MB are only judged at the issue's own sizes. With ``--baseline``, a second table divides each
of after's runs by the before run beside it (wall and CPU time, median and range of the pairs): on a host whose
speed drifts, the figure to judge a change by. ``--steps`` times only the steps named (a step that runs on another's
result, such as ``report`` on a scanned store, runs that one once first, untimed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import CHECKOUT, Checkout, Run, paired_ratio  # noqa: E402
from _references import CCUSAGE_VERSION, bare_parse, ccusage, ccusage_command  # noqa: E402
from gen_corpus import ensure  # noqa: E402

from analyzer.analyze import replay_cache_path  # noqa: E402  (both checkouts keep their replays there)

SMALL, LARGE = 600, 2400  # the issue's corpus sizes, in sessions
MB_PER_SESSION = 596 / 600  # the issue's 600-session corpus is 596 MB
BIG_RATE = 0.09  # share of read/shell results cut from a large blob: ~146 calls a MB, as the issue's 87k in 596 MB
FLAT = 1.2  # "flat from 600 to 2,400": peak RSS at the large size within this factor of the small size's
# Issue 13's targets, each declared once for the verdicts (``table``) and the CPU budgets (``budgets``): ratios to the
# bare parse at the small size, calls a second, and seconds at the large size.
INGEST_X, FULL_X = 3.0, 5.0
SCAN_RATE, STEADY_RATE = 100_000, 200_000
REPORT_S, ANALYZE_S, UNCHANGED_S = 20.0, 60.0, 3.0

# Issue 13's figures as filed (medians of 3 on a 2-core machine): seconds, peak RSS in MB, calls.
FILED: dict[int, dict[str, float]] = {
    SMALL: {
        "mb": 596,
        "calls": 87_000,
        "bare": 1.31,
        "ccusage": 1.76,
        "ingest": 11.7,
        "ingest_rss": 644,
        "ingest_vs_bare": 8.5,
        "ingest_vs_ccusage": 6.5,
        "scan": 3.96,
        "scan_rss": 560,
        "scan_rate": 22_000,
        "report": 29.6,
        "analyze": 46.2,
    },
    LARGE: {
        "mb": 2400,
        "calls": 354_000,
        "ingest": 52.5,
        "ingest_rss": 720,
        "scan": 11.4,
        "scan_rss": 1200,
        "report": 111,
        "report_rss": 1100,
        "analyze": 201,
        "analyze_rss": 1400,
    },
}

STEPS = {  # key -> label, in the order they run
    "ingest": "cold `ingest`",
    "full": "cold `ingest --full-results`",
    "reingest": "no-change re-ingest",
    "scan": "cold `scan`",
    "startup": "scan start-up (no-change rescan)",
    "report": "`report`",
    "analyze": "cold `analyze`",
    "unchanged": "`analyze`, corpus unchanged",
}


NEEDS = {  # a step's key -> the steps whose results it runs on (run untimed when not asked for themselves)
    "reingest": ("ingest",),
    "scan": ("ingest",),
    "startup": ("ingest", "scan"),
    "report": ("ingest", "scan"),
    "unchanged": ("analyze",),
}


def schedule(asked: list[str]) -> list[tuple[str, bool]]:
    """The steps to run, in ``STEPS`` order, each with whether it is timed: the ``asked`` ones, and untimed, once,
    those an asked step runs on (``NEEDS``)."""
    unknown = [k for k in asked if k not in STEPS]
    if unknown:
        raise ValueError(f"unknown step(s) {', '.join(unknown)}; the steps are {', '.join(STEPS)}")
    needed = {n for k in asked for n in NEEDS.get(k, ())}
    return [(k, k in asked) for k in STEPS if k in asked or k in needed]


@dataclass
class Step:
    runs: list[Run] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def rss(self) -> float:
        return statistics.median(r.peak_tree_rss for r in self.runs) / 1e6

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu_seconds for r in self.runs)


@dataclass
class Subject:
    """One checkout's stores and figures at one corpus size."""

    name: str
    checkout: Checkout
    work: Path
    full_results: bool
    steps: dict[str, Step] = field(default_factory=dict)
    calls: int = 0
    sessions: int = 0

    def __post_init__(self) -> None:
        self.db, self.full_db, self.pristine = self.work / "s.duckdb", self.work / "full.duckdb", self.work / "p.duckdb"
        self.out, self.analyze_db, self.analyze_out = self.work / "report", self.work / "a.duckdb", self.work / "a-out"


@dataclass
class Size:
    sessions: int
    corpus: Path
    mb: float
    bare: Step
    ccusage: Step | None
    subjects: dict[str, Subject]


def _remove(*paths: Path) -> None:
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p)
        for f in (p, Path(f"{p}.wal")):
            f.unlink(missing_ok=True)


def _copy_store(src: Path, dst: Path) -> None:
    _remove(dst)
    shutil.copyfile(src, dst)
    if Path(f"{src}.wal").exists():
        shutil.copyfile(f"{src}.wal", f"{dst}.wal")


def plan(s: Subject, corpus: Path, workers: list[str]) -> dict[str, tuple[Callable[[], None] | None, list[str]]]:
    """Each step's key -> (its preparation, not timed; the loopscope arguments, timed)."""
    c = str(corpus)

    def fresh_ingest() -> None:
        _remove(s.db)

    def fresh_scan() -> None:
        if not s.pristine.exists():
            _copy_store(s.db, s.pristine)
        _copy_store(s.pristine, s.db)

    analyze = ["analyze", c, "--db", str(s.analyze_db), "--out", str(s.analyze_out), "--quiet", *workers]
    steps = {
        "ingest": (fresh_ingest, ["ingest", c, "--db", str(s.db), "--quiet", *workers]),
        "full": (
            lambda: _remove(s.full_db),
            ["ingest", c, "--db", str(s.full_db), "--full-results", "--quiet", *workers],
        ),
        "reingest": (None, ["ingest", c, "--db", str(s.db), "--quiet", *workers]),
        "scan": (fresh_scan, ["scan", "--db", str(s.db), "--quiet", *workers]),
        "startup": (None, ["scan", "--db", str(s.db), "--quiet", *workers]),
        # Cold: without the guard replays an earlier report kept beside the store (which a second run would reuse).
        "report": (
            lambda: _remove(s.out, replay_cache_path(s.db)),
            ["report", "--db", str(s.db), "--out", str(s.out), "--quiet"],
        ),
        "analyze": (lambda: _remove(s.analyze_db, s.analyze_out, replay_cache_path(s.analyze_db)), analyze),
        "unchanged": (None, analyze),
    }
    if not s.full_results:
        del steps["full"]
    return steps


COUNTS = """
import duckdb, sys
con = duckdb.connect(sys.argv[1], read_only=True)
print(*con.execute("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM calls)").fetchone())
"""


def store_counts(s: Subject) -> tuple[int, int]:
    """Sessions and calls in the checkout's own store, read by its own venv (its DuckDB wrote the file)."""
    r = subprocess.run([str(s.checkout.python), "-c", COUNTS, str(s.db)], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"cannot count the store {s.db}:\n{r.stderr[-2000:]}")
    sessions, calls = r.stdout.split()
    return int(sessions), int(calls)


def corpus_of(
    n: int, seed: int = 7, mb_per_session: float = MB_PER_SESSION, folder: Path = Path("/tmp")
) -> tuple[Path, dict]:
    """The ``n``-session corpus and its manifest, generated unless it is already there."""
    corpus = folder / f"bench-scale-{n}s-seed{seed}"
    return corpus, ensure(corpus, round(n * mb_per_session, 1), seed, sessions_target=n, big_rate=BIG_RATE)


def measure_size(
    n: int, args: argparse.Namespace, checkouts: dict[str, Checkout], ccusage_cmd: list[str] | None, scratch: Path
) -> Size:
    corpus, manifest = corpus_of(n, args.seed, args.mb_per_session, args.corpus_dir)
    size_mb = manifest["bytes"] / 1e6
    print(
        f"\n== {n:,} sessions: {corpus}, {size_mb:,.0f} MB in {manifest['files']:,} files "
        f"({', '.join(f'{k} {v / 1e6:,.0f} MB' for k, v in manifest['bytes_by_format'].items())})",
        flush=True,
    )

    for f in corpus.rglob("*.jsonl"):  # a warm page cache for every step, the first included
        with f.open("rb") as fh:
            while fh.read(1 << 24):
                pass
    bare = Step([replace(b.run, seconds=b.seconds) for b in bare_parse(corpus, args.repeat)])  # the query's time
    print(
        f"bare parse (DuckDB read_json_objects + one field): {bare.seconds:.2f} s, {size_mb / bare.seconds:,.0f} MB/s",
        flush=True,
    )
    cc = None
    if ccusage_cmd:
        cc = Step()
        for _ in range(args.repeat):
            r, tokens = ccusage(ccusage_cmd, corpus, scratch / f"ccusage-{n}")
            cc.runs.append(r)
        print(
            f"ccusage {CCUSAGE_VERSION} --offline: {cc.seconds:.2f} s, {cc.rss:,.0f} MB "
            f"(tokens: {', '.join(f'{a} {t:,}' for a, t in sorted(tokens.items()))})",
            flush=True,
        )
    else:
        print("ccusage: n/a (ccusage not installed)", flush=True)

    workers = ["--workers", str(args.workers)] if args.workers else []
    subjects = {}
    for name, co in checkouts.items():
        work = scratch / f"{name}-{n}"
        work.mkdir(parents=True, exist_ok=True)
        subjects[name] = Subject(name, co, work, "--full-results" in co.help("ingest"))
    plans = {name: plan(s, corpus, workers) for name, s in subjects.items()}
    for key, timed in schedule(args.steps):
        for _ in range(args.repeat if timed else 1):
            for name, s in subjects.items():  # interleaved: before and after see the same machine
                if key in plans[name]:
                    prepare, cmd = plans[name][key]
                    if prepare:
                        prepare()
                    run = s.checkout.run(*cmd)
                    if timed:
                        s.steps.setdefault(key, Step()).runs.append(run)
        for name, s in subjects.items():
            if not timed:
                print(f"{name:>6}  {STEPS[key]}: run once, untimed (a step asked for runs on it)", flush=True)
            elif key in s.steps:
                st = s.steps[key]
                print(f"{name:>6}  {STEPS[key]}: {st.seconds:.2f} s, {st.rss:,.0f} MB", flush=True)
            elif key == "full":
                print(f"{name:>6}  {STEPS[key]}: n/a (not in this checkout's `ingest --help`)", flush=True)
        if key == "full":
            for s in subjects.values():
                _remove(s.full_db)
        if key == "ingest":
            for s in subjects.values():
                s.sessions, s.calls = store_counts(s)
                print(f"{s.name:>6}  store: {s.sessions:,} sessions, {s.calls:,} calls", flush=True)
    if not args.keep:  # the larger size's stores need the disk
        for s in subjects.values():
            shutil.rmtree(s.work, ignore_errors=True)
    return Size(n, corpus, size_mb, bare, cc, subjects)


# ---- the table -----------------------------------------------------------------------------------------------


def secs(st: Step | None, rss: bool = True) -> str:
    if st is None:
        return "n/a"
    return f"{st.seconds:.2f} s, {st.rss:,.0f} MB" if rss else f"{st.seconds:.2f} s"


def x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v / 1000:,.0f}k calls/s"


def met(v: float | None, ok: Callable[[float], bool], applies: bool = True) -> str:
    if not applies:
        return "n/a (size)"
    return "n/a" if v is None else ("PASS" if ok(v) else "miss")


def div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def filed(n: int, key: str, unit: str = "s") -> str:
    f = FILED.get(n, {})
    if key not in f:
        return "—"
    v = f[key]
    if unit == "s":
        rss = f.get(f"{key}_rss")
        return f"{v:g} s" + (f", {rss:,.0f} MB" if rss else "")
    return {"x": x(v), "rate": rate(v), "MB": f"{v:,.0f} MB"}[unit]


def figures(size: Size, s: Subject) -> dict[str, float | None]:
    """The derived figures of one checkout at one size."""
    st = s.steps
    g = {k: (st[k].seconds if k in st else None) for k in STEPS}
    g["ingest_vs_bare"] = div(g["ingest"], size.bare.seconds)
    g["ingest_vs_ccusage"] = div(g["ingest"], size.ccusage.seconds if size.ccusage else None)
    g["full_vs_bare"] = div(g["full"], size.bare.seconds)
    g["scan_rate"] = div(s.calls, g["scan"])
    steady = None if g["scan"] is None or g["startup"] is None else g["scan"] - g["startup"]
    g["steady_rate"] = div(s.calls, steady)
    g["s_per_mb"] = div(g["ingest"], size.mb)
    for k in ("ingest", "scan", "report", "analyze"):
        g[f"{k}_rss"] = st[k].rss if k in st else None
    return g


def table(sizes: list[Size], names: list[str], steps: set[str] | None = None) -> list[str]:
    """The markdown table; ``steps``: the steps that were timed (default all), the rows of the others left out."""
    small, large = sizes[0], sizes[-1]
    figs = {(z.sessions, name): figures(z, z.subjects[name]) for z in sizes for name in names}
    head = ["figure", "sessions", "as filed", *names, "target (after)", "met"]
    rows: list[list[str]] = []
    timed = set(STEPS) if steps is None else steps

    def row(
        label: str,
        n: int,
        as_filed: str,
        cells: list[str],
        target: str = "",
        verdict: str = "",
        needs: tuple[str, ...] = (),
    ) -> None:
        if set(needs) <= timed:
            rows.append([label, f"{n:,}", as_filed, *cells, target, verdict])

    for z in sizes:
        n = z.sessions
        after = figs[(n, names[-1])]
        is_small, is_large = z is small, z is large
        f = FILED.get(n, {})
        row(
            "corpus (calls in the checkout's store)",
            n,
            f"{f['mb']:,} MB, {f['calls'] / 1000:,.0f}k calls" if f else "—",
            [
                f"{z.mb:,.0f} MB" + (f", {z.subjects[name].calls / 1000:,.0f}k calls" if z.subjects[name].calls else "")
                for name in names
            ],
        )  # no calls counted where the store was not ingested (``--steps analyze``)
        row("DuckDB bare parse (`read_json_objects` + one field)", n, filed(n, "bare"), [secs(z.bare)] * len(names))
        row(
            f"ccusage {CCUSAGE_VERSION} `--offline` (Claude Code, Codex, pi)",
            n,
            filed(n, "ccusage"),
            [secs(z.ccusage) if z.ccusage else "n/a (ccusage not installed)"] * len(names),
        )
        cell = {k: [secs(z.subjects[name].steps.get(k)) for name in names] for k in STEPS}
        val = {k: [figs[(n, name)][k] for name in names] for k in figs[(n, names[-1])]}
        row(STEPS["ingest"], n, filed(n, "ingest"), cell["ingest"], needs=("ingest",))
        row(
            "cold ingest ÷ bare parse",
            n,
            filed(n, "ingest_vs_bare", "x"),
            [x(v) for v in val["ingest_vs_bare"]],
            f"<= {INGEST_X:g}x" if is_small else "",
            met(after["ingest_vs_bare"], lambda v: v <= INGEST_X) if is_small else "",
            needs=("ingest",),
        )
        row(
            "cold ingest ÷ ccusage",
            n,
            filed(n, "ingest_vs_ccusage", "x"),
            [x(v) for v in val["ingest_vs_ccusage"]],
            f"<= {INGEST_X:g}x" if is_small else "",
            met(after["ingest_vs_ccusage"], lambda v: v <= INGEST_X) if is_small else "",
            needs=("ingest",),
        )
        row(
            STEPS["full"],
            n,
            "—",
            [c if z.subjects[name].full_results else "n/a (no option)" for c, name in zip(cell["full"], names)],
            needs=("full",),
        )
        row(
            "`ingest --full-results` ÷ bare parse",
            n,
            "—",
            [x(v) for v in val["full_vs_bare"]],
            f"<= {FULL_X:g}x" if is_small else "",
            met(after["full_vs_bare"], lambda v: v <= FULL_X) if is_small else "",
            needs=("full",),
        )
        row(
            STEPS["reingest"],
            n,
            "—",
            [secs(z.subjects[name].steps.get("reingest"), False) for name in names],
            needs=("reingest",),
        )
        row(STEPS["scan"], n, filed(n, "scan"), cell["scan"], needs=("scan",))
        row(
            "cold scan, whole command",
            n,
            filed(n, "scan_rate", "rate"),
            [rate(v) for v in val["scan_rate"]],
            f">= {rate(SCAN_RATE)}" if is_small else "",
            met(after["scan_rate"], lambda v: v >= SCAN_RATE) if is_small else "",
            needs=("scan",),
        )
        row(
            STEPS["startup"],
            n,
            "—",
            [secs(z.subjects[name].steps.get("startup"), False) for name in names],
            needs=("startup",),
        )
        row(
            "scan steady state: calls ÷ (cold − start-up)",
            n,
            "—",
            [rate(v) for v in val["steady_rate"]],
            f">= {rate(STEADY_RATE)}" if is_large else "",
            met(after["steady_rate"], lambda v: v >= STEADY_RATE) if is_large else "",
            needs=("scan", "startup"),
        )
        row(
            STEPS["report"],
            n,
            filed(n, "report"),
            cell["report"],
            f"<= {REPORT_S:g} s" if is_large else "",
            met(after["report"], lambda v: v <= REPORT_S, n == LARGE) if is_large else "",
            needs=("report",),
        )
        row(
            STEPS["analyze"],
            n,
            filed(n, "analyze"),
            cell["analyze"],
            f"<= {ANALYZE_S:g} s" if is_large else "",
            met(after["analyze"], lambda v: v <= ANALYZE_S, n == LARGE) if is_large else "",
            needs=("analyze",),
        )
        row(
            STEPS["unchanged"],
            n,
            "—",
            [secs(z.subjects[name].steps.get("unchanged"), False) for name in names],
            f"<= {UNCHANGED_S:g} s" if is_large else "",
            met(after["unchanged"], lambda v: v <= UNCHANGED_S, n == LARGE) if is_large else "",
            needs=("unchanged",),
        )

    if len(sizes) > 1:
        pair = f"{large.sessions:,} ÷ {small.sessions:,}"
        a = {k: [figs[(z.sessions, name)] for name in names] for k, z in (("s", small), ("l", large))}
        after_s, after_l = a["s"][-1], a["l"][-1]
        issue_sizes = (small.sessions, large.sessions) == (SMALL, LARGE)  # the filed ratios compare these two
        fs, fl = (FILED[SMALL], FILED[LARGE]) if issue_sizes else ({}, {})
        ratio_filed = x((fl["ingest"] / fl["mb"]) / (fs["ingest"] / fs["mb"])) if issue_sizes else "—"
        if "ingest" in timed:
            rows.append(
                [
                    "ingest s/MB, " + pair,
                    pair,
                    ratio_filed,
                    *[x(div(l_["s_per_mb"], s_["s_per_mb"])) for s_, l_ in zip(a["s"], a["l"])],
                    "<= 1.10x",
                    met(div(after_l["s_per_mb"], after_s["s_per_mb"]), lambda v: v <= 1.10),
                ]
            )
        for k in ("ingest", "scan", "report"):
            rk = f"{k}_rss"
            f_ratio = f"{fl[rk] / fs[rk]:.2f}x" if rk in fs and rk in fl else "—"
            if k in timed:
                rows.append(
                    [
                        f"peak RSS of {k}, {pair} (flat)",
                        pair,
                        f_ratio,
                        *[x(div(l_[rk], s_[rk])) for s_, l_ in zip(a["s"], a["l"])],
                        f"<= {FLAT:.1f}x",
                        met(div(after_l[rk], after_s[rk]), lambda v: v <= FLAT),
                    ]
                )
        for k in ("ingest", "scan", "report"):
            rk = f"{k}_rss"
            if k in timed:
                rows.append(
                    [
                        f"peak RSS of {k}",
                        f"{large.sessions:,}",
                        filed(large.sessions, rk, "MB"),
                        *[("n/a" if f_[rk] is None else f"{f_[rk]:,.0f} MB") for f_ in a["l"]],
                        "<= 800 MB",
                        met(after_l[rk], lambda v: v <= 800, large.sessions == LARGE),
                    ]
                )
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def paired(sizes: list[Size], before: str = "before", after: str = "after") -> list[str]:
    """Each step's runs of ``after`` divided by those of ``before`` run by run (the two ran in turn, so each pair
    saw the same machine): the median ratio of wall and of CPU time, with the lowest and highest, as a markdown
    table. On a noisy host a ratio of pairs says more than two medians taken minutes apart."""
    head = ["step", "sessions", "pairs", "after ÷ before, wall (min–max)", "after ÷ before, CPU (min–max)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for z in sizes:
        a, b = z.subjects.get(after), z.subjects.get(before)
        if a is None or b is None:
            continue
        for key, label in STEPS.items():
            if key not in a.steps or key not in b.steps:
                continue
            pairs = [(x_, y) for x_, y in zip(a.steps[key].runs, b.steps[key].runs) if y.seconds > 0]
            if not pairs:
                continue
            wall = paired_ratio([x_.seconds for x_, _ in pairs], [y.seconds for _, y in pairs])
            cpu = paired_ratio([x_.cpu_seconds for x_, _ in pairs], [y.cpu_seconds for _, y in pairs])
            out.append(f"| {label} | {z.sessions:,} | {len(pairs)} | {wall} | {cpu or 'n/a'} |")
    return out


def budgets(sizes: list[Size], name: str = "after", cores: int | None = None) -> list[str]:
    """What each wall-time target leaves: the target's CPU budget on this machine (target × cores) beside the CPU
    the step's whole process tree used. A step whose CPU exceeds the budget cannot meet its target by any schedule
    of that work on these cores (CPU ÷ cores is the least wall any schedule gives); only less work can. The scan's
    start-up (the command with nothing to do) is set against its budget too: it is paid, mostly on one core, before
    any call is read, so its wall ÷ target is the share of the budget gone before the work starts."""
    cores = cores or len(os.sched_getaffinity(0))
    small, large = sizes[0], sizes[-1]
    head = [
        "step",
        "sessions",
        "target",
        "wall",
        "wall ÷ target",
        "CPU (process tree)",
        f"CPU ÷ {cores} cores",
        f"CPU budget (target × {cores})",
        "CPU ÷ budget",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def line(label: str, z: Size, key: str, target: float | None, what: str) -> None:
        st = z.subjects[name].steps.get(key)
        if st is None or target is None:
            return
        budget = target * cores
        out.append(
            f"| {label} | {z.sessions:,} | {what} = {target:.2f} s | {st.seconds:.2f} s | "
            f"{x(div(st.seconds, target))} | {st.cpu:.1f} s | {st.cpu / cores:.2f} s | {budget:.1f} s | "
            f"{x(div(st.cpu, budget))} |"
        )

    calls = small.subjects[name].calls
    line(STEPS["ingest"], small, "ingest", INGEST_X * small.bare.seconds, f"{INGEST_X:g}× bare parse")
    line(STEPS["full"], small, "full", FULL_X * small.bare.seconds, f"{FULL_X:g}× bare parse")
    scan_budget = calls / SCAN_RATE if calls else None
    line(STEPS["scan"], small, "scan", scan_budget, f"calls ÷ {rate(SCAN_RATE)}")
    line(STEPS["startup"], small, "startup", scan_budget, "the scan's budget")
    if large.sessions == LARGE:
        line(STEPS["report"], large, "report", REPORT_S, f"{REPORT_S:g} s")
        line(STEPS["analyze"], large, "analyze", ANALYZE_S, f"{ANALYZE_S:g} s")
    return out


def _steps(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    try:
        schedule(keys)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not keys:
        raise argparse.ArgumentTypeError(f"name at least one step: {', '.join(STEPS)}")
    return keys


def _sessions(text: str) -> list[int]:
    try:
        sizes = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected session counts separated by commas, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("session counts must be at least 1")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sessions",
        "--sizes",
        type=_sessions,
        default=[SMALL, LARGE],
        help=f"corpus sizes in sessions, comma-separated (default {SMALL},{LARGE})",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs of each step; the median counts (default 3)")
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a second loopscope checkout (run by its .venv, or this one's if it has none) or a "
        "`loopscope` entry point, measured side by side as 'before'",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--mb-per-session",
        type=float,
        default=MB_PER_SESSION,
        help=f"corpus size per session (default {MB_PER_SESSION:.3f} MB, as the issue's)",
    )
    ap.add_argument("--corpus-dir", type=Path, default=Path("/tmp"), help="where the corpora are kept (default /tmp)")
    ap.add_argument("--workers", type=int, default=None, help="passed to ingest, scan and analyze (default: theirs)")
    ap.add_argument("--keep", action="store_true", help="keep the stores and reports (printed at the end)")
    ap.add_argument(
        "--steps",
        type=_steps,
        default=list(STEPS),
        help=f"the steps to time, comma-separated (default all: {','.join(STEPS)}); a step that runs on "
        "another's result runs that one once, untimed",
    )
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    checkouts = {"before": Checkout.at(args.baseline)} if args.baseline else {}
    checkouts["after"] = CHECKOUT
    for name, co in checkouts.items():
        co.compile()
        print(f"{name}: {co.exe} running the code in {co.source()}", flush=True)
    cc = ccusage_command()
    scratch = Path(tempfile.mkdtemp(prefix="bench-scale-work-", dir=args.corpus_dir))
    try:
        sizes = [measure_size(n, args, checkouts, cc, scratch) for n in sorted(args.sessions)]
    finally:
        if args.keep:
            print(f"stores and reports kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"\nScale benchmark (issue 13): medians of {args.repeat}, each step its own process on a warm page cache; "
        "seconds are wall time of the whole command, MB the peak RSS of its whole process tree; the bare parse is "
        "DuckDB's query time. 'met' judges the last column.\n"
    )
    print("\n".join(table(sizes, list(checkouts), set(args.steps))))
    print(
        "\nThe CPU each missed or met wall-time target leaves on this machine (the last column: above 1.00x, no "
        "schedule of the same work on these cores meets it):\n"
    )
    print("\n".join(budgets(sizes)))
    if args.baseline:
        print(f"\nRun by run, after ÷ before (each pair ran back to back; medians of {args.repeat} pairs):\n")
        print("\n".join(paired(sizes)))


if __name__ == "__main__":
    main()
