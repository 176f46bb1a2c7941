"""Small helpers for tests: ingest a folder and query the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.pipeline import IngestSummary, ingest
from analyzer.store import connection

# opencode.db's tables as opencode >= 1.2 creates them (anomalyco/opencode session.sql.ts and its migrations: the
# columns loopscope reads, and the indexes a real database has), for the tests and benchmarks/bench_formats.py.
OPENCODE_DDL = """
    CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,
        directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, cost REAL NOT NULL DEFAULT 0,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
    CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
        time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
    CREATE INDEX part_message_id_id_idx ON part (message_id, id);
    CREATE INDEX part_session_idx ON part (session_id);
"""


def ingest_paths(db: Path, *paths: Path, workers: int | None = 1, full_results: bool | None = None) -> IngestSummary:
    return ingest(list(paths), db, workers=workers, full_results=full_results)


def query(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple]:
    con = connection.connect(db, read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def pi_records(sid: str, n_calls: int = 3, usage: dict | None = None, cwd: str = "/repo") -> list[dict]:
    """A small pi v3 session: one prompt, then ``n_calls`` bash calls, each with its result."""
    recs: list[dict] = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-03-01T10:00:00Z", "cwd": cwd},
        {
            "type": "message",
            "id": "u1",
            "timestamp": "2026-03-01T10:00:01Z",
            "message": {"role": "user", "content": "run the tests"},
        },
    ]
    for i in range(n_calls):
        recs.append(
            {
                "type": "message",
                "id": f"a{i}",
                "timestamp": f"2026-03-01T10:01:{i:02d}Z",
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": f"pytest -k t{i}"}}
                    ],
                    "usage": dict(usage or {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0}),
                },
            }
        )
        recs.append(
            {
                "type": "message",
                "id": f"r{i}",
                "timestamp": f"2026-03-01T10:01:{i:02d}.5Z",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"c{i}",
                    "toolName": "bash",
                    "content": [{"type": "text", "text": f"{i} passed"}],
                    "isError": False,
                },
            }
        )
    return recs
