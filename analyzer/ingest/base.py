"""The format contract, written once: what a module of ``analyzer/ingest/formats/`` provides (``Format``, at least
one of the recognition protocols, optionally the discovery hooks) and what its parser does (``RecordParser``,
``FileParser``); plus what adapters share (``FileContext``, ``text_of``, ``parse_arguments``, ``run_session_id``).

A format is a module, not a class: the registry (``analyzer.ingest.formats``) finds it by listing the folder and checks
it against these protocols once, when it first lists the formats; the hot path (a parser's ``feed``, called once per
record) is plain attribute calls. Adapters know formats and nothing about loops or DuckDB. What each format looks like
on disk: docs/formats.md.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

import orjson

from analyzer.ingest.rows import RowSink, SessionBuilder, display_path, excerpt


class Files(Protocol):
    """Where a file and the files beside it are read from: the local disk (``LOCAL``), or bytes already in memory
    (``MemoryFiles``: what a Spark task is handed). Parsers and sniffers read through it, never ``open`` a path
    themselves, so one adapter reads a local folder and a bucket's bytes alike. Paths are strings as listed."""

    def open(self, path: str, /) -> BinaryIO:
        """The file's bytes (``OSError`` when it cannot be read)."""
        ...

    def stat(self, path: str, /) -> tuple[int, int] | None:
        """(size, mtime in ns) of the file, or None when there is none."""
        ...

    def names(self, folder: str, /) -> list[str]:
        """The names of the regular files in ``folder``, sorted (empty when it holds none or does not exist)."""
        ...

    def local(self, path: str, /) -> str | None:
        """A local path to the file when it has one (sqlite opens it in place), else None."""
        ...


class LocalFiles:
    """The local disk: what ``loopscope ingest`` reads."""

    def open(self, path: str) -> BinaryIO:
        return open(path, "rb")

    def stat(self, path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def names(self, folder: str) -> list[str]:
        try:
            with os.scandir(folder) as it:
                return sorted(e.name for e in it if e.is_file())
        except OSError:
            return []

    def local(self, path: str) -> str | None:
        return path


LOCAL = LocalFiles()


class MemoryFiles:
    """Files held in memory: ``data`` path -> bytes, for the files a parser may read; ``listing`` path -> (size,
    mtime_ns) for every file it may ask about (a superset of ``data``'s: a listing without the bytes)."""

    def __init__(self, data: Mapping[str, bytes], listing: Mapping[str, tuple[int, int]] | None = None) -> None:
        self.data = data
        self.listing = dict(listing) if listing is not None else {p: (len(b), 0) for p, b in data.items()}
        self._folders: dict[str, list[str]] = {}
        for p in sorted(self.listing):
            folder, _, name = p.rpartition("/")
            self._folders.setdefault(folder, []).append(name)

    def open(self, path: str) -> BinaryIO:
        try:
            return io.BytesIO(self.data[path])
        except KeyError:
            raise FileNotFoundError(2, "not among the files handed to this task", path) from None

    def stat(self, path: str) -> tuple[int, int] | None:
        return self.listing.get(path)

    def names(self, folder: str) -> list[str]:
        return self._folders.get(str(folder).rstrip("/"), [])

    def local(self, path: str) -> str | None:
        return None


@dataclass
class FileContext:
    path: Path
    file_id: int
    sink: RowSink
    on_error: Callable[[int | None, str, str | bytes], None]
    files: Files = field(default=LOCAL)  # where the file and its companions are read from

    def builder(self, format: str, session_id: str, **kw: Any) -> SessionBuilder:
        kw.setdefault("on_error", self.error)
        return SessionBuilder(self.sink, self.file_id, display_path(str(self.path)), format, session_id, **kw)

    def error(self, line: int | None, reason: str, record: Any = "") -> None:
        if not isinstance(record, (str, bytes)):
            try:
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


@runtime_checkable
class RecordParser(Protocol):
    """Reads one file. Built with the file's ``FileContext`` (``Format.Parser(ctx)``), fed the file's JSON values in
    order, it writes sessions, turns and calls through ``ctx.builder`` and reports a record it cannot use through
    ``ctx.error`` (one bad record costs that record, never the file)."""

    def feed(self, record: Any, line: int, /) -> None:
        """One JSON value of the file and its 1-based line (a document format gets the whole document, as line 1)."""
        ...

    def close(self) -> int:
        """Finish every session; return how many sessions were written."""
        ...


@runtime_checkable
class FileParser(RecordParser, Protocol):
    """The parser of a format that reads its files itself (``SniffsFiles``): a zip, a database, a folder of events."""

    def read(self, path: Path, /) -> None:
        """Read the whole file (and the companion files it stands for) through ``ctx.files``, then ``close`` is
        called."""
        ...


@runtime_checkable
class Format(Protocol):
    """A format module: its names, its place in the sniffing order, and its parser. It also satisfies at least one of
    ``SniffsRecords``, ``SniffsDocuments``, ``SniffsFiles`` (how its files are recognised from their content), and
    may satisfy the discovery hooks ``HasDefaultRoots``, ``ReadsNamedFiles``, ``HasCompanions``, ``DescribesFiles``."""

    FORMAT: str
    """The name stored in ``sessions.format`` and accepted by ``--agent``."""
    ALIASES: tuple[str, ...]
    """Other names ``--agent`` accepts (may be empty)."""
    SNIFF_RANK: int
    """Lower is tried first: strict shapes before loose ones (a bare ``messages`` list is tried last)."""
    Parser: Callable[[FileContext], RecordParser]
    """The parser class, one instance per file."""


@runtime_checkable
class SniffsRecords(Protocol):
    """A JSON-lines format: its files are recognised by one of their first records."""

    def sniff(self, record: Any, /) -> bool: ...


@runtime_checkable
class SniffsDocuments(Protocol):
    """A format whose file is one JSON document; the parser is fed it once, as record 1."""

    def sniff_document(self, doc: Any, /) -> bool: ...


@runtime_checkable
class SniffsFiles(Protocol):
    """A format whose parser reads the file itself (``FileParser.read``), recognised by its path and first bytes (and,
    when those are not enough, the file itself read through ``files``)."""

    def sniff_file(self, path: Path, head: bytes, files: Files, /) -> bool: ...


RECOGNISERS: tuple[type, ...] = (SniffsRecords, SniffsDocuments, SniffsFiles)


@runtime_checkable
class HasDefaultRoots(Protocol):
    """The agent's own session folders (and files), read by ``loopscope analyze`` without a path."""

    def default_roots(self) -> list[Path]: ...


@runtime_checkable
class ReadsNamedFiles(Protocol):
    """Files read whatever their suffix says (e.g. ``opencode.db``, where ``.db`` files are otherwise skipped)."""

    def reads_named(self, name: str, /) -> bool: ...


@runtime_checkable
class HasCompanions(Protocol):
    """Files whose content lives partly in other files: the (size, mtime) that stand for the file and its companions,
    so re-ingest notices when a companion changes; None for a file that has none. The companions are looked up in
    ``files`` (a listing: nothing is opened)."""

    def companion_state(self, path: str, size: int, mtime_ns: int, files: Files, /) -> tuple[int, int] | None: ...


@runtime_checkable
class HasCompanionFiles(Protocol):
    """Of the files discovery found, those read as part of another one found with them (opencode's message and part
    files, read by their storage session file): companion path -> that file's path. Discovery records them as read
    with it (``files.status`` ``companion``) and never parses them alone. From the paths alone: no file is opened."""

    def companions_among(self, paths: Sequence[str], /) -> dict[str, str]: ...


@runtime_checkable
class GroupsFiles(Protocol):
    """Files whose parser reads other files beside them (a folder of event files, a legacy chat and the ``.jsonl``
    it was migrated to, a database and its ``-wal``): the key such files share, or None for a file read alone. Where
    files are read from bytes handed over (a Spark task), the files of one key are handed over together. From the
    path alone. (opencode's storage tree is grouped by ``HasCompanionFiles`` instead: its parts are never parsed
    alone.)"""

    def file_group(self, path: str, /) -> str | None: ...


@runtime_checkable
class DescribesFiles(Protocol):
    """Why a file of this agent that no format reads is skipped (e.g. Claude Code's workflow ``journal.jsonl``), or
    None."""

    def describe_file(self, path: Path, /) -> str | None: ...


def contract_problems(module: Any) -> list[str]:
    """What ``module`` lacks to be a format module; empty when it is one. Checked once per module by the registry."""
    problems = []
    if not isinstance(module, Format):
        missing = [name for name in Format.__annotations__ if not hasattr(module, name)]
        return [f"it lacks {', '.join(missing)} (``Format``)"]
    if not any(isinstance(module, r) for r in RECOGNISERS):
        problems.append("it has no way to recognise its files: sniff, sniff_document or sniff_file")
    parser = module.Parser
    if not isinstance(parser, type) or not issubclass(parser, RecordParser):
        problems.append("its Parser lacks feed(record, line) or close()")
    elif isinstance(module, SniffsFiles) and not issubclass(parser, FileParser):
        problems.append("it reads files itself (sniff_file) but its Parser lacks read(path)")
    return problems


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


_IMAGE_TYPES = ("image", "input_image", "image_url")


def result_text_of(content: Any) -> str:
    """A tool result's text, each image it holds a line naming the image by a digest of its data: a screenshot's
    answer is its image, so two screenshots are the same result only when their images are (the text alone, "Took a
    screenshot", is the same every time)."""
    text = text_of(content)
    if not isinstance(content, list):
        return text
    marks = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in _IMAGE_TYPES:
            continue
        source = part.get("source") if isinstance(part.get("source"), dict) else {}
        url = part.get("image_url")
        data = source.get("data") or part.get("data") or (url.get("url") if isinstance(url, dict) else url)
        if isinstance(data, str) and data:
            kind = source.get("media_type") or part.get("mimeType") or "image"
            marks.append(f"[{kind}, {len(data) * 3 // 4:,} bytes, sha1 {hashlib.sha1(data.encode()).hexdigest()[:12]}]")
    return "\n".join(x for x in (text, *marks) if x)


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
        stem = stem.removesuffix(suffix)
    inst = instance or stem or path.name
    for parent in path.resolve().parents:
        if parent.name and parent.name not in (inst, stem, "trajs"):
            return f"{parent.name}/{inst}"
    return inst
