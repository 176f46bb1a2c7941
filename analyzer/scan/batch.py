"""One group of sessions through the vectorised detectors: polars frames in, the rows of the scan's tables out.

No DuckDB here: ``analyzer.scan_io`` reads the store and lands the results; this module runs the call signals
(``detect.vector.calls``), the text counters (``detect.vector.text``) and the episodes (``detect.vector.episodes``) over
the whole group at once, and shapes the output tables. The streaming core (``detect.stream.calls``,
``detect.stream.text``) is the reference a live agent embeds; the tests hold both to the same output.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import polars as pl

from analyzer.detect.rules import FINDINGS, SIGNAL_FIELDS, SIGNALS, TEXT_FIELDS, TEXT_SIGNALS
from analyzer.detect.stream.calls import Config
from analyzer.detect.vector.calls import call_signals
from analyzer.detect.vector.episodes import HeadsFn, TurnsFn, find_episodes
from analyzer.detect.vector.text import text_signals
from analyzer.store.schema import Table


def scan_group(
    sessions: pl.DataFrame, calls: pl.DataFrame, turns: pl.DataFrame, config: Config, heads: HeadsFn, turn_info: TurnsFn
) -> dict[str, pl.DataFrame]:
    """Scan a group of sessions. ``sessions``: ``session_id, fingerprint``; ``calls`` and ``turns`` (assistant
    messages) as ``scan_io.read_group`` reads them; ``heads`` and ``turn_info`` read what findings need from the
    store (``detect.vector.episodes``). Returns the rows of ``signals``, ``text_signals``, ``findings`` and
    ``scan_state``."""
    with ThreadPoolExecutor(1) as pool:  # two independent polars jobs: they overlap where either runs one thread
        texts_job = pool.submit(
            text_signals, turns.select("session_id", "user_turn", "text"), config.similarity, config.reset_on_user
        )
        cf = call_signals(calls, config)
        tf = texts_job.result()
    calls = pl.concat([calls, cf.signals, cf.shared.alias("shared").to_frame()], how="horizontal")
    texts = (
        turns.with_row_index("row")
        .with_columns(pl.col("row").cast(pl.Int64))
        .join(tf.signals, on="row", how="left", maintain_order="left")
        .drop("row")
    )
    ep = find_episodes(calls, texts, cf.links, tf.links, heads, turn_info)
    signals = calls.with_columns(
        pl.col("parent_call_id").is_not_null().alias("nested"), ep.call_finding.alias("finding_id")
    )
    text_rows = texts.with_columns(ep.message_finding.alias("finding_id")).filter(pl.col(TEXT_FIELDS[0]).is_not_null())
    findings = ep.findings
    state = (
        sessions.join(_counts(signals, "calls"), on="session_id", how="left", maintain_order="left")
        .join(_counts(text_rows, "texts"), on="session_id", how="left", maintain_order="left")
        .join(_counts(findings, "findings"), on="session_id", how="left", maintain_order="left")
    )
    return {
        "signals": _shape(signals, SIGNALS),
        "text_signals": _shape(text_rows, TEXT_SIGNALS),
        "findings": _shape(findings, FINDINGS),
        "scan_state": state.select(
            "session_id",
            "fingerprint",
            *[pl.col(c).fill_null(0).cast(pl.Int32) for c in ("calls", "texts", "findings")],
        ),
    }


def _counts(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    return frame.group_by("session_id").len(name)


def _shape(frame: pl.DataFrame, table: Table) -> pl.DataFrame:
    """The table's columns, in order, with its types."""
    return frame.select([pl.col(c.name).cast(c.polars) for c in table.columns])


assert set(SIGNAL_FIELDS) <= set(SIGNALS.names) and set(TEXT_FIELDS) <= set(TEXT_SIGNALS.names)
