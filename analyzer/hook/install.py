"""``loopscope hook install claude-code``: merge the hook's entries into a Claude Code ``settings.json``, never
touching other hooks; ``uninstall`` removes only the entries it added (recognised by their command).

Entries added (one per event, matcher ``*`` for the tool events)::

    {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "<loopscope-hook> claude-code",
                                                          "timeout": 10}]}],
               "PostToolUse": [...], "PostToolUseFailure": [...], "UserPromptSubmit": [{"hooks": [...]}]}}
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit")
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
MARKERS = ("loopscope-hook", "analyzer.hook")
TIMEOUT = 10  # seconds; the hook answers in tens of milliseconds and fails open


def settings_file(scope: str, project_dir: Path | None = None) -> Path:
    """``user``: ~/.claude/settings.json; ``project``: <project>/.claude/settings.json; ``local``: its
    settings.local.json (not committed)."""
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    base = (project_dir or Path.cwd()) / ".claude"
    return base / ("settings.local.json" if scope == "local" else "settings.json")


def hook_command(extra: list[str] | None = None, agent: str = "claude-code") -> str:
    """The command the agent runs: the ``loopscope-hook`` script next to this interpreter (else on PATH, else
    ``python -m analyzer.hook``), with the agent's name (``claude-code``) and any extra arguments."""
    script = Path(sys.executable).with_name("loopscope-hook")
    if script.exists():
        head = [str(script)]
    elif shutil.which("loopscope-hook"):
        head = [str(shutil.which("loopscope-hook"))]
    else:
        head = [sys.executable, "-m", "analyzer.hook"]
    return shlex.join(head + [agent] + (extra or []))


def is_ours(entry: Any) -> bool:
    cmd = entry.get("command") if isinstance(entry, dict) else None
    return isinstance(cmd, str) and any(m in cmd for m in MARKERS) and "claude-code" in cmd


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".loopscope.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def remove_entries(
    data: dict[str, Any], ours: Callable[[Any], bool] = is_ours, keep: dict[str, Any] | None = None
) -> list[str]:
    """Drop the hook entries ``ours`` claims from an agent's settings (and groups and events left empty), except a
    group equal to ``keep[event]``; return what was removed, in words. Every agent's hooks file nests them alike:
    ``{"hooks": {event: [{"matcher"?, "hooks": [entry, ...]}]}}``."""
    removed: list[str] = []
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return removed
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for g in groups:
            if keep is not None and g == keep.get(event):
                kept_groups.append(g)
                continue
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                kept_groups.append(g)
                continue
            mine = [h for h in g["hooks"] if ours(h)]
            if not mine:
                kept_groups.append(g)
                continue
            removed.extend(f"{event}: {h['command']}" for h in mine)
            rest = [h for h in g["hooks"] if not ours(h)]
            if rest:
                kept_groups.append({**g, "hooks": rest})
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if not hooks:
        del data["hooks"]
    return removed


def install(path: Path, command: str) -> tuple[list[str], list[str]]:
    """Add (or refresh) our entries in ``path``; returns (removed, added) in words. Other hooks are kept as they
    are."""
    data = _load(path)
    if "hooks" in data and not isinstance(data["hooks"], dict):
        raise ValueError(f'{path}: "hooks" is not an object')
    removed = remove_entries(data)
    hooks = data.setdefault("hooks", {})
    added = []
    for event in EVENTS:
        entry = {"type": "command", "command": command, "timeout": TIMEOUT}
        group: dict[str, Any] = {"matcher": "*", "hooks": [entry]} if event in TOOL_EVENTS else {"hooks": [entry]}
        hooks.setdefault(event, []).append(group)
        added.append(f"{event}: {command}")
    _save(path, data)
    return removed, added


def uninstall(path: Path) -> list[str]:
    """Remove our entries from ``path`` (other hooks stay); returns what was removed."""
    if not path.exists():
        return []
    data = _load(path)
    removed = remove_entries(data)
    if removed:
        _save(path, data)
    return removed
