"""The scan against the streaming reference on real transcripts: sample_data/ and the public fixtures are ingested,
scanned (the vectorised detectors), and every stored signal, text counter and finding must equal what the
per-session reference (``core.scan_calls``, ``text.scan_texts``, ``episodes.build_findings``) computes from the
same rows. Real transcripts carry what generated ones miss: aborted calls without results, odd escapes, scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, SAMPLE_DATA
from helpers import ingest_paths, query

from analyzer.detect.keys import args_token_set, estimate_tokens, tokens_of_length
from analyzer.detect.rules import FINDINGS, RESULT_HEAD, SIGNAL_FIELDS, TEXT_FIELDS
from analyzer.detect.stream.calls import Config, scan_calls
from analyzer.detect.stream.episodes import SessionData, build_findings
from analyzer.detect.stream.text import scan_texts
from analyzer.scan.run import scan
from analyzer.store import connection


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def reference(db: Path, config: Config) -> tuple[set[tuple], set[tuple], set[tuple]]:
    """Signals, text counters and findings as the per-session reference computes them from the store's rows."""
    con = connection.connect(db, read_only=True)
    try:
        calls = _rows(
            con,
            "SELECT session_id, seq, call_id, turn_id, user_turn, tool, action_key, args, "
            "coalesce(action_args, args) AS action_args, result_key, "
            f"is_error, parent_call_id, left(result_text, {RESULT_HEAD}) AS head, result_chars "
            "FROM calls ORDER BY session_id, seq",
        )
        msgs = _rows(
            con,
            "SELECT session_id, turn_id, turn_index, user_turn, text FROM turns "
            "WHERE role = 'assistant' ORDER BY session_id, turn_index",
        )
        usage = _rows(
            con,
            "SELECT session_id, turn_id, sum(total_tokens)::BIGINT AS tokens, "
            "sum(coalesce(cost_usd, 0)) AS cost FROM turns WHERE role = 'assistant' AND usage_counted "
            "AND turn_id IS NOT NULL GROUP BY ALL",
        )
        sessions = [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]
    finally:
        con.close()
    sig_rows: set[tuple] = set()
    text_rows: set[tuple] = set()
    found: set[tuple] = set()
    for sid in sessions:
        cs = [c for c in calls if c["session_id"] == sid]
        ms = [m for m in msgs if m["session_id"] == sid]
        col = {k: [c[k] for c in cs] for k in (cs[0] if cs else {})}
        sig, links = scan_calls(  # calls compared by their action (calls.action_key, action_args)
            col.get("action_key", []),
            col.get("tool", []),
            col.get("action_args", []),
            col.get("result_key", []),
            col.get("is_error", []),
            col.get("parent_call_id", []),
            col.get("user_turn", []),
            config,
        )
        tsig, tlinks = scan_texts(
            [m["text"] for m in ms], [m["user_turn"] for m in ms], config.similarity, config.reset_on_user
        )
        fs = build_findings(
            SessionData(
                session_id=sid,
                seq=col.get("seq", []),
                call_id=col.get("call_id", []),
                turn_id=col.get("turn_id", []),
                user_turn=col.get("user_turn", []),
                tool=col.get("tool", []),
                key=col.get("action_key", []),
                args=col.get("args", []),
                parent=col.get("parent_call_id", []),
                est_tokens=[estimate_tokens(c["args"]) + tokens_of_length(c["result_chars"]) for c in cs],
                signals=sig,
                nested_links=links,
                m_turn_id=[m["turn_id"] for m in ms],
                m_turn_index=[m["turn_index"] for m in ms],
                m_user_turn=[m["user_turn"] for m in ms],
                m_text=[m["text"] for m in ms],
                m_est_tokens=[estimate_tokens(m["text"]) for m in ms],
                m_signals=tsig,
                text_links=tlinks,
                usage={u["turn_id"]: (u["tokens"], u["cost"]) for u in usage if u["session_id"] == sid},
                tokens={c["action_key"]: args_token_set(c["action_args"]) for c in cs},
                result_key=col.get("result_key", []),
                is_error=col.get("is_error", []),
                result_head=[c["head"] for c in cs].__getitem__,
            )
        )
        cf: list[str | None] = [None] * len(cs)
        tf: list[str | None] = [None] * len(ms)
        for f in fs:
            for i in f.calls:
                cf[i] = cf[i] or f.finding_id
            for m in f.messages:
                tf[m] = f.finding_id
            found.add(tuple(tuple(v) if isinstance(v, list) else v for v in (getattr(f, n) for n in FINDINGS.names)))
        sig_rows |= {(sid, c["seq"]) + s + (f,) for c, s, f in zip(cs, sig, cf)}
        text_rows |= {(sid, m["turn_index"]) + s + (f,) for m, s, f in zip(ms, tsig, tf) if s is not None}
    return sig_rows, text_rows, found


def stored(db: Path) -> tuple[set[tuple], set[tuple], set[tuple]]:
    sig = query(db, f"SELECT session_id, seq, {', '.join(SIGNAL_FIELDS)}, finding_id FROM signals")
    txt = query(db, f"SELECT session_id, turn_index, {', '.join(TEXT_FIELDS)}, finding_id FROM text_signals")
    found = query(db, f"SELECT {', '.join(FINDINGS.names)} FROM findings")
    return (
        {tuple(r) for r in sig},
        {tuple(r) for r in txt},
        {tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in found},
    )


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("real") / "store.duckdb"
    ingest_paths(db, *[p for p in (SAMPLE_DATA, FIXTURES) if p.is_dir()])
    return db


@pytest.mark.parametrize("config", [Config(), Config(reset_on_user=False)], ids=["reset", "no-reset"])
def test_scan_of_real_transcripts_equals_the_reference(transcripts: Path, config: Config, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    db.write_bytes(transcripts.read_bytes())
    scan(db, config)
    expected = reference(db, config)
    got = stored(db)
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    assert got[2] == expected[2]
    assert expected[2], "the transcripts should hold findings"
