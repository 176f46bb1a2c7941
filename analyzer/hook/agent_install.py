"""``loopscope hook install|uninstall codex|gemini-cli`` and ``hook status``: merge the hook into the agent's own JSON
file, keep every other entry, record what was switched on, and undo exactly that.

- **Codex CLI**: ``$CODEX_HOME/hooks.json`` (default ``~/.codex``) or ``<project>/.codex/hooks.json``. Only the
  ``hooks`` key is allowed at the top level (newer builds reject any other), so our entries are recognised by their
  command. Groups are appended at the end of each event's list and an identical entry is left where it is: Codex
  trusts hooks by position and content (0.130+), so moving one would ask for review again. A ``[features] hooks`` or
  ``codex_hooks = false`` line in the user ``config.toml`` is switched to ``true`` and recorded.
- **Gemini CLI**: ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME``) or ``<project>/.gemini/settings.json``, JSON with
  comments; the entries carry ``"name": "loopscope"`` and a timeout in milliseconds. ``hooksConfig.enabled: false``
  in that file is switched to ``true`` and recorded. A file with comments is written back without them, and its
  original text is kept in the record: uninstall restores it byte for byte when nothing else changed meanwhile.

The record (``<config dir>/hook-installs.json``) says, per file, whether install created it, what it switched on and
the original text; uninstall removes our entries and switches, and the file itself if install created it and nothing
else is left in it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from analyzer.hook.install import MARKERS, hook_command, remove_entries
from analyzer.hook.settings import config_dir

CODEX, GEMINI = "codex", "gemini-cli"
EVENTS = {
    CODEX: (("PreToolUse", True), ("PostToolUse", True), ("UserPromptSubmit", False)),
    GEMINI: (("BeforeTool", True), ("AfterTool", True), ("BeforeAgent", False)),
}
TIMEOUT = {CODEX: 10, GEMINI: 10_000}  # Codex: seconds; Gemini: milliseconds
RECORD = "hook-installs.json"
CODEX_LABEL = {"PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use", "UserPromptSubmit": "user_prompt_submit"}


# -- where -------------------------------------------------------------------------------------------------------------
def codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


def gemini_home() -> Path:
    env = os.environ.get("GEMINI_CLI_HOME")
    return (Path(env) if env else Path.home()) / ".gemini"


def hooks_file(agent: str, scope: str, project_dir: Path | None = None) -> Path:
    home, folder, name = (
        (codex_home(), ".codex", "hooks.json") if agent == CODEX else (gemini_home(), ".gemini", "settings.json")
    )
    return home / name if scope == "user" else (project_dir or Path.cwd()) / folder / name


# -- JSON with comments ------------------------------------------------------------------------------------------------
_JSONC = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMA = re.compile(r'"(?:[^"\\]|\\.)*"|,(\s*[}\]])', re.S)


def strip_comments(text: str) -> str:
    """JSONC to JSON: comments and trailing commas out, strings untouched (as Gemini CLI reads settings.json)."""
    text = _JSONC.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
    return _TRAILING_COMMA.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(0), text)


def load(path: Path) -> tuple[dict[str, Any], str | None]:
    """(content, the file's text when it had comments else None); a missing or empty file is ``{}``."""
    if not path.exists():
        return {}, None
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}, None
    plain = strip_comments(text)
    data = json.loads(plain)
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data, (text if plain != text else None)


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".loopscope.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# -- the record of what install did ------------------------------------------------------------------------------------
def record_path() -> Path:
    return config_dir() / RECORD


def read_record() -> dict[str, Any]:
    try:
        data = json.loads(record_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_record(rec: dict[str, Any]) -> None:
    _save(record_path(), rec)


# -- entries -----------------------------------------------------------------------------------------------------------
def is_ours(entry: Any, agent: str) -> bool:
    cmd = entry.get("command") if isinstance(entry, dict) else None
    return isinstance(cmd, str) and any(m in cmd for m in MARKERS) and agent in cmd.split()


def _entry(agent: str, command: str) -> dict[str, Any]:
    if agent == GEMINI:
        return {"name": "loopscope", "type": "command", "command": command, "timeout": TIMEOUT[agent]}
    return {"type": "command", "command": command, "timeout": TIMEOUT[agent]}


def _groups(agent: str, command: str) -> dict[str, dict[str, Any]]:
    return {
        ev: ({"matcher": "*", "hooks": [_entry(agent, command)]} if tool else {"hooks": [_entry(agent, command)]})
        for ev, tool in EVENTS[agent]
    }


def _remove(data: dict[str, Any], agent: str, keep: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Drop ``agent``'s entries of ours (groups and events left empty too), except a group equal to ``keep[event]``."""
    return remove_entries(data, lambda h: is_ours(h, agent), keep)


def install(agent: str, path: Path, command: str) -> dict[str, Any]:
    """Merge our entries into ``path``; returns what changed: removed, added, kept (identical entries left in place),
    switched (flags turned on), created, comments (the file had comments, kept in the record)."""
    data, commented = load(path)
    if "hooks" in data and not isinstance(data["hooks"], dict):
        raise ValueError(f'{path}: "hooks" is not an object')
    created = not path.exists()
    want = _groups(agent, command)
    removed = _remove(data, agent, keep=want)
    hooks = data.setdefault("hooks", {})
    added, kept = [], []
    for event, group in want.items():
        lst = hooks.setdefault(event, [])
        if group in lst:
            kept.append(f"{event}: {command}")
        else:
            lst.append(group)
            added.append(f"{event}: {command}")
    switched: list[dict[str, Any]] = []
    if agent == GEMINI:
        hc = data.get("hooksConfig")
        if isinstance(hc, dict) and hc.get("enabled") is False:
            hc["enabled"] = True
            switched.append({"file": str(path), "what": "hooksConfig.enabled", "from": False, "to": True})
    else:
        switched += _codex_switch_on(codex_home() / "config.toml")
    rec = read_record()
    old = rec.get(str(path), {})
    entry = {
        "agent": agent,
        "created": old.get("created", created),
        "switched": old.get("switched", []) + switched,
        "original": old.get("original", commented),
    }
    _save(path, data)
    rec[str(path)] = entry
    _write_record(rec)
    return {
        "removed": removed,
        "added": added,
        "kept": kept,
        "switched": switched,
        "created": created,
        "comments": commented is not None,
    }


def uninstall(agent: str, path: Path) -> dict[str, Any]:
    """Remove our entries and what install switched on; the file too if install created it and it is now empty. A
    file whose comments install dropped gets its original text back when nothing else changed since."""
    rec = read_record()
    entry = rec.pop(str(path), None) or {}
    out: dict[str, Any] = {"removed": [], "unswitched": [], "deleted": False, "restored": False}
    if path.exists():
        data, _ = load(path)
        out["removed"] = _remove(data, agent)
        for sw in entry.get("switched", []):
            if sw.get("what") == "hooksConfig.enabled" and sw.get("file") == str(path):
                hc = data.get("hooksConfig")
                if isinstance(hc, dict) and hc.get("enabled") is True:
                    hc["enabled"] = False
                    out["unswitched"].append(sw)
        original = entry.get("original")
        if original is not None and _parsed(original) == data:
            path.write_text(original, encoding="utf-8")
            out["restored"] = True
        elif entry.get("created") and not data:
            path.unlink()
            out["deleted"] = True
        elif out["removed"] or out["unswitched"]:
            _save(path, data)
    for sw in entry.get("switched", []):
        if sw.get("what", "").startswith("[features]") and _codex_switch_back(sw):
            out["unswitched"].append(sw)
    if entry:
        _write_record(rec)
    return out


def _parsed(text: str) -> Any:
    try:
        return json.loads(strip_comments(text))
    except ValueError:
        return None


# -- Codex config.toml: the feature flag -------------------------------------------------------------------------------
_TABLE = re.compile(r"^\s*\[([^\]]+)\]\s*(#.*)?$")
_FLAG = re.compile(r"^(\s*)(hooks|codex_hooks)(\s*=\s*)false(\s*(#.*)?)$")


def _codex_switch_on(config: Path) -> list[dict[str, Any]]:
    """Turn ``[features] hooks = false`` / ``codex_hooks = false`` lines of the user config.toml to ``true``."""
    try:
        lines = config.read_text(encoding="utf-8").split("\n")
    except OSError:
        return []
    table, out = None, []
    for i, line in enumerate(lines):
        m = _TABLE.match(line)
        if m:
            table = m.group(1).strip()
            continue
        f = _FLAG.match(line)
        if f and table is not None and (table == "features" or re.fullmatch(r"profiles\.[^.]+\.features", table)):
            new = f"{f.group(1)}{f.group(2)}{f.group(3)}true{f.group(4)}"
            lines[i] = new
            out.append({"file": str(config), "what": f"[{table}] {f.group(2)}", "line": i, "from": line, "to": new})
    if out:
        config.write_text("\n".join(lines), encoding="utf-8")
    return out


def _codex_switch_back(sw: dict[str, Any]) -> bool:
    p = Path(sw["file"])
    try:
        lines = p.read_text(encoding="utf-8").split("\n")
    except OSError:
        return False
    i = sw.get("line")
    if not isinstance(i, int) or i >= len(lines) or lines[i] != sw.get("to"):
        i = next((j for j, ln in enumerate(lines) if ln == sw.get("to")), None)
    if i is None:
        return False
    lines[i] = sw["from"]
    p.write_text("\n".join(lines), encoding="utf-8")
    return True


def _toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


# -- status ------------------------------------------------------------------------------------------------------------
def status(agent: str, project_dir: Path | None = None) -> list[dict[str, Any]]:
    """Per hooks file of ``agent`` (user, project): installed?, our commands, and what the user must still do."""
    out = []
    rec = read_record()
    for scope in ("user", "project"):
        path = hooks_file(agent, scope, project_dir)
        item: dict[str, Any] = {"scope": scope, "file": str(path), "installed": False, "commands": [], "todo": []}
        try:
            data, _ = load(path)
        except (OSError, ValueError) as exc:
            item["todo"].append(f"{path} cannot be read ({exc})")
            out.append(item)
            continue
        positions = []
        for event, groups in (data.get("hooks") or {}).items():
            for gi, g in enumerate(groups if isinstance(groups, list) else []):
                for hi, h in enumerate(g.get("hooks", []) if isinstance(g, dict) else []):
                    if is_ours(h, agent):
                        item["commands"].append(f"{event}: {h['command']}")
                        positions.append((event, gi, hi))
        item["installed"] = bool(positions)
        item["switched"] = rec.get(str(path), {}).get("switched", [])
        if item["installed"]:
            item["todo"] += (
                _codex_todo(path, positions, scope, project_dir) if agent == CODEX else _gemini_todo(data, project_dir)
            )
        out.append(item)
    return out


def _codex_todo(path: Path, positions: list[tuple[str, int, int]], scope: str, project_dir: Path | None) -> list[str]:
    todo = []
    cfg = _toml(codex_home() / "config.toml")
    feats = [cfg.get("features") or {}] + [
        (p or {}).get("features") or {} for p in (cfg.get("profiles") or {}).values() if isinstance(p, dict)
    ]
    req = _toml(Path("/etc/codex/requirements.toml")).get("features") or {}
    for f in feats + [req]:
        for key in ("hooks", "codex_hooks"):
            if f.get(key) is False:
                todo.append(f"[features] {key} = false: Codex runs no hooks; set it to true (or remove it)")
    state = (cfg.get("hooks") or {}).get("state") or {}
    untrusted = []
    for event, gi, hi in positions:
        key = f"{path}:{CODEX_LABEL.get(event, event)}:{gi}:{hi}"
        s = state.get(key) if isinstance(state, dict) else None
        if not isinstance(s, dict) or not s.get("trusted_hash"):
            untrusted.append(event)
        elif s.get("enabled") is False:
            todo.append(f"{event}: disabled in /hooks (hooks.state enabled = false)")
    if untrusted:
        todo.append(
            "Codex (0.130+) asks you to review and trust new hooks: run `codex`, accept 'Hooks need review' (or open "
            "/hooks) and trust the loopscope entries (" + ", ".join(untrusted) + "); `codex exec` skips untrusted "
            "hooks unless run with --dangerously-bypass-hook-trust. Trust cannot be verified here beyond its record."
        )
    if scope == "project":
        root = str((project_dir or Path.cwd()).resolve())
        proj = (cfg.get("projects") or {}).get(root) or {}
        if proj.get("trust_level") != "trusted":
            cfg_file = codex_home() / "config.toml"
            todo.append(f"the project {root} is not trusted in {cfg_file}: its .codex/ hooks do not load")
    version = _version("codex")
    if version is not None and version < (0, 124):
        todo.append(f"codex {'.'.join(map(str, version))}: tool hooks need 0.124+ (or [features] codex_hooks = true)")
    return todo


def _gemini_todo(data: dict[str, Any], project_dir: Path | None) -> list[str]:
    todo = []
    layers = [data]
    try:
        layers.append(load(gemini_home() / "settings.json")[0])
    except (OSError, ValueError):
        pass
    for d in layers:
        hc = d.get("hooksConfig") if isinstance(d.get("hooksConfig"), dict) else {}
        if hc.get("enabled") is False:
            todo.append("hooksConfig.enabled is false: Gemini CLI runs no hooks")
        if "loopscope" in (hc.get("disabled") or []):
            todo.append("hooksConfig.disabled lists loopscope (/hooks enable loopscope)")
    version = _version("gemini")
    if version is not None and version < (0, 26):
        todo.append(
            f"gemini {'.'.join(map(str, version))}: hooks are off by default before 0.26 (0.24-0.25: "
            '"hooks": {"enabled": true}; up to 0.23: "tools": {"enableHooks": true})'
        )
    folder = str((project_dir or Path.cwd()).resolve())
    trusted = _gemini_trusted(folder)
    if trusted is False:
        todo.append(
            f"{folder} is not a trusted folder: Gemini CLI runs settings hooks only in trusted folders (trust it "
            "in the first-run dialog or /permissions)"
        )
    return todo


def _gemini_trusted(folder: str) -> bool | None:
    try:
        data = json.loads(strip_comments((gemini_home() / "trustedFolders.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    best, verdict = -1, None
    for p, level in data.items():
        if folder == p or folder.startswith(p.rstrip("/") + "/") or (level == "TRUST_PARENT" and folder.startswith(p)):
            if len(p) > best:
                best, verdict = len(p), level in ("TRUST_FOLDER", "TRUST_PARENT")
    return verdict if verdict is not None else False


def _version(exe: str) -> tuple[int, ...] | None:
    path = shutil.which(exe)
    if path is None:
        return None
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", r.stdout + r.stderr)
    return tuple(int(x) for x in m.groups()) if m else None


def command_for(agent: str, extra: list[str] | None = None) -> str:
    """The command the agent runs: ``hook_command`` with the agent's name in place of claude-code."""
    return hook_command(extra, agent)
