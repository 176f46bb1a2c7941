"""Score loopscope's stuck findings against the hand labels of tests/realdata, by source (precision, recall and
healthy-kept on real work).

The definitions are those of ``analyzer.evaluate.score`` (one scorer for this benchmark and for a user's labels): a
stuck finding (stuck, 3+ repeats) is *on* a labelled episode when they share a call or, for text, the looping message.
Precision = stuck findings on a `loop` label / stuck findings on a `loop` or `not_loop` label (unlabelled ones are
listed, not counted); recall = `loop` episodes with a stuck finding on them / `loop` episodes; healthy-kept =
`not_loop` labels with no stuck finding on them / `not_loop` labels; `unsure` counts nowhere. The tuning and the
held-out sources (``realdata_labels.part``) are scored apart, overall, per format and per source.

``python tests/realdata_score.py`` ingests and scans the labelled corpus into a temporary store and prints the
figures, the misses and the false findings (benchmarks/bench_realdata.py prints the same with timings).
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from realdata_labels import (  # noqa: E402
    FETCHED,
    HELD_OUT,
    REALDATA,
    TUNING,
    load_labels,
    part,
    part_of_source,
    present,
    source_of,
)

from analyzer.evaluate.found import read_found  # noqa: E402
from analyzer.evaluate.score import Episode, Found, Score, by_fields, table  # noqa: E402
from analyzer.evaluate.score import score as score_episodes  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
# The fixtures the labellers read in full (labels/fixtures.json; the README of tests/realdata says so). Fixtures added
# later for the adapters' tests are not labelled, and some duplicate realdata sessions: they stay out of the score.
LABELLED_FIXTURES = (
    "pi",
    "claude_code",
    "codex",
    "gemini/session-2025-12-01T21-45-5b959dae.json",
    "inspect/inspect_ai_browser.json",
    "openhands/trajs_basic.json",
    "swe_agent/demo_function_calling_simple.traj",
    "swe_agent/test_swe-agent__test-repo-i1.traj",
)
NOT_TRANSCRIPTS = ("labels", "sources", "tools", "fetched")


def _rel(path: str) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        pass
    try:  # a worktree whose fetched/ is a symlink to another checkout's: the file as this checkout names it
        return str((FETCHED / p.relative_to(FETCHED.resolve())).relative_to(ROOT))
    except ValueError:
        return path


def corpus_paths(fetched: bool = False) -> list[Path]:
    """The realdata folders (with ``fetched``, also the manifest-only files fetched under ``fetched/``), and every
    fixture file that is not a byte-identical copy of a realdata file (a copy would be loaded once, under the other
    path, and its labels would not meet its findings)."""
    import hashlib

    real = [p for p in sorted(REALDATA.iterdir()) if p.is_dir() and p.name not in NOT_TRANSCRIPTS]
    if fetched and FETCHED.is_dir():
        real.append(FETCHED)
    seen = {hashlib.sha1(f.read_bytes()).digest() for d in real for f in d.rglob("*") if f.is_file()}
    fixtures = [
        f
        for name in LABELLED_FIXTURES
        for f in sorted((FIXTURES / name).rglob("*"))
        if f.is_file() and hashlib.sha1(f.read_bytes()).digest() not in seen
    ]
    fixtures += [FIXTURES / name for name in LABELLED_FIXTURES if (FIXTURES / name).is_file()]
    return real + fixtures


# A label's format is the reference counter's name for it (tools/transcripts.py); loopscope names one of them
# otherwise.
LOOPSCOPE_FORMAT = {"gemini": "gemini_cli"}


def _groups(file: str, fmt: str) -> dict[str, str]:
    return {"format": LOOPSCOPE_FORMAT.get(fmt, fmt), "source": source_of(file), "part": part(file)}


def read_findings(con: Any) -> list[Found]:
    """Every finding of the store, with the calls (seq) and messages it covers (``evaluate.found.read_found``, as
    ``loopscope eval`` reads them), on the unit of its transcript file."""
    sessions = {
        sid: (_rel(path), fmt)
        for sid, path, fmt in con.execute("SELECT session_id, source_path, format FROM sessions").fetchall()
    }
    out = []
    for f in read_found(con, list(sessions)):
        file, fmt = sessions[f.unit]
        out.append(replace(f, unit=file, groups=_groups(file, fmt)))
    return out


def episodes(labels: list[dict[str, Any]], readable: set[str] | None = None, fetched: bool = True) -> list[Episode]:
    """The labels as episodes, leaving out files not on disk (a manifest-only source not fetched; all of them without
    ``fetched``) and formats loopscope does not read."""
    return [
        Episode(
            unit=lab["file"],
            label=lab["label"],
            first=lab["first_call_index"],
            last=lab["last_call_index"],
            message=lab["message_index"],
            kind=lab["kind"],
            groups=_groups(lab["file"], lab["format"]),
            record=lab,
        )
        for lab in labels
        if present(lab["file"])
        and (readable is None or LOOPSCOPE_FORMAT.get(lab["format"], lab["format"]) in readable)
        and (fetched or not (ROOT / lab["file"]).is_relative_to(FETCHED))
    ]


GROUP_BY = by_fields("part", "format", "source")


def score(
    con: Any, labels: list[dict[str, Any]] | None = None, readable: set[str] | None = None, fetched: bool = True
) -> dict[str, Score]:
    """Scores over "all", by part ("part=tuning", "part=held_out"), by part and format ("held_out/format=codex") and
    by source ("source=marot__spotter")."""
    labels = labels if labels is not None else load_labels()

    def keys(groups: Any, kind: str) -> list[str]:
        base = list(GROUP_BY(groups, kind))
        p = groups["part"]
        return base + [f"{p}/format={groups['format']}", f"{p}/all"]

    return score_episodes(read_findings(con), episodes(labels, readable, fetched), keys)


def build_store(db: Path, fetched: bool = False) -> None:
    """Ingest and scan the labelled corpus with the CLI's own library calls."""
    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan

    ingest(corpus_paths(fetched), db)
    scan(db)


def run(verbose: bool = True, fetched: bool = True, parts: tuple[str, ...] = (HELD_OUT, TUNING)) -> dict[str, Score]:
    """Build the store of the labelled corpus (with the fetched manifest-only files when ``fetched`` and present),
    score it, and print the figures of ``parts`` (the details of those parts only)."""
    import duckdb

    from analyzer.ingest import formats

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "realdata.duckdb"
        build_store(db, fetched)
        con = duckdb.connect(str(db), read_only=True)
        try:
            scores = score(con, readable=set(formats.names()), fetched=fetched)
        finally:
            con.close()
    if verbose:
        print(render(scores, parts))
    return scores


def render(
    scores: dict[str, Score], parts: tuple[str, ...] = (HELD_OUT, TUNING), details: bool = True, loso: bool = False
) -> str:
    """The headline (held-out and tuning sources), per part and format, per source; then what went wrong, for
    ``parts`` only (while rules change, the held-out part's misses are not looked at: pass ``(TUNING,)``)."""
    heads = [f"part={p}" for p in parts] + (["all"] if len(parts) > 1 else [])
    out = [
        "Held-out and tuning sources:" if len(parts) > 1 else f"{parts[0]} sources:",
        "",
        table(scores, heads, "part"),
    ]
    fmts = sorted({k.split("format=", 1)[1] for k in scores if "/format=" in k})
    out += [
        "",
        "Per format:",
        "",
        table(scores, [f"{p}/format={f}" for p in parts for f in fmts if f"{p}/format={f}" in scores], "part / format"),
    ]
    srcs = sorted((k for k in scores if k.startswith("source=")), key=str.lower)
    out += [
        "",
        "Per source:",
        "",
        table(scores, [k for p in parts for k in srcs if part_of_source(k.split("=", 1)[1]) == p], "source"),
    ]
    if loso:
        out += ["", "Leave one source out (each part's figures without each of its sources):", ""]
        out.append(leave_one_source_out(scores, parts))
    if details:
        merged = Score()
        for p in parts:
            s = scores.get(f"part={p}", Score())
            merged.false += s.false
            merged.missed += s.missed
            merged.unlabelled += s.unlabelled
        if merged.false:
            out.append("\nstuck findings on a not_loop label:")
            out += [
                f"  [{f.groups['part']}] {f.unit} {f.kind} x{f.repeats} calls {_span(f.seqs)} msgs "
                f"{sorted(f.messages)[:3]}: {f.why[:140]}"
                for f, _ in merged.false
            ]
        if merged.missed:
            out.append("\nloops no stuck finding is on:")
            out += [
                f"  [{m.groups['part']}] {m.unit} {m.kind} calls {m.first}-{m.last} msg {m.message}: {m.record['why']}"
                for m in merged.missed
            ]
        if merged.unlabelled:
            out.append(f"\nstuck findings on no label (listed, not counted): {len(merged.unlabelled)}")
            out += [
                f"  [{f.groups['part']}] {f.unit} {f.kind} x{f.repeats} calls {_span(f.seqs)}: {f.why[:140]}"
                for f in merged.unlabelled
            ]
    return "\n".join(out)


COUNTS = ("on_loop", "on_labels", "loops", "loops_found", "healthy", "healthy_kept")


def without(total: Score, left_out: Score) -> Score:
    """The figures of ``total`` with one group's counts taken out (the counts behind the ratios add up by source)."""
    return Score(**{c: getattr(total, c) - getattr(left_out, c) for c in COUNTS})


def leave_one_source_out(scores: dict[str, Score], parts: tuple[str, ...] = (HELD_OUT, TUNING)) -> str:
    """For each source, the figures of its part without it: how far the part's figures lean on any one source (a
    rule that fits one source's habits shows as a part whose figures fall when that source is left out)."""
    out = []
    for p in parts:
        total = scores.get(f"part={p}", Score())
        srcs = sorted((k for k in scores if k.startswith("source=") and part_of_source(k[7:]) == p), key=str.lower)
        rest = {f"{p} without {k[7:]}": without(total, scores[k]) for k in srcs}
        rows = [k for k in rest if any(getattr(scores[f"source={k.split(' without ', 1)[1]}"], c) for c in COUNTS)]
        out.append(table(rest, rows, "part without source"))
        for name, value in (("precision", "precision"), ("recall", "recall"), ("healthy-kept", "healthy_kept_rate")):
            vals = [v for v in (getattr(rest[k], value) for k in rows) if v is not None]
            if vals:
                out.append(f"{p}: {name} with one source left out ranges {min(vals):.2f}-{max(vals):.2f}")
        out.append("")
    return "\n".join(out).rstrip()


def _span(seqs: frozenset[int]) -> str:
    return f"{min(seqs)}-{max(seqs)}" if seqs else "-"


if __name__ == "__main__":
    run(parts=(TUNING,) if "--tuning" in sys.argv else (HELD_OUT, TUNING))
