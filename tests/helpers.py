"""Small helpers for tests: ingest a folder and query the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from analyzer.store import db as store
from analyzer.ingest.pipeline import IngestSummary, ingest


def ingest_paths(db: Path, *paths: Path, workers: int | None = 1) -> IngestSummary:
    return ingest(list(paths), db, workers=workers)


def query(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple]:
    con = store.connect(db, read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path
