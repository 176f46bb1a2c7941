"""The guard's settings file: which policy the hook runs and with what settings (``calibrate --write-settings``
writes it from the recommendation for the user's own history).

``$LOOPSCOPE_CONFIG_DIR/hook-settings.json`` (default ``$XDG_CONFIG_HOME/loopscope``, else ``~/.config/loopscope``)::

    {"policy": "loopscope", "settings": {"warn": 3, "halt": 6},
     "source": "loopscope calibrate (target false-halt rate 1.00%, 412 sessions)", "written_at": "2026-12-01T02:00:00Z",
     "agents": {"codex": {"policy": "loopscope", "settings": {"warn": 3, "halt": 5}, "source": "...",
                          "written_at": "..."},
                "gemini-cli": {...}}}

A section per agent (``agents``; ``calibrate --agent A --write-settings`` writes A's, calibrated on A's sessions)
chooses that agent's guard; an agent without a section uses the top level (what ``--write-settings`` without
``--agent`` writes, and all a file from before the sections has). Without the file the hook runs the ``loopscope``
preset with its defaults (warn 3, halt 5).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.errors import UsageError
from analyzer.guards.policies import Policy, resolve

DEFAULT_POLICY = "loopscope"
FILE_NAME = "hook-settings.json"


def config_dir() -> Path:
    env = os.environ.get("LOOPSCOPE_CONFIG_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "loopscope"


def settings_path() -> Path:
    return config_dir() / FILE_NAME


def read_settings(path: Path | None = None) -> dict[str, Any] | None:
    """The settings file's content; None when there is none. A file that is not a JSON object is an error."""
    p = path or settings_path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the hook settings {p}: {exc}") from None
    agents = data.get("agents", {}) if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or not _valid_section(data)
        or not isinstance(agents, dict)
        or not all(isinstance(v, dict) and _valid_section(v) for v in agents.values())
    ):
        raise UsageError(f'{p}: expected {{"policy": NAME, "settings": {{...}}, "agents": {{AGENT: {{...}}}}}}')
    return data


def _valid_section(d: dict[str, Any]) -> bool:
    return isinstance(d.get("policy", DEFAULT_POLICY), str) and isinstance(d.get("settings", {}), dict)


def section(data: dict[str, Any] | None, agent: str | None) -> dict[str, Any] | None:
    """The part of the settings file that applies to ``agent``: its own section, else the top level."""
    if not data:
        return None
    own = (data.get("agents") or {}).get(agent) if agent else None
    return own if own else data


def write_settings(
    policy: str, settings: Mapping[str, Any], source: str, path: Path | None = None, agent: str | None = None
) -> Path:
    """Write the top level, or ``agent``'s section (the rest of the file is kept), atomically; returns the path."""
    p = path or settings_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    part = {
        "policy": policy,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
        "source": source,
        "written_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    try:
        data = read_settings(p) or {}
    except UsageError:  # a broken file is replaced, as before the sections
        data = {}
    if agent is None:
        data = {**part, **({"agents": data["agents"]} if data.get("agents") else {})}
    else:
        data.setdefault("agents", {})[agent] = part
    tmp = p.with_name(p.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p


def hook_policy(
    name: str | None = None,
    path: Path | None = None,
    overrides: Mapping[str, str] | None = None,
    agent: str | None = None,
) -> Policy:
    """The policy the hook runs: ``name`` (a preset; default: the settings file's, else ``loopscope``) with the
    settings file's values when the file names that same policy, then ``overrides`` (``--set`` strings). ``agent``:
    that agent's section of the file, else its top level."""
    data = section(read_settings(path), agent)
    file_policy = (data or {}).get("policy", DEFAULT_POLICY)
    chosen = name or file_policy
    pol = resolve([chosen])[0]
    if data and data.get("settings") and pol.name == resolve([file_policy])[0].name:
        pol = pol.with_settings(data["settings"], name=pol.name, where=str(path or settings_path()))
    if overrides:
        pol = pol.with_settings(overrides, where="--set", from_text=True)
    return pol
