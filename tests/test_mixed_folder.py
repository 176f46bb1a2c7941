"""Nothing disappears silently: a folder holding one small transcript of every format plus files of no known format
runs through `loopscope analyze`; every transcript is read, and every other file is named with its reason in the
command's output and on the report's index page ("Files not read"), paths redacted like all transcript text."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import query
from test_ingest_opencode import write_db

from analyzer.ingest import formats
from analyzer.ingest.pipeline import IngestSummary

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = {  # one small public fixture per format (fixtures/SOURCES.md)
    "pi": "pi/earendil-pi_prompt-cache-replay-session.jsonl",
    "claude_code": "claude_code/sample_session.jsonl",
    "codex": "codex/codemie_turn-spawn-skill.jsonl",
    "openai_messages": "openai_messages/dataset-parser_valid_full.jsonl",
    "swe_agent": "swe_agent/test_swe-agent__test-repo-i1.traj",
    "mini_swe_agent": (
        "mini_swe_agent/20251118_gemini-3-pro-74pct/trajs/django__django-15863/django__django-15863.traj.json"
    ),
    "openhands": "openhands/trajs_basic.json",
    "inspect": "inspect/log_formats.eval",
    "gemini_cli": "gemini/session-2025-12-01T21-45-5b959dae.json",
}
SECRET = "ghp_" + "a1B2c3D4e5" * 4  # a path can carry a secret too


def mixed_folder(root: Path) -> dict[str, str]:
    """The folder; returns the unknown files' names -> the start of the reason each must be listed with."""
    for fmt, rel in SMALL.items():
        dest = root / fmt / Path(rel).name
        dest.parent.mkdir(parents=True)
        shutil.copyfile(FIXTURES / rel, dest)
    (root / "opencode").mkdir()
    write_db(root / "opencode" / "opencode.db")  # no public opencode fixture: the opencode tests' own database
    (root / "README.md").write_text("# what is in here\n")
    (root / "results.json").write_text('{"accuracy": 0.5, "runs": [1, 2, 3]}\n')
    (root / "blob.bin").write_bytes(bytes(range(256)) * 8)
    (root / f"{SECRET}.json").write_text('{"not": "a transcript"}\n')
    return {
        "README.md": "not read: a .md file",
        "results.json": "unknown format: no record looks like",
        "blob.bin": "binary file",
        f"{SECRET}.json": "unknown format: no record looks like",
    }


def test_every_format_is_read_and_every_other_file_is_named(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    unknown = mixed_folder(root)
    assert set(SMALL) | {"opencode"} == set(formats.names())
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", "analyze", str(root)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    db = work / "loopscope.duckdb"
    assert sorted(r[0] for r in query(db, "SELECT DISTINCT format FROM files WHERE status = 'ingested'")) == sorted(
        formats.names()
    )
    skipped = {Path(p).name: r for p, r in query(db, "SELECT path, reason FROM files WHERE status = 'skipped'")}
    assert sorted(skipped) == sorted(unknown)
    for name, reason in unknown.items():
        assert skipped[name].startswith(reason), (name, skipped[name])
        assert f"skipped {root / name}: {skipped[name]}" in proc.stdout
    html = (work / "loopscope-report" / "index.html").read_text()
    assert "Files not read" in html and "4 files found but not read" in html
    for name in ("README.md", "results.json", "blob.bin"):
        assert name in html
    assert SECRET not in html and "[REDACTED github-token].json" in html


def test_the_summary_names_the_first_skipped_files_and_counts_the_rest() -> None:
    s = IngestSummary(skipped=[(f"/x/f{i:02d}.json", "unknown format") for i in range(25)])
    lines = s.skipped_lines(limit=20)
    assert lines[0] == "skipped /x/f00.json: unknown format" and len(lines) == 21
    assert lines[-1].startswith("… and 5 more skipped files") and "FROM files WHERE status = 'skipped'" in lines[-1]
    assert IngestSummary().skipped_lines() == []


def test_ingest_prints_each_skipped_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from analyzer.cli import app

    shutil.copyfile(FIXTURES / SMALL["pi"], tmp_path / "s.jsonl")
    (tmp_path / "a.json").write_text("[1, 2]\n")
    (tmp_path / "b.log").write_text("plain text\n")
    res = CliRunner().invoke(app, ["ingest", str(tmp_path), "--db", str(tmp_path / "x.duckdb")])
    assert res.exit_code == 0, res.output
    assert f"skipped {tmp_path / 'a.json'}: a JSON array of no known transcript format" in res.output
    assert f"skipped {tmp_path / 'b.log'}: " in res.output


def test_a_backup_of_agent_homes_is_read_and_other_hidden_folders_are_not(tmp_path: Path) -> None:
    """A dotfiles or backup repository keeps sessions under `.claude/` and `.codex/`: discovery walks into the agents'
    own hidden homes, and still skips other hidden folders and files (`.git`, `.venv`, `.DS_Store`)."""
    from analyzer.ingest.pipeline import discover

    root = tmp_path / "dotfiles"
    claude = root / ".claude" / "projects" / "-home-me-app" / "s.jsonl"
    codex = root / ".codex" / "sessions" / "2026" / "01" / "02" / "rollout.jsonl"
    hidden = [root / ".git" / "objects" / "x.jsonl", root / ".venv" / "s.jsonl", root / ".claude" / ".DS_Store"]
    for dest, src in [(claude, SMALL["claude_code"]), (codex, SMALL["codex"])] + [(h, SMALL["codex"]) for h in hidden]:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / src, dest)
    assert {".claude", ".codex"} <= formats.agent_home_dirs()
    assert sorted(f.path for f in discover([root])) == sorted([str(claude), str(codex)])
