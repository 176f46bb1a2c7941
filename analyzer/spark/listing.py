"""The input of ``spark run``: the files under the given paths or URIs, listed through Hadoop's filesystem layer (so
any filesystem Spark reads works: ``file://``, ``hdfs://``, ``s3a://``, ``gs://``, ``abfss://``, with its connector),
classified as ``loopscope ingest`` classifies them (``pipeline.found_file``, ``link_companions``: the same file ids,
the same skips), and grouped: the files one parser reads together (``formats.file_group``, opencode's
``read_with``) are handed to one task together. The driver lists; it opens no file.

Paths: a file on the local filesystem keeps its local path (``/data/x.jsonl``, as ``loopscope ingest`` stores it);
any other keeps its URI (``s3a://bucket/x.jsonl``), which the parsers see as ``s3a:/bucket/x.jsonl`` (a ``Path``
folds the double slash) and the tables show as the URI again (``shown``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from analyzer.ingest.pipeline import Found

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
_FOLDED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)")
_FILE = re.compile(r"^file:(?://(?=/))?")
# Hadoop's ``FileStatus.toString`` (every filesystem's status extends it): path, isDirectory, a file's length, then
# modification_time, in this order.
_STATUS = re.compile(
    r"\{path=(?P<path>.*?); isDirectory=(?P<dir>true|false)(?:; length=(?P<size>\d+))?"
    r".*?; modification_time=(?P<mtime>\d+)"
)


@dataclass(frozen=True)
class Listed:
    """A file of the input: its ``Found`` (path as the parsers see it), the URI Spark's file source names it by, and
    the key of the files read with it."""

    found: Found
    uri: str
    group: str
    bytes: int  # the file's own size (``found.size`` of a file with companions stands for them all)


def is_uri(path: str) -> bool:
    return bool(_SCHEME.match(path)) and not re.match(r"^[A-Za-z]:[\\/]", path)


def shown(path: str) -> str:
    """A path as the tables show it: a non-local file's URI (``s3a:/b/k`` -> ``s3a://b/k``), a local path as is."""
    return _FOLDED.sub(r"\1://", path, count=1)


def root_uri(root: str | Path) -> str:
    """A path given on the command line as Hadoop names it: a URI as is, a local path made absolute (``file:/…``;
    symlinks resolved, as ``loopscope ingest`` resolves a root)."""
    text = str(root)
    if is_uri(text):
        return text
    return "file:" + str(Path(text).expanduser().resolve())  # as Hadoop writes it: not percent-encoded


def list_files(spark: SparkSession, roots: Sequence[str | Path]) -> list[Listed]:
    """Every file under ``roots`` in file-id order, classified and grouped as above. A root that does not exist, a
    scheme without its connector or a refused listing is a ``UsageError`` saying what to fix."""
    from analyzer.ingest import formats
    from analyzer.ingest.base import MemoryFiles
    from analyzer.ingest.pipeline import found_file, link_companions, not_read, walked
    from analyzer.spark.errors import explain

    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
    listing: dict[str, tuple[int, int]] = {}
    ignored: dict[str, str | None] = {}
    uris: dict[str, str] = {}

    def add(uri: str, size: int, mtime_ms: int, named: bool) -> None:
        path = _FILE.sub("", uri, count=1) if uri.startswith("file:") else uri.replace("://", ":/", 1)
        listing[path] = (size, mtime_ms * 1_000_000)
        ignored[path] = None if named else not_read(uri.rsplit("/", 1)[-1])
        uris[path] = uri

    def walk(fs: Any, folder: str) -> None:
        # One call into the JVM per folder (its statuses as one string), not one per file: ~3 ms a file otherwise.
        statuses = fs.listStatus(jvm.org.apache.hadoop.fs.Path(folder))
        n = len(statuses)
        as_objects = gateway.new_array(jvm.java.lang.Object, n)  # Py4J passes a FileStatus[] to no Object[] method
        jvm.java.lang.System.arraycopy(statuses, 0, as_objects, 0, n)
        text = str(jvm.java.util.Arrays.toString(as_objects))
        entries = sorted(((m["path"].rsplit("/", 1)[-1], m) for m in _STATUS.finditer(text)), key=lambda e: e[0])
        for name, m in entries:
            is_dir = m["dir"] == "true"
            if not walked(name, is_dir):
                continue
            if is_dir:
                walk(fs, m["path"])
            else:
                add(m["path"], int(m["size"] or 0), int(m["mtime"]), named=False)

    for root in roots:
        uri = root_uri(root)
        try:
            hp = jvm.org.apache.hadoop.fs.Path(uri)
            fs = hp.getFileSystem(conf)
            st = fs.getFileStatus(hp)
            if st.isDirectory():
                walk(fs, str(st.getPath().toString()))
            else:
                add(str(st.getPath().toString()), int(st.getLen()), int(st.getModificationTime()), named=True)
        except Exception as exc:  # noqa: BLE001 - a JVM error, made one line saying what to fix
            raise UsageError(explain(exc, str(root))) from None
    files = MemoryFiles({}, listing)  # companions are looked up in the listing: nothing is opened
    found = link_companions({p: found_file(p, size, mtime, ignored[p], files) for p, (size, mtime) in listing.items()})
    return [Listed(f, uris[f.path], f.read_with or formats.file_group(f.path), listing[f.path][0]) for f in found]
