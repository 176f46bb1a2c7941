"""The text-loop counters of a whole group of sessions at once: the batch scan's form of ``text.TextDetector``.

An independent implementation (a property test requires equal output). Each non-blank message is compared with the
(up to) 9 non-blank messages before it in its scope, d = 1..9 back: identical text by shifted comparison, similar
(shared-token Jaccard at the bar) by set intersection, only for the pairs that pass the size pre-check the streaming
detector makes. The counters are aggregates of the alike pairs: ``same_count`` and ``similar_count`` count them,
``similar_run`` is the run of messages alike to the one just before. Only a message whose several matches are not
all one text needs the largest mutually similar set, found by trying subsets of its (at most 9) matches.

Per-message rules are vectorised too: sentences are the pieces ending in ``.:!?``; 50-character chunks of short
messages are counted exactly only where an aligned 25-character block recurs (a repeated chunk always contains one),
every other message has one of each chunk; long messages use the reference function (see ``_chunk_repeats``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import polars as pl

from analyzer.detect.rules import CHUNK, CHUNK_HISTORY, MIN_SENTENCE, TEXT_FIELDS, TEXT_SIGNALS, TEXT_WINDOW
from analyzer.detect.stream.text import chunk_repeats
from analyzer.detect.vector.frames import ROW, changed, pos_in_segment, row_index, run_len, scope_starts
from analyzer.detect.vector.words import normalize, words

SCHEMA = {c.name: c.polars for c in TEXT_SIGNALS.columns if c.name in TEXT_FIELDS}
SHORT_TEXT = 600  # characters (after fences and the 5000-character cut) up to which chunks are counted in bulk


@dataclass
class TextFrames:
    """Counters for each non-blank message (``row``: its row in the input frame, then ``TEXT_FIELDS``, then
    ``n_words``: its distinct shared-token words, which text episodes need 4 of) and the links: message ``row``
    equals or resembles the earlier message ``partner`` of its window."""

    signals: pl.DataFrame
    links: pl.DataFrame


def text_signals(messages: pl.DataFrame, similarity: float = 0.55, reset_on_user: bool = True) -> TextFrames:
    """Counters of every non-blank message; equal, message for message, to ``text.scan_texts`` per session.
    ``messages``: ``session_id, user_turn, text``, sorted by session, then turn_index."""
    f = messages.with_columns(row_index()).select(
        pl.col(ROW).alias("row"),
        "text",
        normalize(pl.col("text")).alias("norm"),
        scope_starts("session_id", "user_turn", reset_on_user).cum_sum().alias("scope"),
    )
    f = f.filter(pl.col("norm") != "").with_columns(row_index())
    f = f.with_columns(pos_in_segment(changed("scope")).alias("j"), words(pl.col("norm")).alias("tok"))
    f = f.with_columns(pl.col("tok").list.len().alias("n"))
    back = TEXT_WINDOW - 1
    eq = [(pl.col("j") >= d) & (pl.col("norm") == pl.col("norm").shift(d)).fill_null(False) for d in range(1, back + 1)]
    f = f.with_columns(*[e.alias(f"_eq{d}") for d, e in enumerate(eq, 1)])
    alike = _alike_pairs(f, similarity, back)
    per = alike.group_by(ROW).agg(pl.len().alias("_alike"), (pl.col("d") == 1).any().alias("_last_alike"))
    f = f.join(per, on=ROW, how="left", maintain_order="left").with_columns(
        pl.col("_alike").fill_null(0), pl.col("_last_alike").fill_null(False)
    )
    f = f.with_columns(
        _sentence_repeats(f).alias("sentence_repeats"),
        (1 + pl.sum_horizontal([f"_eq{d}" for d in range(1, back + 1)])).alias("same_count"),
        (1 + run_len(pl.col("_last_alike"))).alias("similar_run"),
        (1 + pl.col("_alike")).alias("similar_count"),
        _chunk_repeats(f).alias("chunk_repeats"),
    )
    several = alike.join(f.filter(pl.col("_alike") > 1).select(ROW), on=ROW, how="semi")
    if several.height:
        f = f.update(_clique_counts(several, f, similarity), on=ROW)
    rows = f["row"]
    links = pl.DataFrame({"row": rows.gather(alike[ROW]), "partner": rows.gather(alike[ROW] - alike["d"])})
    signals = f.select("row", *[pl.col(c).cast(SCHEMA[c]) for c in TEXT_FIELDS], pl.col("n").alias("n_words"))
    return TextFrames(signals, links.sort(["row", "partner"]))


def _alike_pairs(f: pl.DataFrame, bar: float, back: int) -> pl.DataFrame:
    """(message, d) for each earlier message of its window, d back, that it equals (``_eq{d}``) or resembles: both
    have words, the smaller set is at least ``bar`` times the larger, and the Jaccard reaches ``bar``."""
    n = pl.col("n")
    parts = []
    for d in range(1, back + 1):
        m = n.shift(d)
        sized = (pl.col("j") >= d) & (n > 0) & (m > 0) & ~(pl.min_horizontal(n, m) < bar * pl.max_horizontal(n, m))
        parts.append(f.filter(sized.fill_null(False) & ~pl.col(f"_eq{d}")).select(ROW, pl.lit(d).alias("d")))
    check = pl.concat(parts)
    tok = f["tok"]
    a, b = tok.gather(check[ROW]), tok.gather(check[ROW] - check["d"])
    inter = a.list.set_intersection(b).list.len()
    similar = check.filter(inter / (a.list.len() + b.list.len() - inter) >= bar)
    same = pl.concat([f.filter(f"_eq{d}").select(ROW, pl.lit(d).alias("d")) for d in range(1, back + 1)])
    return pl.concat([same, similar]).sort([ROW, "d"])


def _clique_counts(alike: pl.DataFrame, f: pl.DataFrame, bar: float) -> pl.DataFrame:
    """``similar_count`` of messages whose several matches are not all one text (one text: every match counts):
    1 + the largest subset of the matches that are mutually alike (identical, or Jaccard at the bar)."""
    matched = alike.with_columns((pl.col(ROW) - pl.col("d")).alias("_p"))
    matched = matched.with_columns(f["norm"].gather(matched["_p"]).alias("_norm"))
    mixed = matched.group_by(ROW).agg(pl.col("_norm").n_unique().alias("_texts")).filter(pl.col("_texts") > 1)
    matched = matched.filter(pl.col(ROW).is_in(mixed[ROW].implode()))
    matched = matched.with_columns(f["tok"].gather(matched["_p"]).alias("_tok"))
    out_rows, out_counts = [], []
    for row, norms, toks in matched.group_by(ROW, maintain_order=True).agg("_norm", "_tok").iter_rows():
        out_rows.append(row)
        out_counts.append(1 + _largest_alike_subset(list(zip(norms, map(frozenset, toks))), bar))
    return pl.DataFrame(
        {ROW: out_rows, "similar_count": out_counts}, schema={ROW: pl.Int64, "similar_count": f.schema["similar_count"]}
    )


def _largest_alike_subset(items: list[tuple[str, frozenset[str]]], bar: float) -> int:
    def alike(a: tuple[str, frozenset[str]], b: tuple[str, frozenset[str]]) -> bool:
        if a[0] == b[0]:
            return True
        if not a[1] or not b[1]:
            return 0.0 >= bar
        inter = len(a[1] & b[1])
        return inter / (len(a[1]) + len(b[1]) - inter) >= bar

    n = len(items)
    ok = {(i, j): alike(items[i], items[j]) for i in range(n) for j in range(i + 1, n)}
    for size in range(n, 1, -1):
        for subset in combinations(range(n), size):
            if all(ok[i, j] for i, j in combinations(subset, 2)):
                return size
    return 1 if n else 0


def _sentence_repeats(f: pl.DataFrame) -> pl.Series:
    """Rule 1 over the normalised text: 0 below 16 characters, 1 without ``.:!?``, else the count of the most
    repeated piece (split after ``.:!?``, trimmed, trailing mark dropped) of 16+ characters, 0 when none is."""
    norm = pl.col("norm")
    long_enough = norm.str.len_chars() >= MIN_SENTENCE
    has_mark = norm.str.contains("[.:!?]")
    split = (
        f.filter(long_enough & has_mark)
        .select(ROW, norm.str.extract_all(r"[^.:!?]*[.:!?]|[^.:!?]+").alias("s"))
        .explode("s")
    )
    split = split.with_columns(pl.col("s").str.strip_chars(" ").str.strip_chars_end(".:!?"))
    counts = (
        split.filter(pl.col("s").str.len_chars() >= MIN_SENTENCE)
        .group_by(ROW, "s")
        .len()
        .group_by(ROW)
        .agg(pl.col("len").max().alias("_best"))
    )
    out = f.select(ROW, long_enough.alias("_long"), has_mark.alias("_mark")).join(
        counts, on=ROW, how="left", maintain_order="left"
    )
    return out.select(
        pl.when(~pl.col("_long")).then(0).when(~pl.col("_mark")).then(1).otherwise(pl.col("_best").fill_null(0))
    ).to_series()


def _chunk_repeats(f: pl.DataFrame) -> pl.Series:
    """The most repeated 50-character chunk in the last 5000 characters of the text, fenced code removed: 0 below
    50 characters; for ASCII texts up to ``SHORT_TEXT``, 1 unless some aligned 25-character block also occurs
    before its own place (which a repeated chunk implies: its copy further on holds an aligned block), else counted
    exactly. Other texts go to ``text.chunk_repeats`` one by one: counting every offset in bulk costs memory
    quadratic in the length, which the reference's in-place search does not."""
    text = pl.col("text").str.replace_all(r"(?s)```.*?(?:```|$)", "\n").str.slice(-CHUNK_HISTORY)
    t = f.select(ROW, "text", text.alias("t")).with_columns(pl.col("t").str.len_chars().alias("len"))
    half = CHUNK // 2
    ascii = pl.col("len") == pl.col("t").str.len_bytes()  # ``str.find`` answers in bytes, slices count characters
    bulk = ascii & (pl.col("len") <= SHORT_TEXT)
    short = t.filter((pl.col("len") >= CHUNK) & bulk)
    blocks = (
        short.select(ROW, "t", pl.int_ranges(0, pl.col("len") - half + 1, half).alias("a"))
        .explode("a")
        .drop_nulls("a")
        .with_columns(pl.col("t").str.slice(pl.col("a"), half).alias("block"))
    )
    earlier = pl.col("t").str.find(pl.col("block"), literal=True) < pl.col("a")
    repeating = blocks.filter(earlier).select(ROW).unique()
    exact = (
        short.join(repeating, on=ROW, how="semi")
        .select(ROW, "t", pl.int_ranges(0, pl.col("len") - CHUNK + 1).alias("o"))
        .explode("o")
        .select(ROW, pl.col("t").str.slice(pl.col("o"), CHUNK).alias("c"))
        .group_by(ROW, "c")
        .len()
        .group_by(ROW)
        .agg(pl.col("len").max().alias("_best"))
    )
    long = t.filter((pl.col("len") >= CHUNK) & ~bulk)
    if long.height:
        exact = pl.concat(
            [
                exact,
                long.select(
                    ROW, pl.Series("_best", [chunk_repeats(x or "") for x in long["text"].to_list()], pl.UInt32)
                ),
            ],
            how="vertical_relaxed",
        )
    out = t.join(exact, on=ROW, how="left", maintain_order="left")
    return out.select(pl.when(pl.col("len") < CHUNK).then(0).otherwise(pl.col("_best").fill_null(1))).to_series()
