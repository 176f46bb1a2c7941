"""Score loopscope's stuck findings against the hand labels of tests/realdata (precision and recall on real work).

The rule (issue: "findings you can trust on real transcripts"): a stuck finding with 3+ repeats *matches* a labelled
episode when they share a call, or, for text, the looping message. Precision = stuck findings that match a `loop`
label / all stuck findings (a finding that matches only `unsure` labels is left out of both counts). Recall =
`loop` labels matched by some stuck finding / `loop` labels in the formats loopscope reads. Tuning and held-aside
parts (``realdata_labels.part``) are scored apart.

``python tests/realdata_score.py`` ingests and scans the labelled corpus into a temporary store and prints the
figures, the misses and the false findings (benchmarks/bench_realdata.py prints the same with timings).
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from realdata_labels import REALDATA, load_labels, part  # noqa: E402

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


def corpus_paths() -> list[Path]:
    """The realdata folders, and every fixture file that is not a byte-identical copy of a realdata file (a copy
    would be loaded once, under the other path, and its labels would not meet its findings)."""
    import hashlib

    real = [p for p in sorted(REALDATA.iterdir()) if p.is_dir() and p.name not in ("labels", "sources", "tools")]
    seen = {hashlib.sha1(f.read_bytes()).digest() for d in real for f in d.rglob("*") if f.is_file()}
    fixtures = [
        f
        for name in LABELLED_FIXTURES
        for f in sorted((FIXTURES / name).rglob("*"))
        if f.is_file() and hashlib.sha1(f.read_bytes()).digest() not in seen
    ]
    fixtures += [FIXTURES / name for name in LABELLED_FIXTURES if (FIXTURES / name).is_file()]
    return real + fixtures


@dataclass
class Finding:
    finding_id: str
    file: str
    kind: str
    repeats: int
    seqs: set[int]
    messages: set[int]
    why: str
    repeated: str


@dataclass
class PartScore:
    stuck: int = 0
    matched: int = 0
    unsure_only: int = 0
    loops: int = 0
    loops_found: int = 0
    false: list[Finding] = field(default_factory=list)
    missed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        n = self.stuck - self.unsure_only
        return self.matched / n if n else 1.0

    @property
    def recall(self) -> float:
        return self.loops_found / self.loops if self.loops else 1.0


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


def _message_key(fmt: str, turn_id: str | None, line: int | None) -> int | None:
    """The labels' ``message_index`` of a turn: the message's position in mini-swe-agent's ``messages`` / SWE-agent's
    ``trajectory``, else the 0-based physical line of a JSON-lines file."""
    if fmt in ("mini_swe_agent", "swe_agent"):
        if turn_id and turn_id[:1] in "msh" and turn_id[1:].isdigit():
            return int(turn_id[1:])
        return None
    return line - 1 if line is not None else None


def stuck_findings(con: Any) -> list[Finding]:
    """Every stuck finding with 3+ repeats, with the calls (seq) and messages it covers."""
    rows = con.execute(
        """
        SELECT f.finding_id, s.source_path, s.format, f.kind, f.repeats, f.first_seq, f.last_seq,
               coalesce(f.why, '') AS why, coalesce(f.repeated, '') AS repeated,
               (SELECT list(c.seq) FROM calls c WHERE c.session_id = f.session_id
                  AND list_contains(f.call_ids, c.call_id)) AS seqs
        FROM findings f JOIN sessions s USING (session_id)
        WHERE f.stuck AND f.repeats >= 3
    """
        if _has_why(con)
        else """
        SELECT f.finding_id, s.source_path, s.format, f.kind, f.repeats, f.first_seq, f.last_seq,
               '' AS why, coalesce(f.repeated, '') AS repeated,
               (SELECT list(c.seq) FROM calls c WHERE c.session_id = f.session_id
                  AND list_contains(f.call_ids, c.call_id)) AS seqs
        FROM findings f JOIN sessions s USING (session_id)
        WHERE f.stuck AND f.repeats >= 3
    """
    ).fetchall()
    msgs: dict[str, set[int]] = defaultdict(set)
    for fid, fmt, turn_id, line in con.execute("""
            SELECT x.finding_id, s.format, t.turn_id, t.line
            FROM text_signals x JOIN turns t USING (session_id, turn_id) JOIN sessions s USING (session_id)
            WHERE x.finding_id IS NOT NULL""").fetchall():
        key = _message_key(fmt, turn_id, line)
        if key is not None:
            msgs[fid].add(key)
    # A text loop whose messages issued no call (thoughts between calls) stands for the calls of its span.
    span = {
        fid: set(seqs)
        for fid, seqs in con.execute("""
        SELECT f.finding_id, list(c.seq) FROM findings f
        JOIN turns t ON t.session_id = f.session_id AND t.turn_index BETWEEN f.first_turn_index AND f.last_turn_index
        JOIN calls c ON c.session_id = t.session_id AND c.turn_id = t.turn_id
        WHERE f.kind = 'text' AND len(f.call_ids) = 0 GROUP BY f.finding_id""").fetchall()
    }
    out = []
    for fid, path, _fmt, kind, repeats, _first, _last, why, repeated, seqs in rows:
        out.append(
            Finding(
                fid,
                _rel(path),
                kind,
                int(repeats),
                set(seqs or []) | span.get(fid, set()),
                msgs.get(fid, set()),
                why,
                repeated,
            )
        )
    return out


def _has_why(con: Any) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'findings' AND column_name = 'why'"
        ).fetchone()[0]
    )


def _overlaps(f: Finding, label: dict[str, Any]) -> bool:
    if f.file != label["file"]:
        return False
    first, last = label["first_call_index"], label["last_call_index"]
    if first is not None and any(first <= s <= last for s in f.seqs):
        return True
    return label["message_index"] is not None and label["message_index"] in f.messages


def score(
    con: Any, labels: list[dict[str, Any]] | None = None, readable: set[str] | None = None
) -> dict[str, PartScore]:
    """Scores by part ("tuning", "held_aside") and over "all"."""
    labels = labels if labels is not None else load_labels()
    found = stuck_findings(con)
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for lab in labels:
        by_file[lab["file"]].append(lab)
    parts = {"tuning": PartScore(), "held_aside": PartScore(), "all": PartScore()}
    for f in found:
        hits = [lab for lab in by_file.get(f.file, []) if _overlaps(f, lab)]
        for name in (part(f.file), "all"):
            p = parts[name]
            p.stuck += 1
            if any(h["label"] == "loop" for h in hits):
                p.matched += 1
            elif hits and all(h["label"] == "unsure" for h in hits):
                p.unsure_only += 1
            else:
                p.false.append(f)
    for lab in labels:
        if lab["label"] != "loop" or (readable is not None and lab["format"] not in readable):
            continue
        hit = any(_overlaps(f, lab) for f in found)
        for name in (part(lab["file"]), "all"):
            p = parts[name]
            p.loops += 1
            if hit:
                p.loops_found += 1
            else:
                p.missed.append(lab)
    return parts


def build_store(db: Path) -> None:
    """Ingest and scan the labelled corpus with the CLI's own library calls."""
    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan

    ingest(corpus_paths(), db)
    scan(db)


def run(verbose: bool = True) -> dict[str, PartScore]:
    import duckdb

    from analyzer.ingest import formats

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "realdata.duckdb"
        build_store(db)
        con = duckdb.connect(str(db), read_only=True)
        try:
            parts = score(con, readable=set(formats.names()))
        finally:
            con.close()
    if verbose:
        print(render(parts))
    return parts


def render(parts: dict[str, PartScore], details: bool = True) -> str:
    lines = [
        "| part | stuck findings | matching a loop | precision | loops | found | recall |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("tuning", "held_aside", "all"):
        p = parts[name]
        lines.append(
            f"| {name} | {p.stuck - p.unsure_only} | {p.matched} | {p.precision:.2f} | {p.loops} | "
            f"{p.loops_found} | {p.recall:.2f} |"
        )
    if details:
        p = parts["all"]
        if p.false:
            lines.append("\nstuck findings that match no loop label:")
            lines += [
                f"  {f.file} {f.kind} x{f.repeats} calls {sorted(f.seqs)[:3]}..{sorted(f.seqs)[-1:]} "
                f"msgs {sorted(f.messages)[:3]}: {f.why or f.repeated[:100]}"
                for f in p.false
            ]
        if p.missed:
            lines.append("\nloops no stuck finding matches:")
            lines += [
                f"  {m['file']} {m['kind']} calls {m['first_call_index']}-{m['last_call_index']} "
                f"msg {m['message_index']}: {m['why']}"
                for m in p.missed
            ]
    return "\n".join(lines)


if __name__ == "__main__":
    run()
