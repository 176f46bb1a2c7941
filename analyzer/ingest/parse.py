"""Parse one file: detect its format from content, run its adapter, and account for everything that went wrong.

This runs inside worker processes; it writes rows to Parquet through a ``RowSink`` and returns a ``FileOutcome``
(small, picklable) that the main process records in ``files`` and ``ingest_errors``.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import orjson

from analyzer.ingest import formats
from analyzer.ingest.base import LOCAL, FileContext, Files, SniffsDocuments, SniffsFiles, SniffsRecords
from analyzer.ingest.reader import BOM, ReadStats, iter_records
from analyzer.ingest.rows import MAX_ERRORS_PER_FILE, RowSink, display_path, excerpt

ADAPTERS: dict[str, ModuleType] = formats.adapters()
SNIFF_ORDER = formats.with_hook(SniffsRecords)  # JSON-lines formats, strict shapes first
# A file that holds one JSON value is offered to the document formats first, since a document can look like one
# line record of another format.
DOCUMENT_ORDER = formats.with_hook(SniffsDocuments)
FILE_ORDER = formats.with_hook(SniffsFiles)  # formats whose adapter reads the file itself
SNIFF_RECORDS = 64
HEAD_BYTES = 65536  # what is read first to tell a file's kind
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
    status: str = "ingested"  # or "skipped" (``pipeline.companion_outcome`` writes "companion" rows)
    format: str | None = None
    reason: str | None = None
    content_hash: str | None = None
    sessions: int = 0
    calls: int = 0
    error_count: int = 0
    errors: list[tuple[int | None, str, str]] = field(default_factory=list)
    full_results: bool = False  # results stored whole (``RowSink.full_results``)

    def add_error(self, line: int | None, reason: str, text: str | bytes) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS_PER_FILE:
            self.errors.append((line, reason, excerpt(text)))


def detect_format(rec: Any) -> ModuleType | None:
    return _first(SNIFF_ORDER, "sniff", rec)


def detect_document(doc: Any) -> ModuleType | None:
    return _first(DOCUMENT_ORDER, "sniff_document", doc)


def _first(order: tuple[ModuleType, ...], hook: str, *args: Any) -> ModuleType | None:
    for mod in order:
        try:
            if getattr(mod, hook)(*args):
                return mod
        except Exception:  # noqa: BLE001 - a sniffer must never sink a file
            continue
    return None


def _read_with_another_file(doc: Any) -> bool:
    """An opencode message or part record: its session file's adapter reads it (``opencode.py``)."""
    return isinstance(doc, dict) and (
        (str(doc.get("id", "")).startswith("msg_") and "sessionID" in doc)
        or (str(doc.get("id", "")).startswith("prt_") and "messageID" in doc)
    )


def describe_document(doc: Any) -> str:
    """Name the single-JSON-document formats loopscope knows of but does not ingest yet."""
    if isinstance(doc, dict):
        if "agentType" in doc or "toolUseId" in doc:
            return "Claude Code subagent metadata (agent-*.meta.json): nothing to load, its transcript is read"
        if _read_with_another_file(doc):
            kind = "message" if str(doc.get("id")).startswith("msg_") else "part"
            return f"opencode {kind} record: read with its session (storage/session/…/ses_*.json)"
        if "trajectory" in doc or ("history" in doc and ("info" in doc or "environment" in doc)):
            return "a SWE-agent trajectory; this format is not supported yet"
        keys = ", ".join(sorted(map(str, doc))[:8])
        return f"a single JSON document of no known transcript format (keys: {keys})"
    if isinstance(doc, list):
        if doc and isinstance(doc[0], dict) and ("action" in doc[0] or "observation" in doc[0]):
            return "an OpenHands event list; this format is not supported yet"
        return "a JSON array of no known transcript format"
    return "JSON of no known transcript format"


def _load_document(path: str, size: int, files: Files = LOCAL) -> tuple[bool, Any]:
    """(True, value) when the whole file is one JSON value that fits the document limit."""
    if size > WHOLE_DOC_LIMIT:
        return False, None
    try:
        with files.open(path) as f:
            data = f.read()
        return True, orjson.loads(data[len(BOM) :] if data.startswith(BOM) else data)
    except (OSError, orjson.JSONDecodeError):
        return False, None


def parse_file(
    task: FileTask, sink: RowSink, progress: Callable[[int], None] | None = None, files: Files = LOCAL
) -> FileOutcome:
    """One file (read through ``files``: the local disk, or the bytes a Spark task was handed) -> its rows in
    ``sink`` and its outcome."""
    out = FileOutcome(task.file_id, display_path(task.path), task.size, task.mtime_ns)
    path = Path(task.path)
    stats = ReadStats()
    try:
        f = open(path, "rb") if files is LOCAL else files.open(task.path)
    except OSError as exc:
        out.status, out.reason = "skipped", f"cannot open: {exc.strerror or exc}"
        return out
    with f:
        head = f.read(HEAD_BYTES)
        more = len(head) == HEAD_BYTES  # the file goes on past its head
        f.seek(0)
        if head.startswith(BOM):
            head = head[len(BOM) :]
        if not head.strip():
            out.status, out.reason = "skipped", "empty file"
            out.size = len(head)
            return out
        early_errors: list[tuple[int | None, str, str | bytes]] = []
        parser = None
        ctx: FileContext | None = None
        file_mod = _first(FILE_ORDER, "sniff_file", path, head, files)
        if file_mod is not None:
            return _run_whole(out, file_mod, path, task, sink, f, stats, progress, lambda p: p.read(path), files)
        if b"\x00" in head:
            out.status, out.reason = (
                "skipped",
                (
                    "a Parquet file with no column of chat messages"
                    if head[:4] == b"PAR1"
                    else "binary file (NUL bytes)"
                ),
            )
            return out
        if head.lstrip()[:1] in (b"{", b"["):
            ok, doc = (
                _load_document(task.path, task.size, files)
                if DOCUMENT_ORDER and _single_value(head, more, f)
                else (False, None)
            )
            doc_mod = detect_document(doc) if ok else None
            if doc_mod is not None:
                return _run_whole(out, doc_mod, path, task, sink, f, stats, progress, lambda p: p.feed(doc, 1), files)
            if ok and _read_with_another_file(doc):
                out.status, out.reason = "skipped", describe_document(doc)
                return out

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
                reason = formats.describe_file(path)
                if (
                    reason is None
                    and first in (b"{", b"[")
                    and (early_errors or (buffered and not isinstance(buffered[0][1], dict)))
                ):
                    ok, doc = _load_document(task.path, task.size, files)
                    reason = describe_document(doc) if ok else None
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
            ctx = FileContext(path, task.file_id, sink, on_error, files)
            parser = mod.Parser(ctx)
            calls_before = sink.counts["calls"]
            for line, reason, text in early_errors:
                out.add_error(line, reason, text)
            for line, rec in buffered:
                _feed(parser, rec, line, out)
            feed = parser.feed
            for line, rec in records:  # ``_feed`` inline: one Python call less for each of the file's records
                try:
                    feed(rec, line)
                except Exception as exc:  # noqa: BLE001 - one bad record costs one record
                    _record_error(exc, rec, line, out)
            out.sessions = parser.close()
            out.calls = sink.counts["calls"] - calls_before
        except Exception as exc:  # noqa: BLE001 - an adapter bug must not lose the rest of the corpus
            out.add_error(
                None,
                f"internal error while reading ({type(exc).__name__}: {exc}); rows up to here kept",
                "".join(traceback.format_exception_only(type(exc), exc)),
            )
            if parser is not None:
                try:
                    out.sessions = parser.close()
                except Exception:  # noqa: BLE001
                    pass
            if isinstance(exc, OSError):  # the disk failed mid-file: what was read is kept, and it is read again
                out.status, out.reason = "skipped", f"cannot read: {exc.strerror or exc} (rows up to here kept)"
                out.content_hash = None
                return out
            _drain_hash(f, stats, progress)
    out.size = stats.bytes_read
    out.content_hash = stats.content_hash
    return out


def _feed(parser: Any, rec: Any, line: int, out: FileOutcome) -> None:
    """One record into the adapter. A record the adapter chokes on (nested too deep for it, a number no column
    holds) costs that record, reported with its line; the records after it are read."""
    try:
        parser.feed(rec, line)
    except Exception as exc:  # noqa: BLE001 - one bad record costs one record
        _record_error(exc, rec, line, out)


def _record_error(exc: Exception, rec: Any, line: int, out: FileOutcome) -> None:
    out.add_error(
        line, f"record could not be read ({type(exc).__name__}: {_first_line(exc)}); skipped", _safe_excerpt(rec)
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


def _safe_excerpt(rec: Any) -> str:
    try:
        return orjson.dumps(rec, option=orjson.OPT_NON_STR_KEYS).decode()
    except Exception:  # noqa: BLE001 - an excerpt is best effort (too deep, a huge int)
        return f"<{type(rec).__name__} that cannot be shown>"


def _single_value(head: bytes, more: bool, f: BinaryIO) -> bool:
    """Whether the file looks like one JSON document rather than JSON lines: it starts with an array, or its first
    line is not a complete value (pretty-printed), or it has only one line. A first line longer than the head (a
    JSON-lines file of whole conversations, one per line) is read on to its end from ``f``, so such a file is not
    read whole, and decoded whole, only to learn it is not one document."""
    body = head.lstrip()
    if body[:1] == b"[":
        return True
    first, nl, rest = body.partition(b"\n")
    if not nl:
        if not more:
            return True  # the whole file is one line
        f.seek(0)
        first = f.readline().removeprefix(BOM)
        rest = f.read(HEAD_BYTES)
        f.seek(0)
        if not first.endswith(b"\n"):
            return True
    if not rest.strip():
        return True
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return True
    return False


def _run_whole(
    out: FileOutcome,
    mod: ModuleType,
    path: Path,
    task: FileTask,
    sink: RowSink,
    f: Any,
    stats: ReadStats,
    progress: Callable[[int], None] | None,
    run: Callable[[Any], None],
    files: Files = LOCAL,
) -> FileOutcome:
    """Run a document or file adapter over the whole file, then hash the bytes for change detection."""
    out.format = mod.FORMAT
    ctx = FileContext(path, task.file_id, sink, out.add_error, files)
    calls_before = sink.counts["calls"]
    parser = None
    try:
        parser = mod.Parser(ctx)
        run(parser)
        out.sessions = parser.close()
    except Exception as exc:  # noqa: BLE001 - an adapter bug must not lose the rest of the corpus
        out.add_error(
            None,
            f"internal error while reading ({type(exc).__name__}: {exc}); rows up to here kept",
            "".join(traceback.format_exception_only(type(exc), exc)),
        )
        if parser is not None:
            try:
                out.sessions = parser.close()
            except Exception:  # noqa: BLE001
                pass
    out.calls = sink.counts["calls"] - calls_before
    f.seek(0)
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
