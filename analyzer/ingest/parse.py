"""Parse one file: detect its format from content, run its adapter, and account for everything that went wrong.

This runs inside worker processes; it writes rows to Parquet through a ``RowSink`` and returns a ``FileOutcome``
(small, picklable) that the main process records in ``files`` and ``ingest_errors``.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import orjson

from . import claude, codex, openai_messages, pi
from .base import FileContext
from .reader import ReadStats, iter_records
from .rows import MAX_ERRORS_PER_FILE, RowSink, excerpt

ADAPTERS: dict[str, ModuleType] = {m.FORMAT: m for m in (pi, claude, codex, openai_messages)}
# Codex and Claude records carry unmistakable keys; pi's are looser, so it is tried after them.
SNIFF_ORDER: tuple[ModuleType, ...] = (codex, claude, pi, openai_messages)
SNIFF_RECORDS = 64
WHOLE_DOC_LIMIT = 256 << 20


@dataclass
class FileTask:
    file_id: int
    path: str
    size: int
    mtime_ns: int


@dataclass
class FileOutcome:
    file_id: int
    path: str
    size: int
    mtime_ns: int
    status: str = "ingested"  # or "skipped"
    format: str | None = None
    reason: str | None = None
    content_hash: str | None = None
    sessions: int = 0
    calls: int = 0
    error_count: int = 0
    errors: list[tuple[int | None, str, str]] = field(default_factory=list)

    def add_error(self, line: int | None, reason: str, text: str | bytes) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS_PER_FILE:
            self.errors.append((line, reason, excerpt(text)))


def detect_format(rec: Any) -> ModuleType | None:
    for mod in SNIFF_ORDER:
        try:
            if mod.sniff(rec):
                return mod
        except Exception:  # noqa: BLE001 - a sniffer must never sink a file
            continue
    return None


def describe_document(doc: Any) -> str:
    """Name the single-JSON-document formats loopscope knows of but does not ingest yet."""
    if isinstance(doc, dict):
        if "agentType" in doc or "toolUseId" in doc:
            return "Claude Code subagent metadata (agent-*.meta.json): nothing to load, its transcript is read"
        if "projectHash" in doc and "messages" in doc:
            return "a Gemini CLI session (single JSON document); this format is not supported yet"
        if "trajectory" in doc or ("history" in doc and ("info" in doc or "environment" in doc)):
            return "a SWE-agent trajectory; this format is not supported yet"
        if "eval" in doc and "samples" in doc:
            return "an Inspect AI eval log; this format is not supported yet"
        if "info" in doc and "messages" in doc:
            return "an opencode export; this format is not supported yet"
        keys = ", ".join(sorted(map(str, doc))[:8])
        return f"a single JSON document of no known transcript format (keys: {keys})"
    if isinstance(doc, list):
        if doc and isinstance(doc[0], dict) and ("action" in doc[0] or "observation" in doc[0]):
            return "an OpenHands event list; this format is not supported yet"
        return "a JSON array of no known transcript format"
    return "JSON of no known transcript format"


def _whole_document(path: str, size: int) -> str | None:
    if size > WHOLE_DOC_LIMIT:
        return None
    try:
        with open(path, "rb") as f:
            doc = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return describe_document(doc)


def parse_file(task: FileTask, sink: RowSink, progress: Callable[[int], None] | None = None) -> FileOutcome:
    out = FileOutcome(task.file_id, task.path, task.size, task.mtime_ns)
    path = Path(task.path)
    stats = ReadStats()
    try:
        f = open(path, "rb")
    except OSError as exc:
        out.status, out.reason = "skipped", f"cannot open: {exc.strerror or exc}"
        return out
    with f:
        head = f.read(65536)
        f.seek(0)
        if not head.strip():
            out.status, out.reason = "skipped", "empty file"
            out.size = len(head)
            return out
        if b"\x00" in head:
            out.status, out.reason = "skipped", "binary file (NUL bytes)"
            return out
        early_errors: list[tuple[int | None, str, str | bytes]] = []
        parser = None
        ctx: FileContext | None = None

        def on_error(line: int | None, reason: str, text: str | bytes) -> None:
            if parser is None:
                early_errors.append((line, reason, text))
            else:
                out.add_error(line, reason, text)

        records = iter_records(f, stats, on_error, progress)
        buffered: list[tuple[int, Any]] = []
        mod = None
        try:
            for line, rec in records:
                buffered.append((line, rec))
                mod = detect_format(rec)
                if mod is not None or len(buffered) >= SNIFF_RECORDS:
                    break
            if mod is None:
                first = head.lstrip()[:1]
                reason = None
                if first in (b"{", b"[") and (early_errors or (buffered and not isinstance(buffered[0][1], dict))):
                    reason = _whole_document(task.path, task.size)
                if reason is None:
                    if buffered and isinstance(buffered[0][1], dict):
                        keys = ", ".join(sorted(map(str, buffered[0][1]))[:8])
                        reason = f"unknown format: no record looks like a supported transcript (first keys: {keys})"
                    elif buffered:
                        reason = "unknown format: JSON values that are not objects"
                    else:
                        reason = "no JSON could be read from the file"
                out.status, out.reason = "skipped", reason
                _drain_hash(f, stats, progress)
                return out
            out.format = mod.FORMAT
            ctx = FileContext(path, task.file_id, sink, on_error)
            parser = mod.Parser(ctx)
            calls_before = sink.counts["calls"]
            for line, reason, text in early_errors:
                out.add_error(line, reason, text)
            for line, rec in buffered:
                parser.feed(rec, line)
            for line, rec in records:
                parser.feed(rec, line)
            out.sessions = parser.close()
            out.calls = sink.counts["calls"] - calls_before
        except Exception as exc:  # noqa: BLE001 - an adapter bug must not lose the rest of the corpus
            out.add_error(None, f"internal error while reading ({type(exc).__name__}: {exc}); rows up to here kept",
                          "".join(traceback.format_exception_only(type(exc), exc)))
            if parser is not None:
                try:
                    out.sessions = parser.close()
                except Exception:  # noqa: BLE001
                    pass
            _drain_hash(f, stats, progress)
    out.size = stats.bytes_read
    out.content_hash = stats.content_hash
    return out


def _drain_hash(f: Any, stats: ReadStats, progress: Callable[[int], None] | None) -> None:
    """Finish hashing a file we stopped reading, so an unchanged skipped file is not re-read next time."""
    f.seek(stats.bytes_read)
    while block := f.read(4 << 20):
        stats.hasher.update(block)
        stats.bytes_read += len(block)
        if progress is not None:
            progress(len(block))
