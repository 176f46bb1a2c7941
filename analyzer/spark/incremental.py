"""What a ``spark run`` over an ``--out`` that holds a previous run's results reads again and rewrites, as the store's
ingest and scan do (``analyzer.ingest.pipeline``, ``analyzer.scan.run``):

- file ids: ``OUT/_ingest/manifest`` keeps every path a run has listed with its file id (a path that left the input
  keeps its id, as the store's ``files`` row does); a path listed again keeps it, a new path gets the next id, in
  path order;
- parsing: the groups of files (``listing``) with a new, changed (size, modification time) or removed file are parsed
  again; every other file keeps the rows a previous run parsed (``OUT/_ingest/parsed/run=<id>``);
- duplicate session ids: decided as the store decides them (``land.load_chunk``): a kept copy whose file is not read
  again stays; otherwise the lowest file id among the copies in files read again; when a kept copy's file is read
  again, so are the files holding the other copies (``again``);
- rewriting: only the ``(p_format, p_date)`` partitions holding a session whose rows may differ (``affected``), and
  the ``p_format`` partitions of ``files`` and ``ingest_errors`` holding a file whose row may differ, are written
  (dynamic partition overwrite); the scan runs over the sessions whose fingerprint changed (``scan_state``, as
  ``loopscope scan``) and keeps the other sessions' rows.

The driver holds listing-sized metadata only (paths, ids, partition names), never a transcript's rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from analyzer.spark.ingest import Task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from analyzer.spark.listing import Listed

INGEST = "_ingest"  # under --out: what the runs parsed, and the manifest of file ids
RUNNING = "running"  # under _ingest: written when a run starts rewriting tables, removed when it has finished
MANIFEST_COLS = [
    ("path", "VARCHAR"),
    ("file_id", "INTEGER"),
    ("size", "BIGINT"),
    ("mtime_ns", "BIGINT"),
    ("grp", "VARCHAR"),
    ("read_with", "VARCHAR"),
    ("run", "VARCHAR"),  # the parsed run holding the file's rows; NULL for a path no longer listed
]


class Manifested(NamedTuple):
    """A row of the manifest (``MANIFEST_COLS``, in that order)."""

    path: str
    file_id: int
    size: int
    mtime_ns: int
    grp: str
    read_with: str | None
    run: str | None


assert list(Manifested._fields) == [n for n, _ in MANIFEST_COLS]


@dataclass
class Plan:
    """What this run parses and what it compares with. ``rows``: the listing in ``ingest.TASK_COLS`` order, with
    stable file ids; ``full``: no usable previous run (the first run, or the last one stopped while rewriting
    tables): every table is written whole and every session scanned."""

    run_id: str
    full: bool
    rows: list[Task]
    changed: set[str] = field(default_factory=set)  # groups parsed in this run
    current: list[tuple[str, int]] = field(default_factory=list)  # (run, file id) of every listed file's rows
    stale: list[tuple[str, int]] = field(default_factory=list)  # (run, file id): replaced rows of changed files
    read_again: list[int] = field(default_factory=list)  # files of changed groups and removed files
    manifest: list[Manifested] = field(default_factory=list)

    @property
    def todo(self) -> list[Task]:
        return [r for r in self.rows if r.grp in self.changed]


def plan(spark: SparkSession, listed: list[Listed], out: str) -> Plan:
    """File ids, and the groups to parse, from the listing and the previous run's manifest."""
    from analyzer.spark.hadoop import exists as _exists

    run_id = str(time.time_ns() // 1000)
    manifest = f"{out}/{INGEST}/manifest"
    if not _exists(spark, manifest) and _exists(spark, f"{manifest}.new/_SUCCESS"):
        manifest += ".new"  # a run stopped between writing its manifest and putting it in place
    before: dict[str, Manifested] = {}
    if _exists(spark, manifest):
        for r in spark.read.parquet(manifest).collect():
            before[r["path"]] = Manifested(*(r[n] for n in Manifested._fields))
    full = not before or _exists(spark, f"{out}/{INGEST}/{RUNNING}")
    next_id = max((b.file_id for b in before.values()), default=0) + 1
    rows = []
    for x in listed:
        b = before.get(x.found.path)
        if b is None:
            fid, next_id = next_id, next_id + 1
        else:
            fid = b.file_id
        f = x.found
        rows.append(Task(fid, f.path, f.size, f.mtime_ns, f.ignored, f.read_with, f.read_format, x.group, x.uri))
    p = Plan(run_id, full, rows)
    now = {r.path: r for r in rows}
    for r in rows:
        b = before.get(r.path)
        if (
            b is None
            or b.run is None
            or (b.size, b.mtime_ns, b.grp, b.read_with) != (r.size, r.mtime_ns, r.grp, r.read_with)
        ):
            p.changed.add(r.grp)
            if b is not None and b.run is not None:
                p.changed.add(b.grp)  # the group it left is read again too
    p.changed.update(b.grp for path, b in before.items() if b.run is not None and path not in now)
    for path, b in before.items():
        if b.run is not None and (path not in now or b.grp in p.changed or now[path].grp in p.changed):
            p.stale.append((b.run, b.file_id))
            p.read_again.append(b.file_id)
    for r in rows:
        mine = r.grp in p.changed
        run = run_id if mine else before[r.path].run
        p.current.append((run, r.file_id))
        if mine:
            p.read_again.append(r.file_id)
        p.manifest.append(Manifested(r.path, r.file_id, r.size, r.mtime_ns, r.grp, r.read_with, run))
    p.manifest += [b._replace(run=None) for path, b in before.items() if path not in now]
    p.read_again = sorted(set(p.read_again))
    return p


def pairs(spark: SparkSession, rows: list[tuple[str, int]]) -> DataFrame:
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from analyzer.spark.hadoop import frame as _frame

    schema = StructType([StructField("run", StringType()), StructField("file_id", IntegerType())])
    return _frame(spark, rows, schema)


def ids(spark: SparkSession, values: list[int], name: str = "file_id") -> DataFrame:
    from pyspark.sql.types import IntegerType, StructField, StructType

    from analyzer.spark.hadoop import frame as _frame

    return _frame(spark, [(v,) for v in values], StructType([StructField(name, IntegerType())]))


def again(
    parsed: dict[str, DataFrame], prev: DataFrame | None, read_again: list[int], spark: SparkSession
) -> list[int]:
    """The files read again (``read_again``) and the files holding another copy of a session whose kept copy is in
    one of them (as the store reads those again: ``land.other_copies``)."""
    from pyspark.sql import functions as F

    if prev is None or not read_again:
        return read_again
    kept = prev.join(F.broadcast(ids(spark, read_again)), "file_id").select("session_id")
    others = parsed["sessions"].join(kept, "session_id").select("file_id").distinct()
    return sorted(set(read_again) | {r[0] for r in others.collect()})


def affected(
    spark: SparkSession, parsed: dict[str, DataFrame], old: dict[str, DataFrame], read_again: list[int]
) -> tuple[DataFrame, DataFrame]:
    """The sessions whose rows may differ from the previous run's, and those whose copies (duplicate session ids)
    may be decided otherwise; a superset of each, by session id.

    A session of a file read again (its old rows or its new ones) may differ itself, and so may every copy of its id
    (the kept copy may change); then, one step out, the sessions sharing a ``usage_key`` with any copy's turns (which
    turn counts the usage may change) and those sharing a ``toolu_`` call id with any copy's calls (which copy of a
    replayed call is dropped may change). Nothing goes further: a session outside these keeps its own rows, and its
    totals are its own rows' sums."""
    from pyspark.sql import functions as F

    files = F.broadcast(ids(spark, read_again))
    mine = [t.join(files, "file_id").select("session_id") for t in (parsed["sessions"], old["sessions"])]
    copies = mine[0].unionByName(mine[1]).distinct()
    keyed = [t.join(copies, "session_id") for t in (parsed["turns"], old["turns"])]
    keys = keyed[0].unionByName(keyed[1]).where("usage_key IS NOT NULL").select("usage_key").distinct()
    called = [c.join(copies, "session_id") for c in (parsed["calls"], old["calls"])]
    calls = called[0].unionByName(called[1]).where(F.col("call_id").startswith("toolu_")).select("call_id").distinct()
    out = (
        copies.unionByName(parsed["turns"].join(keys, "usage_key").select("session_id"))
        .unionByName(parsed["calls"].join(calls, "call_id").select("session_id"))
        .distinct()
    )
    return out, copies
