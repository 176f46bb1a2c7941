#!/usr/bin/env python3
"""Ingest speed per format, in MB of JSON per second, next to the Claude Code adapter's.

    python benchmarks/bench_formats.py [--mb 20] [--repeat 2] [--work /tmp/loopscope-bench-formats]

For every format, a corpus of about ``--mb`` MB of JSON is built from one real transcript of that format (the
project's test data) copied into files of the same size, or generated where no big public sample exists (OpenAI
messages: τ-bench-shaped rows; Gemini CLI: the fixture's messages repeated; opencode: an ``opencode.db`` with many
messages). The MB counted are the JSON bytes the adapter reads: the file size for JSON and JSONL, the uncompressed
members for an Inspect ``.eval`` zip, and the JSON ``data`` columns for ``opencode.db``.

Two figures per format, each the best of ``--repeat`` runs in this one process (warm page cache, one core):

* parse: the adapter and the row spool (``parse_file`` into a ``RowSink``), the per-format part of an ingest;
* ingest: ``ingest(folder, fresh store, workers=1)``, parse plus landing in DuckDB (copies of one transcript share
  session ids, so landing drops all but one copy of each: a like-for-like parse figure, a lower bound for landing).

The ratio is the format's parse MB/s over Claude Code's; the target is every format within 1.5x (ratio >= 0.67).
Calls per MB say how much work a MB holds: a format whose MB carries many small calls parses fewer MB per second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL, FIX = ROOT / "tests" / "realdata", ROOT / "tests" / "fixtures"

SOURCES = {  # format -> one real transcript, copied
    "claude_code": REAL / "claude_code/marot__spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
    "codex": REAL / "codex/codemie-ai__codemie-code/src/agents/plugins/codex/__tests__/fixtures/"
                    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    "pi": REAL / "pi/badlogic__pi-mono/compact.jsonl",
    "swe_agent": REAL / "swe_agent/SWE-bench__SWE-smith/tests/test_logs/trajectories/pydantic__pydantic.acb0f10f.pr_8316/"
                        "pydantic__pydantic.acb0f10f.pr_8316.traj",
    "mini_swe_agent": REAL / "mini_swe_agent/gruckion__mini-swe-agent/20251118_gemini-3-pro-74pct/trajs/"
                             "scikit-learn__scikit-learn-25102/scikit-learn__scikit-learn-25102.traj.json",
    "openhands": REAL / "openhands/xli04__Multi_Round_OpenAgentSafety/evaluation/claude-sonnet/"
                        "traj_safety-disagreement.json",
    "inspect": REAL / "inspect/TransluceAI__docent/docent/docent/samples/log.eval",
}
TARGET_RATIO = 1 / 1.5


def json_bytes(path: Path) -> int:
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as z:
            return sum(i.file_size for i in z.infolist())
    if path.name == "opencode.db":
        con = sqlite3.connect(path)
        try:
            return sum(con.execute(f"SELECT coalesce(sum(length(data)), 0) FROM {t}").fetchone()[0]
                       for t in ("message", "part"))
        finally:
            con.close()
    return path.stat().st_size


def replicate(src: Path, out: Path, mb: float) -> list[Path]:
    """Copies of ``src``, each in its own folder named like the source's (some formats take the session from it)."""
    each = json_bytes(src)
    n = max(1, round(mb * 1e6 / each))
    files = []
    for i in range(n):
        d = out / f"copy{i:03d}" / src.parent.name
        d.mkdir(parents=True)
        files.append(Path(shutil.copyfile(src, d / src.name)))
    return files


def tau_rows(out: Path, mb: float) -> list[Path]:
    """OpenAI messages as τ-bench results rows in JSONL, ~1 MB files (ids all "0", matched by position)."""
    files, size, i = [], 0, 0
    while size < mb * 1e6:
        f = out / f"tau-{len(files):03d}.jsonl"
        with f.open("w") as fh:
            while fh.tell() < 1_000_000:
                traj = [{"role": "system", "content": "# Retail agent policy\n" + "policy text " * 200},
                        {"role": "user", "content": f"Exchange order #{i}"}]
                for k in range(12):
                    traj.append({"role": "assistant", "content": None, "tool_calls": [
                        {"id": "0", "type": "function",
                         "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": f"#W{i}{k}"})}}]})
                    traj.append({"role": "tool", "tool_call_id": "0", "name": "get_order_details",
                                 "content": json.dumps({"order_id": f"#W{i}{k}", "items": ["x" * 40] * 12})})
                traj.append({"role": "assistant", "content": "Done."})
                fh.write(json.dumps({"task_id": i, "reward": 1.0, "info": {}, "traj": traj, "trial": 0}) + "\n")
                i += 1
        files.append(f)
        size += f.stat().st_size
    return files


def gemini_files(out: Path, mb: float) -> list[Path]:
    """The Gemini CLI fixture's messages repeated (fresh ids) into ~1 MB conversation records."""
    doc = json.loads((FIX / "gemini/session-2025-12-01T21-45-5b959dae.json").read_text())
    base = doc["messages"]
    reps = max(1, round(1_000_000 / len(json.dumps(base))))
    files, size = [], 0
    while size < mb * 1e6:
        n = len(files)
        msgs = [dict(m, id=f"{m.get('id')}-{r}") for r in range(reps) for m in base]
        f = out / f"session-{n:03d}.json"
        f.write_text(json.dumps(dict(doc, sessionId=f"{doc['sessionId']}-{n}", messages=msgs), indent=2))
        files.append(f)
        size += f.stat().st_size
    return files


def opencode_db(out: Path, mb: float) -> list[Path]:
    """One ``opencode.db`` (the shape of opencode >= 1.2) with ~``mb`` MB of message and part JSON."""
    path = out / "opencode.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,
            directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, cost REAL NOT NULL DEFAULT 0,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
            time_updated INTEGER NOT NULL, data TEXT NOT NULL);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
            time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    """)
    t0, size, n = 1_760_000_000_000, 0, 0
    sessions = 0
    while size < mb * 1e6:
        sid = f"ses_bench{sessions:05d}"
        con.execute("INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (sid, "proj", None, "slug", "/work/app", "bench", "1.2.0", 0.0, t0, t0))
        sessions += 1
        for j in range(200):
            if j % 10 == 0:  # a prompt, then the assistant messages (model steps) that answer it
                uid = f"msg_{n:08d}u"
                udata = json.dumps({"role": "user", "time": {"created": t0 + n}, "agent": "build",
                                    "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}})
                con.execute("INSERT INTO message VALUES (?,?,?,?,?)", (uid, sid, t0 + n, t0 + n, udata))
                updata = json.dumps({"type": "text", "text": f"fix test {n} please"})
                con.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (f"prt_{n:08d}u", uid, sid, t0, t0, updata))
                size += len(udata) + len(updata)
            mid = f"msg_{n:08d}"
            data = json.dumps({"role": "assistant", "modelID": "claude-sonnet-4-5", "providerID": "anthropic",
                               "time": {"created": t0 + n, "completed": t0 + n + 1}, "cost": 0.01,
                               "tokens": {"input": 100, "output": 20, "reasoning": 0,
                                          "cache": {"read": 1000, "write": 0}}})
            con.execute("INSERT INTO message VALUES (?,?,?,?,?)", (mid, sid, t0 + n, t0 + n, data))
            size += len(data)
            for k, part in enumerate((
                    {"type": "step-start"},
                    {"type": "text", "text": "Running the tests again. " * 8},
                    {"type": "tool", "callID": f"toolu_{n:08d}", "tool": "bash",
                     "state": {"status": "completed", "input": {"command": f"pytest -q tests/test_{n % 50}.py"},
                               "output": "collected 12 items\n" + "." * 600 + "\n12 passed", "title": "pytest",
                               "metadata": {}, "time": {"start": t0 + n, "end": t0 + n + 1}}},
                    {"type": "step-finish", "cost": 0.01,
                     "tokens": {"input": 100, "output": 20, "reasoning": 0, "cache": {"read": 1000, "write": 0}}})):
                pdata = json.dumps(part)
                con.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (f"prt_{n:08d}{k}", mid, sid, t0, t0, pdata))
                size += len(pdata)
            n += 1
    con.commit()
    con.close()
    return [path]


def build(fmt: str, out: Path, mb: float) -> list[Path]:
    out.mkdir(parents=True)
    if fmt in SOURCES:
        return replicate(SOURCES[fmt], out, mb)
    return {"openai_messages": tau_rows, "gemini_cli": gemini_files, "opencode": opencode_db}[fmt](out, mb)


def time_parse(files: list[Path], spool: Path) -> tuple[float, str | None]:
    from analyzer.ingest.parse import FileTask, parse_file
    from analyzer.ingest.rows import RowSink

    spool.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    sink = RowSink(spool, "bench")
    formats = set()
    calls = 0
    for i, f in enumerate(files, 1):
        st = f.stat()
        o = parse_file(FileTask(i, str(f), st.st_size, st.st_mtime_ns), sink)
        formats.add(o.format if o.status == "ingested" else f"skipped: {o.reason}")
        calls += o.calls
    sink.close()
    secs = time.perf_counter() - t
    shutil.rmtree(spool)
    return secs, ", ".join(sorted(map(str, formats))), calls


def time_ingest(folder: Path, db: Path) -> float:
    from analyzer.ingest.pipeline import ingest

    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    t = time.perf_counter()
    ingest([folder], db, workers=1)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0, help="MB of JSON per format (default 20)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is kept (default 2)")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--formats", default=None, help="comma-separated subset (claude_code is always measured)")
    args = ap.parse_args()

    from analyzer.ingest import formats as registry

    names = ["claude_code"] + [f for f in registry.names() if f != "claude_code"]
    if args.formats:
        names = ["claude_code"] + [f for f in args.formats.split(",") if f != "claude_code"]
    work = args.work or Path(tempfile.mkdtemp(prefix="loopscope-bench-formats-"))
    rows = []
    try:
        for fmt in names:
            folder = work / fmt
            if folder.exists():
                shutil.rmtree(folder)
            files = build(fmt, folder, args.mb)
            mbytes = sum(json_bytes(f) for f in files) / 1e6
            _, got, calls = time_parse(files, work / "spool")  # also warms the page cache and the imports
            parse_s = min(time_parse(files, work / "spool")[0] for _ in range(args.repeat))
            ingest_s = min(time_ingest(folder, work / "bench.duckdb") for _ in range(args.repeat))
            rows.append((fmt, len(files), mbytes, calls / mbytes, mbytes / parse_s, mbytes / ingest_s, got))
            print(f"{fmt:16} {len(files):4} files {mbytes:7.1f} MB {calls / mbytes:7.0f} calls/MB  "
                  f"parse {mbytes / parse_s:6.1f} MB/s  ingest {mbytes / ingest_s:6.1f} MB/s  ({got})", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    cc = rows[0][4]
    print("\n| format | files | MB of JSON | calls per MB | parse MB/s | ingest MB/s | parse vs Claude Code | "
          "within 1.5x |")
    print("|---|---:|---:|---:|---:|---:|---:|:---:|")
    for fmt, n, mbytes, cpm, p, i, _ in rows:
        ratio = p / cc
        ok = "—" if fmt == "claude_code" else ("yes" if ratio >= TARGET_RATIO else "**no**")
        print(f"| {fmt} | {n} | {mbytes:.1f} | {cpm:.0f} | {p:.1f} | {i:.1f} | {ratio:.2f}x | {ok} |")


if __name__ == "__main__":
    main()
