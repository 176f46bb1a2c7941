"""Run the reference tool, ccusage, on transcript files, when it is installed.

ccusage (npm package ``ccusage``, 20.x) reads the agents' folders under $HOME, so each call builds a throwaway home
with the files laid out where ccusage looks. Set LOOPSCOPE_CCUSAGE to the binary (``.ci/run`` installs it), or put
``ccusage`` on PATH; tests that need it skip, saying why, when neither is there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

# Where each agent keeps its sessions, relative to $HOME, as ccusage looks for them.
_LAYOUT = {
    "claude": ".claude/projects",
    "codex": ".codex/sessions",
    "pi": ".pi/agent/sessions",
    "gemini": ".gemini/tmp",
    "opencode": ".local/share/opencode",
}


def ccusage_binary() -> str:
    exe = os.environ.get("LOOPSCOPE_CCUSAGE") or shutil.which("ccusage")
    if not exe or not Path(exe).exists():
        pytest.skip("ccusage not installed (set LOOPSCOPE_CCUSAGE; .ci/run installs ccusage@20.0.24)")
    return exe


def run_ccusage(agent: str, files: dict[str, Path]) -> list[dict[str, Any]]:
    """``ccusage <agent> session --json --offline`` over ``files``, a map of path-under-the-agent-folder -> source
    file (e.g. ``{"proj/abc.jsonl": fixture}``). Returns the ``sessions`` list."""
    exe = ccusage_binary()
    with tempfile.TemporaryDirectory(prefix="ccusage-home-") as home:
        base = Path(home) / _LAYOUT[agent]
        for rel, src in files.items():
            dst = base / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "CLAUDE_CONFIG_DIR",
                "CODEX_HOME",
                "PI_CODING_AGENT_DIR",
                "GEMINI_DATA_DIR",
                "GEMINI_CLI_HOME",
                "OPENCODE_DATA_DIR",
                "XDG_DATA_HOME",
            )
        }
        env.update(HOME=home, TZ="UTC", NO_COLOR="1")
        proc = subprocess.run(
            [exe, agent, "session", "--json", "--offline"], env=env, capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            raise AssertionError(f"ccusage failed: {proc.stderr[-500:]}")
        return json.loads(proc.stdout).get("sessions", [])
