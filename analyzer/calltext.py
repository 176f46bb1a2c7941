"""A tool call as one short line a person reads: ``Bash: pytest tests/test_session.py -q``. Used by the CLI listings
and the report (through ``reports/data.py``), so both name a loop the same way. Tool names that differ only by
an agent's convention (``Bash``/``bash``, ``Read``/``read``) share one ``tool_group``."""

from __future__ import annotations

from typing import Any

import orjson

# The argument that says what a call did, by the names agents give it, most telling first.
_KEYS = ("command", "cmd", "pattern", "query", "file_path", "path", "url", "code", "input", "prompt", "description")


def _flat(v: Any) -> str:
    if isinstance(v, list):
        # Codex: ["bash", "-lc", "the command"]: the command is the last string.
        strs = [x for x in v if isinstance(x, str)]
        if len(strs) >= 3 and strs[1] in ("-c", "-lc"):
            return strs[-1]
        return " ".join(map(str, v))
    return v if isinstance(v, str) else orjson.dumps(v).decode()


def call_text(tool: str | None, args: str | None, width: int = 60) -> str:
    """``tool: the telling argument``, cut to ``width`` characters, on one line."""
    name = tool or "?"
    value = ""
    if args:
        try:
            obj = orjson.loads(args)
        except orjson.JSONDecodeError:
            obj = args
        if isinstance(obj, dict):
            key = next((k for k in _KEYS if obj.get(k) not in (None, "", [])), None)
            if key is None:
                key = next((k for k, v in obj.items() if isinstance(v, str) and v), None)
            value = _flat(obj[key]) if key is not None else (orjson.dumps(obj).decode() if obj else "")
        else:
            value = _flat(obj)
    value = " ".join(value.split())
    if tool is None:  # the argument alone, for a place that names the tool already
        text = value
    else:
        text = f"{name}: {value}" if value else name
    return text if len(text) <= width else text[: width - 1] + "…"


def loop_text(tools: list[str | None], args: list[str | None], repeats: int | None, width: int = 60) -> str:
    """A loop's repeated call (or block of calls, for a cycle) with its repeat count: ``Bash: pytest -q ×4``."""
    suffix = f" ×{repeats}" if repeats else ""
    room = width - len(suffix)
    parts = [call_text(t, a, max(16, room // max(1, len(tools)) - 3)) for t, a in zip(tools, args)]
    body = " → ".join(parts) if parts else "repeated text"
    if len(body) > room:
        body = body[: room - 1] + "…"
    return body + suffix


def tool_group(tool: str | None) -> str:
    """The name ``Bash`` and ``bash`` share."""
    return (tool or "?").strip().lower()
