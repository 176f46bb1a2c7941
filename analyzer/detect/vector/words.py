"""The shared-token words (docs/detectors.md#the-shared-token-score) as polars expressions, for a whole column of
texts at once.

The streaming core tokenises one call at a time in Python (``keys.fast_token_set``, ``keys.args_token_set``); the
batch scan needs the same sets for every call and message of a group, so it computes them here, in Rust, with a few
regex passes. Both must give exactly the same sets (tests/test_detect_vector.py pins it with hypothesis):

- whitespace is what Python's ``str.split()`` splits on: Unicode White_Space plus U+001C..U+001F, spelled out;
- a word survives when every character is in ``[A-Za-z0-9_-]`` or the Kelvin sign (the one other character whose
  Python ``lower()`` is a word character), so words are filtered first and lower-cased after;
- call arguments are canonical JSON (``calls.args``): keys dropped, string values unquoted and unescaped just enough
  to know which escapes are whitespace, ``null`` dropped, integers kept as written. What Python would print
  differently from the JSON text (floats, integers past 64 bits, NaN) or anything unexpected is flagged by
  ``args_needs_python`` and left to ``keys.args_token_set``: rare, and exact by definition.
"""

from __future__ import annotations

import polars as pl

_WS = (
    "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
    "\\x{205f}\\x{3000}"
)
_WORD_CHARS = "A-Za-z0-9_\\-\\x{212A}"
# A whitespace-delimited word holding at least one character that is not a word character: dropped whole.
_BAD_WORD = f"[^{_WS}]*[^{_WORD_CHARS}{_WS}][^{_WS}]*"
_WS_RUN = f"[{_WS}]+"


def words(text: pl.Expr) -> pl.Expr:
    """``fast_token_set`` of each text, as a list of distinct words (order unspecified)."""
    return (
        text.fill_null("")
        .str.replace_all(_BAD_WORD, " ")
        .str.to_lowercase()
        .str.extract_all("[a-z0-9_-]{3,}")
        .list.unique()
    )


def normalize(text: pl.Expr) -> pl.Expr:
    """``" ".join(text.split())``: whitespace runs collapsed to one space, ends trimmed (None becomes "")."""
    return text.fill_null("").str.replace_all(_WS_RUN, " ").str.strip_chars(" ")


def _quotes_only(args: pl.Expr) -> pl.Expr:
    r"""Canonical JSON with the escapes that hide a quote or a backslash (and ``\/``, ``\b``) turned into a non-word
    character, so every remaining ``"`` delimits a string. Leftmost-first matching consumes an escaped backslash
    before the character after it could be read as an escape, as a JSON parser does."""
    return args.fill_null("").str.replace_all(r'\\[\\"/b]', "\x01")


def args_text(args: pl.Expr) -> pl.Expr:
    """The argument values of canonical JSON joined by spaces (``keys.args_text`` up to word order, on the rows
    ``args_needs_python`` does not flag). Once quotes are unambiguous, a left-to-right pass meets every string at
    its opening quote: strings (a key with its colon), integers and booleans are picked out in order, ``null`` and
    structure left behind, keys dropped; then the escapes that decode to whitespace become a space, the others a
    non-word character. No capture groups: they make a regex pass several times slower."""
    return (
        _quotes_only(args)
        .str.extract_all(r'"[^"]*":?|-?[0-9]+|true|false')
        .list.eval(pl.element().filter(~pl.element().str.ends_with('":')))
        .list.join(" ")
        .str.replace_all('"', " ", literal=True)
        .str.replace_all(r"\\[nrtf]|\\u00(?:0[9a-dA-D]|1[c-fC-F])", " ")
        .str.replace_all(r"\\u00[01][0-9a-fA-F]", "\x01")
    )


def args_needs_python(args: pl.Expr) -> pl.Expr:
    """Rows whose words ``args_text`` cannot vouch for: a float, an integer of 19+ digits, a literal other than
    true/false/null, a raw control character, or a ``\\u`` escape of a printable character."""
    bare = _quotes_only(args).str.replace_all(r'"[^"]*"', "").str.replace_all("true|false|null", "")
    return bare.str.contains(r"[^-0-9{}\[\],:]|[0-9][.eE]|[0-9]{19}") | args.fill_null("").str.contains(
        r"[\x00-\x1f]|\\u(?:[^0]|0[^0]|00[^01])"
    )


def args_words(args: pl.Expr) -> pl.Expr:
    """``keys.args_token_set`` of each canonical argument JSON, except on rows ``args_needs_python`` flags."""
    return words(args_text(args))


def args_words_series(args: pl.Series) -> pl.Series:
    """``args_words`` with the flagged rows computed by the reference function: exact on every row."""
    from analyzer.detect.keys import args_token_set

    frame = (
        pl.DataFrame({"a": args})
        .lazy()
        .with_columns(  # lazy: both share the unescaped quotes (CSE)
            args_words(pl.col("a")).alias("w"), args_needs_python(pl.col("a")).alias("py")
        )
        .collect()
    )
    flagged = frame["py"].arg_true()
    if not len(flagged):
        return frame["w"].alias(args.name)
    fixed = pl.DataFrame(
        {
            "i": flagged,
            "f": pl.Series(
                [sorted(args_token_set(a) if a else ()) for a in frame["a"].gather(flagged).to_list()],
                dtype=pl.List(pl.String),
            ),
        }
    )
    return (
        frame.with_row_index("i")
        .join(fixed, on="i", how="left", maintain_order="left")
        .select(pl.coalesce("f", "w").alias(args.name))
        .to_series()
    )
