"""The adapters read bytes handed to them as they read the disk: every file of the sample data and the fixtures
parsed through ``MemoryFiles`` (what a Spark task holds: the file's group, as bytes, nothing else) gives the outcome
and rows it gives through the local disk. Needs no Spark; the Spark path itself is ``test_spark.py``."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, SAMPLE_DATA

from analyzer.ingest import formats
from analyzer.ingest.base import MemoryFiles
from analyzer.ingest.parse import FileTask, parse_file
from analyzer.ingest.pipeline import discover
from analyzer.ingest.rows import RowSink


def _parse(f, files, spool: Path):  # noqa: ANN001, ANN202
    spool.mkdir()
    sink = RowSink(spool, "t")
    task = FileTask(1, f.path, f.size, f.mtime_ns)
    o = parse_file(task, sink) if files is None else parse_file(task, sink, None, files)
    written = sink.close()
    tables = {t: sorted(map(str, pq.read_table(p).to_pylist())) for t, p in sorted(written.items())}
    return (o.status, o.format, o.reason, o.content_hash, o.sessions, o.calls, o.error_count, o.errors), tables


@contextlib.contextmanager
def _no_disk_under(root: Path) -> Iterator[None]:
    """Opening or listing anything under ``root`` fails: the parser has the bytes it was handed, nothing else."""
    inside = str(root.resolve())
    mp = pytest.MonkeyPatch()

    def guard(real):  # noqa: ANN001, ANN202
        def call(p, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            if isinstance(p, (str, Path)) and str(p).startswith(inside):
                raise PermissionError(13, "read from the handed bytes, not the disk", str(p))
            return real(p, *a, **k)

        return call

    for mod, name in ((builtins, "open"), (io, "open"), (os, "scandir"), (os, "listdir")):
        mp.setattr(mod, name, guard(getattr(mod, name)))
    try:
        yield
    finally:
        mp.undo()


@pytest.mark.parametrize("root", [SAMPLE_DATA, FIXTURES], ids=["sample_data", "fixtures"])
def test_a_file_parses_the_same_from_its_bytes(root: Path, tmp_path: Path) -> None:
    found = discover([root])
    groups: dict[str, list] = {}
    for f in found:
        if f.ignored is None:
            groups.setdefault(f.read_with or formats.file_group(f.path), []).append(f)
    parsed = 0
    for i, f in enumerate(found):
        if f.ignored is not None or f.read_with is not None:
            continue
        group = groups[f.read_with or formats.file_group(f.path)]
        data = {g.path: Path(g.path).read_bytes() for g in group}
        files = MemoryFiles(data, {g.path: (len(data[g.path]), g.mtime_ns) for g in group})
        local = _parse(f, None, tmp_path / f"local{i}")
        with _no_disk_under(root):
            handed = _parse(f, files, tmp_path / f"bytes{i}")
        assert handed == local, f.path
        parsed += local[0][0] == "ingested"
    assert parsed > 20
    assert any(len(g) > 1 for g in groups.values())  # a group read together (opencode, OpenHands events)
