"""``Store``, the library's one object: opened once, each stage a method, DuckDB's errors said as the library's own,
and the CLI reaching the store through nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT
from helpers import pi_records, write_jsonl

from analyzer.errors import StoreError
from analyzer.guards.policies import resolve
from analyzer.library import Store


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "t" / "a.jsonl", pi_records("a", 4))
    return tmp_path / "t"


def test_every_stage_through_one_store(tmp_path: Path, folder: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store.open(db, write=True) as store:
        assert store.ingest([folder], workers=1).sessions == 1
        assert store.scan(workers=1).scanned == 1
        assert store.sessions()["session_id"].to_list() == ["a"]
        assert store.findings().height >= 0 and set(store.summary()) == {"totals", "by_kind", "by_tool"}
        assert store.call("a:0").session_id == "a"
        assert store.replay(resolve(["cline"]), workers=1).sessions["session_id"].unique().to_list() == ["a"]
        assert store.export(tmp_path / "pq")["sessions"] == 1
    with Store.from_parquet(tmp_path / "pq") as parquet:
        assert parquet.sessions()["session_id"].to_list() == ["a"]
        with pytest.raises(StoreError, match="read-only"):
            parquet.scan()


def test_a_missing_store_is_never_created_but_by_the_ingest(tmp_path: Path, folder: Path) -> None:
    db = tmp_path / "none.duckdb"
    for write, use in (
        (False, lambda s: s.sessions()),
        (False, lambda s: s.export(tmp_path / "x")),
        (True, lambda s: s.sessions()),
        (True, lambda s: s.scan()),
    ):
        with Store.open(db, write=write) as store, pytest.raises(StoreError, match="no store at"):
            use(store)
    with Store.open(db, write=True) as store, pytest.raises(StoreError, match="ingest` and `loopscope scan` first"):
        store.calibrate("open-codesign")
    with Store.open(db) as store, pytest.raises(ValueError, match="read-only"):  # a stage that writes needs write=True
        store.scan()
    assert not db.exists()
    with Store.open(db, write=True) as store:
        store.ingest([folder], workers=1)
    assert db.exists()


def test_duckdb_errors_are_store_errors(tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analyzer.store import queries

    db = tmp_path / "s.duckdb"
    with Store.open(db, write=True) as store:
        store.ingest([folder], workers=1)

    def damaged(*a: object, **kw: object) -> None:
        raise duckdb.IOException("IO Error: Could not read from file: a damaged page\nmore")

    monkeypatch.setattr(queries, "sessions", damaged)
    with Store.open(db) as store, pytest.raises(StoreError, match=r"^store: IO Error: Could not read .*page$"):
        store.sessions()


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_the_commands_reach_the_store_only_through_the_store_object() -> None:
    """No command opens a DuckDB connection, knows DuckDB's errors, or runs a stage by the store's path."""
    forbidden = (
        "duckdb",
        "analyzer.store.connection",
        "analyzer.store.parquet",
        "analyzer.ingest.pipeline",
        "analyzer.scan.run",
        "analyzer.analyze",
        "analyzer.guards.replay.replay_store",
        "analyzer.calibrate.recommend.calibrate_store",
        "analyzer.ingest.show",
    )
    files = [*(ROOT / "analyzer" / "commands").glob("*.py"), ROOT / "analyzer" / "cli.py"]
    bad = sorted(f"{p.name}: {m}" for p in files for m in _imports(p) if m.startswith(forbidden))
    assert not bad, bad
