"""The adapter contract. One module per format provides ``FORMAT``, ``sniff(record)`` and a ``Parser``.

A parser is fed the file's JSON values in order (``feed``), writes sessions, turns and calls through
``SessionBuilder``s, and reports records it cannot use through ``ctx.error``; ``close`` finishes every session.
Adapters know formats and nothing about loops or DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import orjson

from analyzer.ingest.rows import RowSink, SessionBuilder, display_path, excerpt


@dataclass
class FileContext:
    path: Path
    file_id: int
    sink: RowSink
    on_error: Callable[[int | None, str, "str | bytes"], None]

    def builder(self, format: str, session_id: str, **kw: Any) -> SessionBuilder:
        kw.setdefault("on_error", self.error)
        return SessionBuilder(self.sink, self.file_id, display_path(str(self.path)), format, session_id, **kw)

    def error(self, line: int | None, reason: str, record: Any = "") -> None:
        if not isinstance(record, (str, bytes)):
            try:
                import orjson

                record = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
            except Exception:  # noqa: BLE001 - an excerpt is best effort
                record = repr(record)
        self.on_error(line, reason, excerpt(record))

    def optional_object(self, line: int | None, doc: dict[str, Any], key: str) -> dict[str, Any]:
        """``doc[key]`` when it is an object; ``{}`` when absent or null. Anything else is recorded as a bad value and
        read as absent, so one odd field never costs the session."""
        value = doc.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(line, f"`{key}` is not an object", value)
            return {}
        return value


class Parser(Protocol):
    def __init__(self, ctx: FileContext) -> None: ...

    def feed(self, record: Any, line: int) -> None: ...

    def close(self) -> int:
        """Finish every session; return how many sessions were written."""
        ...


def text_of(content: Any, types: tuple[str, ...] = ("text", "input_text", "output_text")) -> str:
    """Visible text of a message ``content``: a string, a list of typed parts, a dict, or null."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if content.get("type") in types or "text" in content:
            t = content.get("text")
            return t if isinstance(t, str) else ""
        return ""
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and (part.get("type") in types or ("type" not in part and "text" in part)):
                t = part.get("text")
                if isinstance(t, str):
                    out.append(t)
        return "\n".join(out)
    return ""


_MAX_DECODE = 8  # double-encoded arguments: never loop forever on pathological input


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as a JSON value: parsed while it is a string holding JSON (double encoding happens);
    text that is not JSON is kept as ``{"raw": text}`` so the call still has a key."""
    value = raw
    for _ in range(_MAX_DECODE):
        if not isinstance(value, str):
            return {} if value is None else value
        text = value.strip()
        if not text:
            return {}
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return {"raw": value}
    return {"raw": value} if isinstance(value, str) else value


def run_session_id(path: Path, instance: str | None = None) -> str:
    """``<run>/<instance>`` for the benchmark formats (SWE-agent, mini-swe-agent) that name a file after its task
    instance: the same instance is run again by every run (another model, another config), so the instance id alone
    would collide across runs. ``<run>`` is the nearest folder not named after the instance and not ``trajs``
    (mini-swe-agent writes ``<run>/trajs/<instance>/<instance>.traj.json``; SWE-agent ``<run>/<instance>.traj``)."""
    stem = path.name
    for suffix in (".json", ".traj"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    inst = instance or stem or path.name
    for parent in path.resolve().parents:
        if parent.name and parent.name not in (inst, stem, "trajs"):
            return f"{parent.name}/{inst}"
    return inst
