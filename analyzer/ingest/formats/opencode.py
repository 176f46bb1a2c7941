"""opencode sessions: the legacy JSON storage tree and the SQLite ``opencode.db``. docs/formats.md#opencode.

The storage tree spreads one session over many files: ``storage/session/<projectID>/<ses>.json`` (the session),
``storage/message/<ses>/<msg>.json`` (its messages) and ``storage/part/<msg>/<prt>.json`` (their parts). The session
file is the unit of ingest: this adapter claims it and reads its messages and parts from the sibling folders, so a
session is built once and whole. Its message and part files found with it are recorded as read with it
(``companions_among``; ``files.status`` ``companion``), never parsed alone; one met without its session file is skipped
("read with its session", see ``parse.describe_document``). ``pipeline.discover`` gives a session file the newest
mtime and the total size of its message and part files, so adding or rewriting a message re-ingests the session.

``opencode.db`` (and ``opencode-<channel>.db``) keeps the same records in tables ``session``, ``message`` and
``part`` (``data`` holds the JSON without the ids); the whole database is one file of ingest, read read-only, in
one ordered pass over each table (sessions come out one at a time, so memory follows the largest session).
``opencode export`` documents (``{"info", "messages": [{"info", "parts"}]}``) are read too.

Messages are ordered by id (ids ascend with time), parts by id within their message. Tool parts are the calls
(``callID``, ``tool``, ``state.input``); ``state.status`` ``completed`` gives ``state.output``, ``error`` gives
``state.error`` as a failed result; ``pending``/``running`` parts have no result. An assistant message may span several
model steps, and opencode overwrites ``message.tokens`` with each step's (so it holds the last step only) while it adds
up ``cost``: usage is the sum of the message's ``step-finish`` parts when it has any, else ``message.tokens`` (what
ccusage reads, which agrees for single-step messages). Output counts ``reasoning`` too (billed as output).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.base import LOCAL, FileContext, Files, parse_arguments
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder, as_int

FORMAT = "opencode"
ALIASES = ("open-code",)
SNIFF_RANK = 60


def default_roots() -> list[Path]:
    """``$OPENCODE_DATA_DIR``, else ``$XDG_DATA_HOME/opencode`` (``~/.local/share/opencode``): its ``opencode*.db``
    and the legacy ``storage/`` tree (both are read; a session in both is loaded once, the other copy recorded)."""
    env = os.environ
    oc = (
        Path(env["OPENCODE_DATA_DIR"])
        if env.get("OPENCODE_DATA_DIR")
        else Path(env.get("XDG_DATA_HOME") or Path.home() / ".local/share") / "opencode"
    )
    return [oc / "storage", *sorted(oc.glob("opencode*.db"))] if oc.is_dir() else []


def reads_named(name: str) -> bool:
    """``opencode.db`` / ``opencode-<channel>.db``: a ``.db`` that is read (other databases are not transcripts)."""
    return name.startswith("opencode") and name.endswith(".db")


def file_group(path: str) -> str | None:
    """An ``opencode*.db`` goes with its ``-wal`` file."""
    name = os.path.basename(path)
    if name.endswith("-wal") and reads_named(name[:-4]):
        return path[:-4]
    return path if reads_named(name) else None


def _is_storage_session(path: str) -> bool:
    """A legacy storage session file: ``…/storage/session/<projectID>/ses_*.json``."""
    name = os.path.basename(path)
    if not (name.startswith("ses_") and name.endswith(".json")):
        return False
    return os.path.basename(os.path.dirname(os.path.dirname(path))) == "session"


def companion_state(path: str, size: int, mtime_ns: int, files: Files = LOCAL) -> tuple[int, int] | None:
    """(size, mtime) standing for a file whose content lives partly in companion files, or None. A storage session
    counts its message and part files (``message/<ses>/*.json``, ``part/<msg>/*.json``); an ``opencode*.db`` its
    ``-wal`` file. Sizes add up and the newest mtime wins, so adding or rewriting a message re-ingests its session.
    Limit: a companion rewritten with the same size and mtime is missed."""
    name = os.path.basename(path)
    if reads_named(name):
        st = files.stat(path + "-wal")
        if st is None:
            return None
        return size + st[0], max(mtime_ns, st[1])
    if not _is_storage_session(path):
        return None
    storage = Path(path).parent.parent.parent
    total, newest = size, mtime_ns

    def scan(folder: Path) -> list[str]:
        nonlocal total, newest
        names = []
        for name in files.names(str(folder)):
            if name.endswith(".json") and (st := files.stat(str(folder / name))) is not None:
                total += st[0]
                newest = max(newest, st[1])
                names.append(name[:-5])
        return names

    for mid in scan(storage / "message" / Path(path).stem):
        scan(storage / "part" / mid)
    return total, newest


def companions_among(paths: Sequence[str]) -> dict[str, str]:
    """The message and part files among ``paths`` whose storage session file is among them too (the files
    ``companion_state`` counts: ``message/<ses>/*.json``, ``part/<msg>/*.json``) -> that session file. A message or
    part file whose session file was not found is left out (skipped when parsed alone)."""
    # [storage, kind, folder, name]: session/<projectID>/<ses>.json, message/<ses>/<msg>.json, part/<msg>/<prt>.json
    split = [p.rsplit(os.sep, 3) for p in paths if p.endswith(".json")]
    sessions = {  # (storage folder, session id) -> session file
        (s[0], s[3][:-5]): os.sep.join(s)
        for s in split
        if len(s) == 4 and s[1] == "session" and s[3].startswith("ses_")
    }
    if not sessions:
        return {}
    out: dict[str, str] = {}
    messages: dict[tuple[str, str], str] = {}  # (storage folder, message id) -> session file
    for s in split:
        if len(s) == 4 and s[1] == "message" and (session := sessions.get((s[0], s[2]))) is not None:
            out[os.sep.join(s)] = session
            messages[(s[0], s[3][:-5])] = session
    for s in split:
        if len(s) == 4 and s[1] == "part" and (session := messages.get((s[0], s[2]))) is not None:
            out[os.sep.join(s)] = session
    return out


_SQLITE_MAGIC = b"SQLite format 3\x00"
_TABLES = {"session", "message", "part"}


def is_session_file(path: Path) -> bool:
    """``…/storage/session/<projectID>/ses_*.json``."""
    return path.suffix == ".json" and path.name.startswith("ses_") and path.parent.parent.name == "session"


def _connect(path: Path, files: Files) -> sqlite3.Connection:
    """The database read-only: in place on the local disk, else deserialised from its bytes."""
    local = files.local(str(path))
    if local is not None:
        return sqlite3.connect(f"file:{local}?mode=ro", uri=True)
    with files.open(str(path)) as f:
        data = f.read()
    if data[18:20] == b"\x02\x02":  # a WAL-mode database: its image reads as a rollback-journal one (the -wal unread)
        data = data[:18] + b"\x01\x01" + data[20:]
    con = sqlite3.connect(":memory:")
    con.deserialize(data)
    return con


def sniff_file(path: Path, head: bytes, files: Files = LOCAL) -> bool:
    if head.startswith(_SQLITE_MAGIC):
        try:
            con = _connect(path, files)
            try:
                names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            finally:
                con.close()
        except sqlite3.Error:
            return False
        return _TABLES <= names
    if not is_session_file(path):
        return False
    try:
        if len(head) < 65536:
            doc = orjson.loads(head)
        else:
            with files.open(str(path)) as f:
                doc = orjson.loads(f.read())
    except (orjson.JSONDecodeError, OSError):
        return False
    return isinstance(doc, dict) and str(doc.get("id", "")).startswith("ses_")


def sniff_document(doc: Any) -> bool:
    """``opencode export <id>`` output."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("info"), dict)
        and str(doc["info"].get("id", "")).startswith("ses_")
        and isinstance(doc.get("messages"), list)
    )


def usage_of(tokens: Any, cost: Any = None) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    u = Usage(
        as_int(tokens.get("input")),
        as_int(tokens.get("output")) + as_int(tokens.get("reasoning")),
        as_int(cache.get("read")),
        as_int(cache.get("write")),
    )
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        u.cost = float(cost)
    return u


def _sum(usages: list[Usage]) -> Usage:
    out = Usage()
    costs = [u.cost for u in usages]
    for u in usages:
        out.input += u.input
        out.output += u.output
        out.cache_read += u.cache_read
        out.cache_write += u.cache_write
    out.cost = sum(c for c in costs if c is not None) if any(c is not None for c in costs) else None
    return out


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.sessions = 0

    def feed(self, doc: Any, line: int) -> None:
        """An ``opencode export`` document: ``{"info": session, "messages": [{"info", "parts"}]}``."""
        if not sniff_document(doc):
            self.ctx.error(line, "not an opencode export document", doc)
            return
        messages = []
        for i, m in enumerate(doc["messages"]):
            if not isinstance(m, dict) or not isinstance(m.get("info"), dict):
                self.ctx.error(line, f"opencode export message {i} without info", m)
                continue
            parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
            messages.append((dict(m["info"]), parts))
        self._session(str(doc["info"]["id"]), doc["info"], messages)

    def close(self) -> int:
        return self.sessions

    def read(self, path: Path) -> None:
        with self.ctx.files.open(str(path)) as f:
            magic = f.read(len(_SQLITE_MAGIC))
        if magic == _SQLITE_MAGIC:
            self._read_db(path)
        else:
            self._read_tree(path)

    # -- the JSON storage tree -----------------------------------------------------------------------------------------
    def _load(self, path: Path, what: str) -> Any:
        try:
            with self.ctx.files.open(str(path)) as f:
                return orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError) as exc:
            self.ctx.error(None, f"opencode {what} {path.name} cannot be read ({type(exc).__name__}: {exc})")
            return None

    def _read_tree(self, path: Path) -> None:
        info = self._load(path, "session")
        if not isinstance(info, dict):
            return
        storage = path.parent.parent.parent
        sid = str(info.get("id"))
        messages: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        for mpath in _json_files(storage / "message" / sid, self.ctx.files):
            msg = self._load(mpath, "message")
            if not isinstance(msg, dict):
                if msg is not None:
                    self.ctx.error(None, f"opencode message {mpath.name} is not an object", msg)
                continue
            msg.setdefault("id", mpath.stem)
            parts = []
            for ppath in _json_files(storage / "part" / str(msg["id"]), self.ctx.files):
                part = self._load(ppath, "part")
                if isinstance(part, dict):
                    part.setdefault("id", ppath.stem)
                    parts.append(part)
                elif part is not None:
                    self.ctx.error(None, f"opencode part {ppath.name} is not an object", part)
            messages.append((msg, parts))
        self._session(sid, info, messages)

    # -- opencode.db ---------------------------------------------------------------------------------------------------
    def _read_db(self, path: Path) -> None:
        con = _connect(path, self.ctx.files)
        con.row_factory = sqlite3.Row
        try:
            infos: dict[str, dict[str, Any]] = {}
            for row in con.execute("SELECT * FROM session ORDER BY id"):
                r = dict(row)
                infos[r["id"]] = {
                    "id": r["id"],
                    "parentID": r.get("parent_id"),
                    "directory": r.get("directory"),
                    "version": r.get("version"),
                    "time": {"created": r.get("time_created"), "updated": r.get("time_updated")},
                }
            con.row_factory = None
            for (sid,) in con.execute("SELECT DISTINCT session_id FROM message ORDER BY session_id"):
                infos.setdefault(sid, {"id": sid})
            order = sorted(infos)
            done = 0
            try:
                for sid, msgs in self._db_stream(con, order):
                    self._session(sid, infos[sid], msgs)
                    done += 1
            except sqlite3.Error as exc:  # a damaged page: the sessions after it are read one query each
                self.ctx.error(None, f"opencode.db cannot be read in one pass ({exc}); sessions read one by one")
            for sid in order[done:]:
                try:
                    msgs = self._db_messages(con, sid)
                except sqlite3.Error as exc:
                    self.ctx.error(None, f"opencode.db session {sid} cannot be read ({exc}); other sessions kept")
                    continue
                self._session(sid, infos[sid], msgs)
        finally:
            con.close()

    def _db_stream(
        self,
        con: sqlite3.Connection,
        order: list[str],
    ) -> Iterator[tuple[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]]]:
        """Each session of ``order`` with its messages and parts, from one ordered pass over each table: a query per
        session costs a scan of the table per session where an index is missing, and a round trip each where not.
        ``data`` is read as bytes, which orjson decodes directly (no UTF-8 → str copy of every row first)."""
        msg_groups = groupby(
            con.execute("SELECT session_id, id, time_created, CAST(data AS BLOB) FROM message ORDER BY session_id, id"),
            itemgetter(0),
        )
        part_groups = groupby(
            con.execute(
                "SELECT session_id, message_id, id, CAST(data AS BLOB) FROM part ORDER BY session_id, message_id, id"
            ),
            itemgetter(0),
        )
        m_next = next(msg_groups, None)
        p_next = next(part_groups, None)
        for sid in order:
            key = _sql_order(sid)
            while m_next is not None and _sql_order(m_next[0]) < key:
                m_next = next(msg_groups, None)
            while p_next is not None and _sql_order(p_next[0]) < key:  # parts of no listed session: not read
                p_next = next(part_groups, None)
            parts: dict[str, list[dict[str, Any]]] = {}
            if p_next is not None and p_next[0] == sid:
                for _, mid, pid, data in p_next[1]:
                    self._add_part(parts, mid, pid, data)
                p_next = next(part_groups, None)
            out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
            if m_next is not None and m_next[0] == sid:
                for _, mid, created, data in m_next[1]:
                    self._add_message(out, parts, sid, mid, created, data)
                m_next = next(msg_groups, None)
            yield sid, out

    def _db_messages(self, con: sqlite3.Connection, sid: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        parts: dict[str, list[dict[str, Any]]] = {}
        for pid, mid, data in con.execute(
            "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id", (sid,)
        ):
            self._add_part(parts, mid, pid, data)
        out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        for mid, created, data in con.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY id", (sid,)
        ):
            self._add_message(out, parts, sid, mid, created, data)
        return out

    def _add_part(self, parts: dict[str, list[dict[str, Any]]], mid: str, pid: str, data: Any) -> None:
        part = self._decode(data, "part", pid)
        if part is not None:
            part["id"] = pid
            same = parts.get(mid)
            if same is None:
                parts[mid] = [part]
            else:
                same.append(part)

    def _add_message(
        self,
        out: list[tuple[dict[str, Any], list[dict[str, Any]]]],
        parts: dict[str, list[dict[str, Any]]],
        sid: str,
        mid: str,
        created: Any,
        data: Any,
    ) -> None:
        msg = self._decode(data, "message", mid)
        if msg is None:
            return
        msg["id"], msg["sessionID"] = mid, sid
        if not isinstance(msg.get("time"), dict):
            msg["time"] = {"created": created}
        out.append((msg, parts.get(mid, [])))

    def _decode(self, data: Any, kind: str, row_id: str) -> dict[str, Any] | None:
        """A row's ``data`` as an object, or None with the error recorded (its text is built only then: this runs
        once per row)."""
        try:
            value = orjson.loads(data)
        except (orjson.JSONDecodeError, TypeError) as exc:
            excerpt = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            excerpt = excerpt if isinstance(excerpt, str) else ""
            self.ctx.error(None, f"opencode.db {kind} {row_id}: data is not JSON ({exc})", excerpt)
            return None
        if type(value) is not dict:
            self.ctx.error(None, f"opencode.db {kind} {row_id}: data is not an object", value)
            return None
        return value

    # -- one session ------------------------------------------------------------------------------------------------
    def _session(
        self,
        sid: str,
        info: dict[str, Any],
        messages: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    ) -> None:
        parent = info.get("parentID")
        b = self.ctx.builder(
            FORMAT,
            sid,
            parent_session_id=parent if isinstance(parent, str) else None,
            cwd=info.get("directory") if isinstance(info.get("directory"), str) else None,
            agent_version=str(info["version"]) if info.get("version") else None,
        )
        t = info.get("time") if isinstance(info.get("time"), dict) else {}
        b.see_ts(t.get("created"))
        messages.sort(key=lambda mp: str(mp[0].get("id")))
        for n, (msg, parts) in enumerate(messages, 1):
            parts.sort(key=lambda p: str(p.get("id")))
            try:
                self._message(b, msg, parts, n)
            except Exception as exc:  # noqa: BLE001 - one bad message must not lose the session
                self.ctx.error(
                    n, f"opencode message {msg.get('id')} could not be read ({type(exc).__name__}: {exc})", msg
                )
        b.see_ts(t.get("updated"))
        b.finish()
        self.sessions += 1

    def _message(self, b: SessionBuilder, msg: dict[str, Any], parts: list[dict[str, Any]], line: int) -> None:
        role = msg.get("role")
        t = msg.get("time")
        ts = t.get("created") if isinstance(t, dict) else None
        texts: list[str] = []
        finishes: list[dict[str, Any]] = []
        tools: list[dict[str, Any]] = []
        for p in parts:  # one pass: a message's parts are sorted out once, not once per kind
            kind = p.get("type")
            if kind == "tool":
                tools.append(p)
            elif kind == "text":
                txt = p.get("text")
                if isinstance(txt, str) and not p.get("synthetic"):
                    texts.append(txt)
            elif kind == "step-finish":
                finishes.append(p)
        text = "\n".join(texts)
        if role == "user":
            b.user_prompt(text, ts, line, turn_id=str(msg["id"]))
            return
        if role != "assistant":
            self.ctx.error(line, f"opencode message with unknown role {role!r}", msg)
            return
        if not b.cwd and isinstance(msg.get("path"), dict):
            b.cwd = msg["path"].get("cwd")
        steps = [u for u in (usage_of(p.get("tokens"), p.get("cost")) for p in finishes) if u is not None]
        if steps:
            usage = _sum(steps)
            if isinstance(msg.get("cost"), (int, float)) and usage.cost is None:
                usage.cost = float(msg["cost"])
        else:
            usage = usage_of(msg.get("tokens"), msg.get("cost"))
            if usage is not None and usage.total_tokens == 0 and usage.cost in (None, 0.0):
                usage = None
        model = msg.get("modelID") if isinstance(msg.get("modelID"), str) else None
        tid = b.assistant(str(msg["id"]), text, ts, line, model=model, usage=usage)
        for p in tools:
            tool = p.get("tool")
            if not isinstance(tool, str):
                self.ctx.error(line, "opencode tool part without a tool name", p)
                continue
            state = p.get("state")
            if not isinstance(state, dict):
                state = {}
            cid = p.get("callID")
            if not isinstance(cid, str):
                cid = None
            st = state.get("time")
            if not isinstance(st, dict):
                st = {}
            b.call(cid, tool, parse_arguments(state.get("input")), st.get("start") or ts, line, turn_id=tid)
            status = state.get("status")
            key = cid or f"#{b.n_calls - 1}"
            if status == "completed":
                out = state.get("output")
                b.result(key, out if isinstance(out, str) else _dump(out), False, st.get("end"))
            elif status == "error":
                err = state.get("error")
                text_err = err if isinstance(err, str) else _dump(err)
                kind = "rejected" if "rejected permission" in text_err else None
                b.result(key, text_err, True, st.get("end"), error_kind=kind)


def _sql_order(value: Any) -> tuple[int, Any]:
    """A column value's place in SQLite's ORDER BY: NULL, numbers, text (by bytes, which is code-point order, as
    Python compares str), blobs."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


def _dump(value: Any) -> str:
    if value is None:
        return ""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _json_files(folder: Path, files: Files) -> Iterable[Path]:
    return [folder / n for n in files.names(str(folder)) if n.endswith(".json")]
