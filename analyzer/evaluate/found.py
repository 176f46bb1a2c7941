"""The store's findings as the scorer sees them (``Found``), and where a labelled message sits (``message_key``).

A finding covers the calls it names (``findings.call_ids``, as ``calls.seq``) and, for text, the messages of its
``text_signals``; a text loop whose messages issued no call (thoughts between calls) stands for the calls of the
messages it spans, so that a label on those calls meets it. ``tests/realdata_score.py`` reads the findings the same
way, on the unit of the transcript file; ``loopscope eval`` on the session.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from analyzer.evaluate.score import Found

if TYPE_CHECKING:
    import duckdb

POSITIONAL = ("mini_swe_agent", "swe_agent")  # formats whose messages are one JSON document's list


def message_key(fmt: str, turn_id: str | None, line: int | None) -> int | None:
    """A message's ``message_index`` in a label: its position in mini-swe-agent's ``messages`` or SWE-agent's
    ``trajectory`` (the turn id's number), else the 0-based physical line of a JSON-lines transcript."""
    if fmt in POSITIONAL:
        if turn_id and turn_id[:1] in "msh" and turn_id[1:].isdigit():
            return int(turn_id[1:])
        return None
    return line - 1 if line is not None else None


def read_found(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> list[Found]:
    """Every finding of the sessions ``session_ids``, on the unit of its session, grouped by ``format`` and ``tool``
    (the tools of its calls)."""
    ids = sorted(set(session_ids))
    rows = con.execute(
        """
        WITH f AS (
            SELECT finding_id, session_id, kind, repeats, stuck, coalesce(why, '') AS why, tools, call_ids
            FROM findings WHERE list_contains(?, session_id)
        ),
        u AS (SELECT finding_id, session_id, unnest(call_ids) AS call_id FROM f),
        q AS (
            SELECT u.finding_id, list(DISTINCT c.seq) AS seqs
            FROM u JOIN calls c ON c.session_id = u.session_id AND c.call_id = u.call_id GROUP BY u.finding_id
        )
        SELECT f.finding_id, f.session_id, s.format, f.kind, f.repeats, f.stuck, f.why, f.tools, q.seqs
        FROM f JOIN sessions s USING (session_id) LEFT JOIN q USING (finding_id)
        ORDER BY f.session_id, f.finding_id
        """,
        [ids],
    ).fetchall()
    msgs: dict[str, set[int]] = defaultdict(set)
    for fid, fmt, turn_id, line in con.execute(
        """
        SELECT x.finding_id, s.format, t.turn_id, t.line
        FROM text_signals x JOIN turns t USING (session_id, turn_id) JOIN sessions s USING (session_id)
        WHERE x.finding_id IS NOT NULL AND list_contains(?, x.session_id)
        """,
        [ids],
    ).fetchall():
        key = message_key(fmt, turn_id, line)
        if key is not None:
            msgs[fid].add(key)
    span = {
        fid: set(seqs)
        for fid, seqs in con.execute(
            """
            SELECT f.finding_id, list(c.seq) FROM findings f
            JOIN turns t ON t.session_id = f.session_id
             AND t.turn_index BETWEEN f.first_turn_index AND f.last_turn_index
            JOIN calls c ON c.session_id = t.session_id AND c.turn_id = t.turn_id
            WHERE f.kind = 'text' AND len(f.call_ids) = 0 AND list_contains(?, f.session_id)
            GROUP BY f.finding_id
            """,
            [ids],
        ).fetchall()
    }
    return [
        Found(
            unit=sid,
            finding_id=fid,
            kind=kind,
            repeats=int(repeats),
            stuck=bool(stuck),
            seqs=frozenset(set(seqs or []) | span.get(fid, set())),
            messages=frozenset(msgs.get(fid, set())),
            groups={"format": fmt, "tool": tuple(dict.fromkeys(tools or []))},
            why=why,
        )
        for fid, sid, fmt, kind, repeats, stuck, why, tools, seqs in rows
    ]
