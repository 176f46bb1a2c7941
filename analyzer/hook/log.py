"""The hook's log: one JSON line per denial and per failure (the hook failed open), which ``loopscope hook status``
summarises. ``<cache dir>/hook-log.jsonl`` (beside the session states); past ``MAX_BYTES`` it is rotated once to
``hook-log.jsonl.1``. Each line is written with one ``O_APPEND`` write, so parallel hook processes never interleave
their lines; writing never raises (a log that cannot be written loses the line, not the call)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from analyzer.hook.state import cache_dir

FILE_NAME = "hook-log.jsonl"
MAX_BYTES = 1 << 20
LINE_CAP = 2000  # characters of a reason kept


def log_path() -> Path:
    return cache_dir() / FILE_NAME


def append(kind: str, agent: str, **fields: Any) -> None:
    """Append one line: ``kind`` is ``deny`` or ``error``."""
    try:
        rec = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kind": kind, "agent": agent}
        rec.update({k: (v[:LINE_CAP] if isinstance(v, str) else v) for k, v in fields.items()})
        p = log_path()
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            if p.stat().st_size > MAX_BYTES:
                os.replace(p, p.with_name(FILE_NAME + ".1"))
        except OSError:
            pass
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, orjson.dumps(rec) + b"\n")
        finally:
            os.close(fd)
    except Exception:
        pass


def read(path: Path | None = None) -> list[dict[str, Any]]:
    """The log's records (the rotated file's first), skipping lines that do not parse."""
    p = path or log_path()
    out: list[dict[str, Any]] = []
    for f in (p.with_name(p.name + ".1"), p):
        try:
            data = f.read_bytes()
        except OSError:
            continue
        for line in data.splitlines():
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def summary(agent: str, records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Denials and failures of one agent: counts, sessions, the last time and the most frequent denied tools."""
    recs = [r for r in (read() if records is None else records) if r.get("agent") == agent]
    denies = [r for r in recs if r.get("kind") == "deny"]
    errors = [r for r in recs if r.get("kind") == "error"]
    return {
        "denials": len(denies),
        "sessions": len({r.get("session") for r in denies}),
        "last_denial": denies[-1].get("at") if denies else None,
        "last_reason": denies[-1].get("reason") if denies else None,
        "tools": Counter(str(r.get("tool")) for r in denies).most_common(3),
        "errors": len(errors),
        "last_error": errors[-1].get("error") if errors else None,
    }
