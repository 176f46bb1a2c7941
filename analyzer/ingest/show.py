"""One call read back whole (``loopscope show``): the store keeps a long result's head and tail only, and the file and
line it came from, so the full text is one re-parse of that file with its adapter away."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.errors import UsageError


@dataclass
class ShownCall:
    session_id: str
    seq: int
    call_id: str | None
    tool: str
    args: str
    result: str | None  # the whole result text; None when the call got no result
    is_error: bool | None
    path: str
    line: int | None


class _CallCatcher:
    """A ``RowSink`` stand-in for ``parse_file``: it writes nothing, keeps whole results, and holds on to the one
    calls row it is after."""

    full_results = True

    def __init__(self, session_id: str, seq: int) -> None:
        from analyzer.ingest.rows import SPOOL

        self.want = (session_id, seq)
        self.counts = {t: 0 for t in SPOOL}
        names = [n for n, _ in SPOOL["calls"]]
        self._at = {n: names.index(n) for n in ("session_id", "seq", "result_text", "is_error")}
        self.row: tuple[Any, ...] | None = None

    def add(self, table: str, row: tuple[Any, ...], approx_bytes: int = 64) -> None:
        self.counts[table] += 1
        if table == "calls" and (row[self._at["session_id"]], row[self._at["seq"]]) == self.want:
            self.row = row

    def text(self) -> tuple[str | None, bool | None]:
        assert self.row is not None
        return self.row[self._at["result_text"]], self.row[self._at["is_error"]]


def _find(con: Any, ref: str) -> list[tuple]:
    """The calls ``ref`` names: ``SESSION:SEQ`` first (session ids may hold colons), else a call id."""
    cols = (
        "SELECT c.session_id, c.seq, c.call_id, c.tool, c.args, c.result_text, c.result_chars, c.is_error, "
        "c.file_id, c.line, f.path FROM calls c JOIN files f USING (file_id)"
    )
    session, _, seq = ref.rpartition(":")
    if session and seq.strip().isdigit():
        rows = con.execute(f"{cols} WHERE c.session_id = ? AND c.seq = ?", [session, int(seq)]).fetchall()
        if rows:
            return rows
    return con.execute(f"{cols} WHERE c.call_id = ? ORDER BY c.session_id, c.seq", [ref]).fetchall()


def show_call(con: Any, ref: str, db: Path | None = None) -> ShownCall:
    """The call ``ref`` names (a call id, or ``SESSION:SEQ``) in the store ``con`` is open on (``db``, named in the
    messages) with its whole result: from the store when it holds the result whole, else read again from the
    transcript. Every failure is a one-line ``UsageError``."""
    rows = _find(con, ref)
    if not rows:
        raise UsageError(
            f"no call {ref!r} in {db or 'the store'}: name a call id or SESSION:SEQ (`loopscope findings` lists calls)"
        )
    if len(rows) > 1:
        names = ", ".join(f"{r[0]}:{r[1]}" for r in rows[:3]) + (" …" if len(rows) > 3 else "")
        raise UsageError(f"call id {ref!r} names {len(rows)} calls ({names}): name one as SESSION:SEQ")
    session_id, seq, call_id, tool, args, text, chars, is_error, file_id, line, path = rows[0]
    if text is not None and chars is not None and len(text) != chars:
        text, is_error = _reparse(path, file_id, session_id, seq, chars)
    return ShownCall(session_id, seq, call_id, tool, args, text, is_error, path, line)


def _reparse(path: str, file_id: int, session_id: str, seq: int, chars: int) -> tuple[str | None, bool | None]:
    from analyzer.ingest.parse import FileTask, parse_file

    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(
            f"cannot read the transcript {path}: {exc.strerror or exc} (the store keeps only the head "
            "and tail of this result)"
        ) from None
    catcher = _CallCatcher(session_id, seq)
    parse_file(FileTask(file_id, path, st.st_size, st.st_mtime_ns), catcher)  # type: ignore[arg-type]
    if catcher.row is None:
        raise UsageError(
            f"{path} no longer holds call {session_id}:{seq}: it changed since it was ingested "
            "(run `loopscope ingest` again)"
        )
    text, is_error = catcher.text()
    if text is None or len(text) != chars:
        raise UsageError(
            f"{path} changed since it was ingested (call {session_id}:{seq} now has another result): "
            "run `loopscope ingest` again"
        )
    return text, is_error
