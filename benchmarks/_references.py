"""The reference tools the ingest is held against, run on the same files (shared by the benchmarks).

- DuckDB's bare parse: every line of every ``*.jsonl`` file read and one field extracted, the floor for "read all
  the JSON once" (it uses every core, as the ingest does);
- ccusage, pinned to the version issue 13 names: token accounting only, the nearest tool users already run over the
  same transcripts. It finds each agent's data through the variables its docs list (``CLAUDE_CONFIG_DIR`` holding a
  ``projects/`` folder, ``CODEX_HOME`` holding ``sessions/``, ``PI_AGENT_DIR`` the pi sessions folder itself); a
  scratch folder of symlinks maps the corpus's layout onto them, and an empty ``HOME`` keeps the machine's own agent
  data out of the measurement.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from _measure import Run, run

BARE_PARSE = """
import duckdb, json, sys, time
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
t = time.perf_counter()
rows, typed = con.execute(
    "SELECT count(*), count(json_extract_string(json, '$.type')) FROM read_json_objects(?, "
    "format='newline_delimited', ignore_errors=true, maximum_object_size=1073741824)", [sys.argv[1]]).fetchone()
print(json.dumps({"seconds": time.perf_counter() - t, "rows": rows, "typed": typed}))
"""

CCUSAGE_VERSION = "20.0.24"
CCUSAGE_AGENTS = {"claude": "claude_code", "codex": "codex", "pi": "pi"}  # ccusage's agent -> the corpus's folder


@dataclass
class BareParse:
    seconds: float  # the query's own time, without the interpreter's start
    objects: int  # JSON objects read
    run: Run  # the whole process (wall time, peak RSS)


def bare_parse(corpus: Path, runs: int = 2) -> list[BareParse]:
    """DuckDB's bare parse of every ``*.jsonl`` under ``corpus``, ``runs`` times, each in its own process."""
    out = []
    for _ in range(runs):
        r = run([sys.executable, "-c", BARE_PARSE, f"{corpus}/**/*.jsonl"])
        if r.returncode:
            raise SystemExit(f"bare parse failed:\n{r.stderr}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        out.append(BareParse(res["seconds"], res["rows"], r))
    return out


def ccusage_command() -> list[str] | None:
    """ccusage at the pinned version: on ``PATH``, else through ``npx`` if already installed (never downloaded
    here); None when neither has it."""
    candidates = [["ccusage"]] if shutil.which("ccusage") else []
    if shutil.which("npx"):
        candidates.append(["npx", "--no-install", f"ccusage@{CCUSAGE_VERSION}"])
    for cmd in candidates:
        try:
            v = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if v.returncode == 0 and CCUSAGE_VERSION in v.stdout:
            return cmd
    return None


def ccusage_env(corpus: Path, scratch: Path) -> dict[str, str]:
    """The environment that points ccusage at the corpus's Claude Code, Codex and pi sessions, and nothing else."""
    home, claude, codex = scratch / "home", scratch / "claude", scratch / "codex"
    for d in (home, claude, codex):
        d.mkdir(parents=True, exist_ok=True)
    for link, target in ((claude / "projects", corpus / "claude_code"), (codex / "sessions", corpus / "codex")):
        if not link.is_symlink():
            link.symlink_to(target)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CODEX_", "PI_", "XDG_"))}
    return {
        **env,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(claude),
        "CODEX_HOME": str(codex),
        "PI_AGENT_DIR": str(corpus / "pi"),
        "NO_COLOR": "1",
    }


def ccusage(cmd: list[str], corpus: Path, scratch: Path) -> tuple[Run, dict[str, int]]:
    """One ``ccusage daily --offline`` over the corpus: the run, and the tokens it counted per agent (all three
    must be there, or the figure would time a tool that skipped part of the corpus)."""
    r = run([*cmd, "daily", "--offline", "--json", "--by-agent"], env=ccusage_env(corpus, scratch))
    if r.returncode:
        raise SystemExit(f"ccusage failed ({r.returncode}):\n{r.stderr[-2000:]}")
    tokens: dict[str, int] = {}
    for day in json.loads(r.stdout).get("daily", []):
        for agent in day.get("agents", []):
            tokens[agent["agent"]] = tokens.get(agent["agent"], 0) + int(agent.get("totalTokens", 0))
    missing = [a for a, folder in CCUSAGE_AGENTS.items() if (corpus / folder).exists() and not tokens.get(a)]
    if missing:
        raise SystemExit(f"ccusage counted no tokens for {', '.join(missing)} in {corpus}: check its environment")
    return r, tokens
