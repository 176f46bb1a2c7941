"""Every rule of the detector core, declared once: thresholds, the kinds of loop episode and the order they claim
calls, the fields of a call's and a message's signals, and the tables the scan writes (``signals``,
``text_signals``, ``findings``).

The streaming reference (``detect/stream``), its live ``Guard`` and the vectorised scan (``detect/vector``) read these
names from here; tests hold the two implementations to the same rows. What a loop is, in the project's words:
docs/detectors.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from analyzer.detect.keys import REFUSED, REFUSED_NUMBER
from analyzer.detect.semantics import applies_patch, edit_family
from analyzer.tables import table

# -- signals: threshold-free, one record per call / per assistant message --------------------------------------------

# The longest block of calls a cycle signal follows. A loop is the same actions repeated with the same results,
# whatever the length of the round: an agent that reads, edits, builds, greps and reverts in a round of 8 calls and
# does it again and again is as stuck as one that repeats 2 calls, so cycles are followed up to 10 calls a round (one
# ``cycle<k>`` signal per period; a guard's replica reads the periods its source follows: 2-3 or 2-5).
MAX_PERIOD = 10
CYCLE_PERIODS: tuple[int, ...] = tuple(range(2, MAX_PERIOD + 1))
CYCLE_SIGNALS: tuple[str, ...] = tuple(f"cycle{k}" for k in CYCLE_PERIODS)

# Each signal declared once: its name (a field of ``CallSignals``, a column of the ``signals`` table), its SQL type and
# what it means. A new signal is a line here plus its computation in each engine (``stream/calls.py``,
# ``vector/calls.py``).
SIGNAL_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "streak",
        "INTEGER",
        "Identical calls (the same action: same `calls.action_key`) in a row ending here, this one included; 1 for "
        "a call unlike the one before.",
    ),
    (
        "cycle2",
        "INTEGER",
        "How many times the block of the last 2 calls repeats back to back, ending here, when the "
        "block holds 2 distinct keys; 0 otherwise. `(A B) x 3` gives 3 at its last call.",
    ),
    ("cycle3", "INTEGER", "The same for blocks of 3 calls (at least 2 distinct keys)."),
    *((f"cycle{k}", "INTEGER", f"The same for blocks of {k} calls.") for k in range(4, MAX_PERIOD + 1)),
    ("window5", "INTEGER", "Occurrences of this call's key in a window of this call and the 5 calls before it."),
    (
        "window_count",
        "INTEGER",
        "Occurrences of this call's key in this call and the 10 calls before it, as "
        "pi-anti-doom-loop counts (its repeat rule blocks at 3).",
    ),
    ("window20", "INTEGER", "Occurrences of this call's key in this call and the 20 calls before it."),
    (
        "sim_prev",
        "DOUBLE",
        "Shared-token Jaccard similarity of the arguments with the previous call, when that call "
        "used the same tool (NULL otherwise, and at the first call after a reset); the words are those of the action "
        "arguments (`calls.action_args`). Drift at another bar B: a call links to the one before when "
        "`sim_prev >= B OR streak > 1`; a drift run is a run of linked calls.",
    ),
    (
        "drift_run",
        "INTEGER",
        "Consecutive calls of this tool ending here, each identical (`streak` > 1) or near-identical (`sim_prev` "
        ">= 0.55) to the one before; 1 for a call that does not continue such a run.",
    ),
    (
        "fail_run",
        "INTEGER",
        "Consecutive failed calls of this tool ending here, this one included (another tool's "
        "call in between breaks the run); 0 when this call did not fail.",
    ),
    (
        "same_result",
        "BOOLEAN",
        "The result equals the previous identical call's result (same text after "
        "normalisation and same error flag); NULL when there was no previous identical call or either lacks a result.",
    ),
    (
        "progress",
        "BOOLEAN",
        "The call made progress: it succeeded and its result differs from the previous "
        "identical call's, or, with no identical predecessor, it changed state (a successful edit/write-like tool) or "
        "its result differs from the previous call of the same tool. False for a failure, a repeated result or a "
        "missing result.",
    ),
    (
        "nested_repeat",
        "INTEGER",
        "For a nested call: 1 + the earlier calls of the same script it repeats "
        "(identical, or the same tool with near-identical arguments), among the script's last 100; 0 for a top-level "
        "call.",
    ),
)
SIGNAL_FIELDS: tuple[str, ...] = tuple(name for name, _, _ in SIGNAL_COLUMNS)
# The signals only the call's result tells; the others are known before it (what a guard sees before the call runs).
RESULT_FIELDS: tuple[str, ...] = ("fail_run", "same_result", "progress")
PRE_FIELDS: tuple[str, ...] = tuple(f for f in SIGNAL_FIELDS if f not in RESULT_FIELDS)

# An assistant message's text counters, declared the same way (``TextSignals``, the ``text_signals`` table).
TEXT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "sentence_repeats",
        "INTEGER",
        "Rule 1: occurrences of the most repeated sentence of 16+ characters inside "
        "this message (split after `.:!?`); 0 when no sentence is that long.",
    ),
    (
        "same_count",
        "INTEGER",
        "Rule 2: messages with exactly this text (whitespace runs collapsed) among the last "
        "10 messages, this one included.",
    ),
    (
        "similar_run",
        "INTEGER",
        "Rule 3: consecutive messages ending here, each identical or >= 0.55 similar to the one before.",
    ),
    (
        "similar_count",
        "INTEGER",
        "Rule 4: the largest set of mutually similar (identical or >= 0.55) messages among "
        "the last 10 that includes this one.",
    ),
    (
        "chunk_repeats",
        "INTEGER",
        "Occurrences of the most repeated 50-character chunk (any offset) in this "
        "message's last 5000 characters, fenced code removed (Gemini CLI's content rule counts to 10); 0 for text "
        "shorter than 50 characters.",
    ),
)
TEXT_FIELDS: tuple[str, ...] = tuple(name for name, _, _ in TEXT_COLUMNS)

_PYTHON_TYPES = {"INTEGER": int, "DOUBLE": float | None, "BOOLEAN": bool | None}


def _record(name: str, columns: tuple[tuple[str, str, str], ...], doc: str, unknown: tuple[str, ...] = ()) -> type:
    """A NamedTuple of the columns, in their order, typed by their SQL types (``unknown``: None until known)."""
    fields = [(n, _PYTHON_TYPES[sql] | None if n in unknown else _PYTHON_TYPES[sql]) for n, sql, _ in columns]
    record = NamedTuple(name, fields)  # type: ignore[misc]
    record.__doc__ = doc
    return record


CallSignals = _record(
    "CallSignals",
    SIGNAL_COLUMNS,
    "A call's signals (the columns of the ``signals`` table). Before the result, "
    "``fail_run``, ``same_result`` and ``progress`` are None.",
    RESULT_FIELDS,
)
TextSignals = _record(
    "TextSignals", TEXT_COLUMNS, "An assistant message's text counters (the columns of the ``text_signals`` table)."
)

SIMILARITY = 0.55  # the shared-token bar (docs/detectors.md#the-shared-token-score)
SCRIPT_MEMORY = 100  # pi keeps each script's last 100 calls
WINDOWS = (5, 10, 20)  # window5, window_count (this call and the 10 before it), window20
TEXT_WINDOW = 10  # the current message and the 9 before it
MIN_SENTENCE = 16  # pi's MIN_REPEAT_CHUNK: shorter segments ("Error.") never count
CHUNK = 50  # Gemini CLI's CONTENT_CHUNK_SIZE
CHUNK_HISTORY = 5000  # Gemini CLI's MAX_HISTORY_LENGTH: only the last 5000 characters are compared

# A successful call of one of these tools changed something, even when its result text repeats ("edited file x").
# A heuristic on the tool name (Claude Edit/MultiEdit/Write/NotebookEdit, pi edit/write, Codex apply_patch, ...):
# a shell command that edits files is not recognised, so its progress is judged by its result like any other call.
MUTATING_TOOL = re.compile(r"edit|write|patch|replace|insert|create|delete|remove|rename|move|mkdir", re.I)
_mutating_cache: dict[str, bool] = {}


def is_mutating(tool: str) -> bool:
    """Whether a successful call of ``tool`` counts as a change of state (see ``MUTATING_TOOL``)."""
    m = _mutating_cache.get(tool)
    if m is None:
        m = _mutating_cache[tool] = bool(MUTATING_TOOL.search(tool))
    return m


def failure_key(tool: str, is_error: bool | None, result_key: Any, args: str | None = None) -> tuple[str, Any] | None:
    """What makes failed changes of one target alike: a change (a change-making tool, ``is_mutating``, or a patch
    applied through a shell, ``semantics.applies_patch``) refused with the same result, or any call refused for
    permission (``keys.REFUSED``: one change sent through Edit, an MCP ``edit_file`` and ``sed -i`` meets one wall).
    An Edit and a MultiEdit are one tool here (``semantics.EDIT_FAMILY``).
    Such calls recurring within a window, with only looks in between, are one blind retry whatever their text (an
    Edit refused "modified since read" after each Read); the judgement then requires one target
    (``judge._failure_runs``). ``args``: the call's canonical arguments."""
    if not is_error or result_key is None:
        return None
    if result_key == REFUSED or result_key == REFUSED_NUMBER:
        return (REFUSED_TOOL, result_key)
    return (edit_family(tool), result_key) if is_mutating(tool) or applies_patch(args) else None


REFUSED_TOOL = "\x00refused"  # the tool a permission refusal's failure key names: any tool


# -- findings: episodes built from the signals ------------------------------------------------------------------------

MIN_REPEATS = 3
MIN_NESTED = 2
MIN_CHUNKS = 10
WINDOW = 10
LABEL_CHARS = 160
# One shared word says only that the same program ran (`sed -n '1,200p' a.ts` and `... b.ts` share just `sed`: the
# paths carry punctuation and do not count), so a drift link needs two.
MIN_SHARED_WORDS = 2
# Short filler ("Let me look.", "Next, the tests.") recurs in healthy work; a text loop needs a message with at least
# this many shared-token words (and two consecutive replies that say the same thing, this many words of prose each).
MIN_TEXT_WORDS = 4
# ... but a short message is degenerate too when it is the whole reply of many consecutive steps that change nothing
# ("Continuing." as the only text of step after step): said once or twice before a step it is filler, said this many
# times in a row, word for word, it is the same reply again and again (docs/detectors.md#the-definition). Short
# replies repeated as a block (A B A B ...) need as many rounds.
MIN_SHORT_REPEATS = 5
# Two consecutive replies say the same thing when the words of their prose are at least this similar (shared-token
# Jaccard): a higher bar than ``SIMILARITY``, as the judgement keeps only degenerate generation.
SAME_REPLY = 0.8
# A harness's format refusal says exactly what to fix; a few resends while the model restructures a multi-step reply
# are friction (the labelled real runs show 2-4, then a good reply). Refused again and again, it is stuck.
MIN_FORMAT_REFUSALS = 5
RESULT_HEAD = (
    4000  # characters of a result the findings rules compare (the scan reads no more, and only for candidates)
)
# The signals a call episode needs past 2 at some call of its user turn (streak, cycles, the window count of W = 10,
# drift and failure runs): the engines look for call episodes only in such "hot" turns.
HOT_SIGNALS = ("streak", *CYCLE_SIGNALS, "window_count", "drift_run", "fail_run")


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of loop episode (a value of ``findings.kind``), declared once: the report's title and colour for it,
    when its candidates claim calls, and what it is in one line (the ``findings`` table's doc and docs/detectors.md
    read it). Its judgement is ``judge.CALL_JUDGES[name]`` (``judge_text`` for ``text``)."""

    name: str
    title: str
    color: str
    # Call episodes claim calls in this rank, lowest first, so no call belongs to two; None: the kind claims none
    # (nested calls and messages lie outside the top-level claiming).
    claim: int | None
    doc: str


LOOP_KINDS: tuple[Kind, ...] = (
    Kind(
        "streak", "Identical calls in a row", "#e15759", 3, f"{MIN_REPEATS}+ identical calls (the same action) in a row"
    ),
    Kind(
        "cycle",
        "Cycle",
        "#f28e2b",
        1,
        f"a block of 2-{MAX_PERIOD} calls with 2+ distinct keys repeated {MIN_REPEATS}+ times",
    ),
    Kind(
        "window",
        "Repeats in a window",
        "#b07aa1",
        5,
        f"one call recurring {MIN_REPEATS}+ times, each within {WINDOW} calls of the one before and {MIN_REPEATS} of "
        f"them within a window of {WINDOW}, with no successful edit in between",
    ),
    Kind(
        "drift",
        "Near-identical arguments",
        "#17becf",
        2,
        f"{MIN_REPEATS}+ consecutive calls of one tool, each identical or near-identical to the one before and at "
        f"least one not identical, sharing {MIN_SHARED_WORDS}+ words",
    ),
    Kind("failure", "Repeated failure", "#8c2d2d", 4, f"{MIN_REPEATS}+ consecutive failures of one tool"),
    Kind(
        "text",
        "Repeated assistant text",
        "#4e79a7",
        None,
        f"{MIN_REPEATS}+ consecutive repeated or similar messages of {MIN_TEXT_WORDS}+ words (a shorter one "
        f"{MIN_SHORT_REPEATS}+ times word for word, with no progress), a block of messages repeated word for word "
        f"{MIN_REPEATS}+ times, or one message repeating a sentence {MIN_REPEATS}+ times or a {CHUNK}-char chunk "
        f"{MIN_CHUNKS}+ times",
    ),
    Kind("nested", "Repeats inside a script", "#9c755f", None, f"a call repeated inside one script, {MIN_NESTED}+"),
    # Not a loop: the process, not the agent, decides when a wait ends. Found in the streak, window, drift and cycle
    # candidates it would otherwise be (so it claims their calls in their rank); never stuck, so its cost is shown
    # (``repeat_tokens``) and never counted as waste, and a guard that halts it is a false halt.
    Kind(
        "waiting",
        "Waiting on a running process",
        "#76b7b2",
        None,
        f"{MIN_REPEATS}+ polls of a process that is still running (a background shell, a CI run, a session, a "
        "spawned agent), up to the poll that says it ended; never stuck, never waste",
    ),
)
# The kind that is never a loop: never stuck, never waste, never a loop a guard should catch (a halt on it is false).
WAITING = "waiting"
KINDS: tuple[str, ...] = tuple(k.name for k in LOOP_KINDS)  # the values of findings.kind
# The kinds that claim calls, in their claim order.
CLAIMS: tuple[str, ...] = tuple(
    name for _, name in sorted((k.claim, k.name) for k in LOOP_KINDS if k.claim is not None)
)
# The runs of links call episodes are found in, in claim order: cycles by period (smallest first, so (A B) x 6 is
# one 2-cycle and not also a 4-cycle), then one run per kind; window, claimed last, is found by chains of one call
# over the calls left, not by runs. Drift is offered before streak: a run that mixes identical and drifted repeats
# (``sleep 5 && curl …`` twice, then with ``--max-time``) is one loop, not a streak and some leftovers; a run of
# identical calls only is never a drift, and stays for streak.
CLAIM_ORDER = (*CYCLE_SIGNALS, "drift", "streak", "failure")


def period_of(run: str) -> int | None:
    """The period of a run of ``CLAIM_ORDER`` (``cycle7`` -> 7); None for the other runs."""
    return int(run[5:]) if run.startswith("cycle") else None


_ORDINALS = {1: "st", 2: "nd", 3: "rd"}


def kinds_table() -> str:
    """The kinds as a markdown table; docs/detectors.md holds it between ``<!-- kinds:start -->`` and
    ``<!-- kinds:end -->`` (tests/test_kinds.py keeps the two equal)."""
    rows = ["| kind | what it is | claims calls | report title | colour |", "|---|---|---|---|---|"]
    for k in LOOP_KINDS:
        claim = f"{k.claim}{_ORDINALS.get(k.claim, 'th')}" if k.claim is not None else "no"
        if k.name == WAITING:
            claim = "as the kind it is found in"
        rows.append(f"| `{k.name}` | {k.doc} | {claim} | {k.title} | `{k.color}` |")
    return "\n".join(rows)


# -- the tables the scan writes ---------------------------------------------------------------------------------------

SIGNALS = table(
    "signals",
    "One row per call: what the detector core saw at that call, from the calls before it (and the call itself) only, "
    "so a signal is exactly what a runtime guard would have seen then. Threshold-free: a policy is thresholds over "
    "these columns, and calibration sweeps them without rescanning. Counters restart at each user prompt (unless "
    "scanned with `--no-reset-on-user`). A nested call (made inside a script) never enters the top-level counters: "
    "its top-level columns are 0 and `nested_repeat` counts it inside its script.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("seq", "INTEGER", "`calls.seq`."),
    ("call_id", "VARCHAR", "`calls.call_id`."),
    ("turn_id", "VARCHAR", "`calls.turn_id`: the assistant message that issued the call."),
    ("user_turn", "INTEGER", "`calls.user_turn`."),
    ("tool", "VARCHAR", "`calls.tool`."),
    ("nested", "BOOLEAN", "The call was made inside a script (`calls.parent_call_id` set)."),
    *SIGNAL_COLUMNS,
    ("est_tokens", "INTEGER", "~4 characters per token of the call's arguments plus its result."),
    (
        "finding_id",
        "VARCHAR",
        "The finding (loop episode) the call belongs to, if any. Not a streaming signal: "
        "assigned once the session's episodes are known.",
    ),
)

TEXT_SIGNALS = table(
    "text_signals",
    "One row per assistant message with visible text (blank, tool-only messages are not recorded): the counters of "
    "the text-loop rules (docs/detectors.md#the-text-loop-rules), from that message and the ones before it in the "
    "user turn.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("turn_id", "VARCHAR", "`turns.turn_id` of the message."),
    ("turn_index", "INTEGER", "`turns.turn_index` of the message."),
    ("user_turn", "INTEGER", "`turns.user_turn`."),
    *TEXT_COLUMNS,
    ("est_tokens", "INTEGER", "~4 characters per token of the message text."),
    ("finding_id", "VARCHAR", "The text finding the message belongs to, if any."),
)

FINDINGS = table(
    "findings",
    "One row per loop episode: a maximal run of calls (or messages) inside one user turn held together by one "
    "pattern. A call belongs to at most one call episode (claimed in the order " + ", ".join(CLAIMS) + "). "
    "`loopscope findings --format json` prints these fields.",
    ("finding_id", "VARCHAR", "Stable id: a hash of session, kind and where the episode starts."),
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("kind", "VARCHAR", ", ".join(f"`{k.name}` ({k.doc})" for k in LOOP_KINDS) + "."),
    (
        "period",
        "INTEGER",
        "Cycle length: the block size for `cycle`, 1 for `streak`, NULL for the other kinds; for `waiting`, that of "
        "the candidate it was found in (1 for identical polls, the block size for polls alternating with a wait).",
    ),
    ("tools", "VARCHAR[]", "Tools of the episode's calls, in order of first use."),
    (
        "call_ids",
        "VARCHAR[]",
        "The transcript's own ids of the episode's calls, in order; for `text`, the calls "
        "issued by the looping messages.",
    ),
    ("first_seq", "INTEGER", "`calls.seq` of the first call (NULL for a text episode without calls)."),
    ("last_seq", "INTEGER", "`calls.seq` of the last call."),
    (
        "repeats",
        "INTEGER",
        "How many times the pattern occurred: calls in a streak, drift, failure or window chain; "
        "full blocks of a cycle; calls in a nested cluster; messages in a text loop, or the repeats of a sentence "
        "(chunk) inside one message.",
    ),
    (
        "stuck",
        "BOOLEAN",
        "No repeat made progress: each returned the same result as before (numbers aside) or failed "
        "the same way, on the same object, with no change of state in between. False for a poll whose result changed "
        "or for edits that each succeeded.",
    ),
    ("user_turn", "INTEGER", "The user turn the episode belongs to."),
    ("why", "VARCHAR", "One line a person reads: what repeated, on what, and why it is (or is not) stuck."),
    (
        "wasted_tokens",
        "BIGINT",
        "Measured: `repeat_tokens` (below) when the episode was stuck, 0 when its repeats "
        "made progress: only stuck loops are waste.",
    ),
    (
        "estimated_tokens",
        "BIGINT",
        "~4 characters per token of the repeated calls' arguments and results (of the "
        "repeated messages' text), for transcripts without usage.",
    ),
    ("cost_usd", "DOUBLE", "Cost of the turns counted in `wasted_tokens` (0 when not stuck)."),
    (
        "repeat_tokens",
        "BIGINT",
        "Measured, for every finding: the usage of the assistant turns that issued the "
        "episode's calls after its first occurrence (after the first full block of a cycle, after the first message of "
        "a text loop), each turn counted once and only its deduplicated usage (`turns.usage_counted`); turns that also "
        "issued the first occurrence are not counted.",
    ),
    ("repeat_cost_usd", "DOUBLE", "Cost of the turns counted in `repeat_tokens`."),
    ("first_turn_index", "INTEGER", "`turns.turn_index` of the first message involved."),
    ("last_turn_index", "INTEGER", "`turns.turn_index` of the last message involved."),
    ("turn_ids", "VARCHAR[]", "The turns counted in `wasted_tokens` (to deduplicate across findings)."),
    (
        "repeated",
        "VARCHAR",
        "What repeats: the first call (`tool` + arguments) or block of calls, or the message "
        "text; truncated to 160 characters.",
    ),
)

SCAN_OUTPUT_TABLES = (SIGNALS, TEXT_SIGNALS, FINDINGS)
