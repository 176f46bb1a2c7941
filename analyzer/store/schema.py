"""The store's tables, declared once: DDL, the Arrow schema of ingest batches, and the README's column docs all come
from here, so they cannot drift apart (tests/test_readme.py checks the README against this file)."""

from __future__ import annotations

from analyzer.detect.rules import FINDINGS, SIGNALS, TEXT_SIGNALS
from analyzer.tables import Table
from analyzer.tables import table as _t

# 2: findings gained repeat_tokens, repeat_cost_usd and why; 3: XXH3 keys and file hashes, calls.result_chars;
# 4: calls.action_key and calls.action_args (the semantics table), result keys without Gemini CLI's process ids;
# 5: arguments as the model emitted them (SWE-agent's submit arguments, exact actions, the model's own tool calls and
# the open file of window commands; OpenHands' security_risk; a Claude Code subagent's replayed lines read once);
# 6: signals cycle6 .. cycle10 (cycles of up to ``rules.MAX_PERIOD`` calls; the derived tables are rebuilt)
# 7: Codex code mode: a cell's action key is its tool call's (``semantics.code_action``), and a printed answer's
#    chunk id and wall time are no part of a result key; Zed's `mcp__acp__Bash` and the like are keyed as the Claude
#    Code tools they stand for (the keys change: stores are rebuilt)
# 8: shell action keys without a report tail (``|| echo …``, ``; echo $?``), shell options (``set -eo pipefail;``) or
#    an output captured and printed back (``> F 2>&1; cat F``), and with ``cd DIR && CMD rel/path`` as ``CMD
#    DIR/rel/path``; Codex's "failed in sandbox" is an error (the keys change: stores are rebuilt)
# 9: a tool result's images are part of its text, each a line with a digest of its data (``base.result_text_of``), so
#    two screenshots are the same result only when their images are (result keys change: stores are rebuilt)
# 10: every permission refusal has one result key (``keys.REFUSED``), whatever its words and tool (result keys change:
#    stores are rebuilt)
# 11: an older Codex's refusal of a patch run through its shell ("error: Failed to find expected lines", "error:
#    invalid hunk") is an error (result keys change: stores are rebuilt)
# 12: every edit refused because the text it sent is not in the file has one result key (``keys.NOT_FOUND``), as
#    permission refusals have; Claude Code's "Tool permission request failed" is a permission refusal (result keys
#    change: stores are rebuilt)
# 13: a shell action key without the label echoes among its steps (``echo "🔧 Adding the server..."``: commentary, as
#    a ``description`` is; ``semantics._without_labels``) (the keys change: stores are rebuilt)
SCHEMA_VERSION = 13
# The first schema whose keys this loopscope can use (v4 read some calls' arguments lossily, v3 and older hold no
# action keys, and before v3 the keys are MD5, which must never meet the new ones): an older store is rebuilt from its
# transcripts by ``loopscope ingest`` and refused by every other command (``connection.old_store_message`` says why).
KEYS_VERSION = 13


def old_keys(version: int) -> str:
    """Why a store of an older schema cannot be kept, in a few words (the line that refuses or rebuilds it)."""
    if version < 3:
        return "MD5 keys"
    if version < 4:
        return "no action keys"
    if version < 5:
        return "arguments read by older adapters"
    if version < 7:
        return "keys of Codex code-mode cells made by older rules"
    if version < 8:
        return "shell action keys made by older rules"
    return "result keys made without the results' images" if version < 9 else "permission refusals keyed by their words"


# What the store keeps of a long result by default: its head and its tail, around a marker that says how much is left
# out (``ingest.rows.clip_result``). Keys and lengths come from the full text, so detection does not depend on it;
# ``--full-results`` keeps whole results.
STORED_HEAD_CHARS = 8192
STORED_TAIL_CHARS = 2048
# Tables computed from the others: a store of an older schema drops them, and the next scan and calibrate rebuild them.


FILES = _t(
    "files",
    "One row per transcript file seen: ingested, read with another file, or skipped. Re-ingest skips a file whose "
    "size and mtime are unchanged, and one whose content hash is unchanged after a touch.",
    ("file_id", "INTEGER", "Internal id; every row ingested from the file carries it."),
    ("path", "VARCHAR", "Absolute path."),
    ("format", "VARCHAR", "The transcript format (`sessions.format`, the README's formats table); NULL when skipped."),
    (
        "status",
        "VARCHAR",
        "`ingested`; `companion`: read as part of the file named in `reason` (opencode's message and part files, "
        "read with their session file), its rows are that file's; or `skipped`: not read.",
    ),
    (
        "reason",
        "VARCHAR",
        "Why the file was skipped (empty, binary, unknown format, ...); for a `companion`, `read with <path>`.",
    ),
    ("size", "BIGINT", "Bytes read."),
    ("mtime_ns", "BIGINT", "Modification time, nanoseconds since the epoch."),
    ("content_hash", "VARCHAR", "XXH3-128 of the bytes read."),
    ("sessions", "INTEGER", "Sessions ingested from the file."),
    ("calls", "INTEGER", "Tool calls ingested from the file."),
    ("errors", "INTEGER", "Rows this file added to `ingest_errors`."),
    ("ingested_at", "TIMESTAMP", "When the file was last (re)ingested, UTC."),
    (
        "full_results",
        "BOOLEAN",
        "The file's results were stored whole (`--full-results`); false: long ones clipped (`calls.result_text`).",
    ),
)

INGEST_ERRORS = _t(
    "ingest_errors",
    "Everything that could not be read, with where it was: a malformed line, glued objects that left an undecodable "
    "tail, invalid UTF-8, a truncated last line, a duplicate session. The rest of the file is still ingested.",
    ("file_id", "INTEGER", "The file (`files.file_id`)."),
    ("path", "VARCHAR", "The file's path."),
    ("line", "BIGINT", "1-based physical line number; NULL for a whole-file problem."),
    ("reason", "VARCHAR", "What was wrong."),
    ("excerpt", "VARCHAR", "Up to 200 characters of the offending text."),
)

SESSIONS = _t(
    "sessions",
    "One row per agent session (a subagent is its own session with `parent_session_id` set). Totals are recomputed in "
    "the same transaction as the rows they sum, so they always agree with `turns` and `calls`.",
    (
        "session_id",
        "VARCHAR",
        "The transcript's own id (pi header `id`, Claude `sessionId` or `agent-<agentId>` for a "
        "subagent, Codex `session_meta.payload.id`, the record's `id`/`uuid` for OpenAI messages, else "
        "`<file stem>:<line>`).",
    ),
    ("format", "VARCHAR", "Transcript format (the agent)."),
    ("source_path", "VARCHAR", "File the session was read from."),
    ("file_id", "INTEGER", "`files.file_id` of that file."),
    ("parent_session_id", "VARCHAR", "The session that spawned this one (Claude subagents, Codex thread spawns)."),
    ("agent_version", "VARCHAR", "Version of the agent that wrote the transcript, when recorded."),
    ("started_at", "TIMESTAMP", "First timestamp in the session, UTC."),
    ("ended_at", "TIMESTAMP", "Last timestamp in the session, UTC."),
    ("cwd", "VARCHAR", "Working directory (the project)."),
    ("models", "VARCHAR[]", "Models that answered, in order of first use."),
    ("user_turns", "INTEGER", "User prompts."),
    ("turns", "INTEGER", "Rows in `turns` (user prompts and assistant messages)."),
    ("calls", "INTEGER", "Tool calls."),
    ("error_calls", "INTEGER", "Tool calls whose result was an error."),
    ("input_tokens", "BIGINT", "Uncached input tokens (deduplicated per API response)."),
    ("output_tokens", "BIGINT", "Output tokens (reasoning included)."),
    ("cache_read_tokens", "BIGINT", "Input tokens read from the prompt cache."),
    ("cache_write_tokens", "BIGINT", "Input tokens written to the prompt cache."),
    ("total_tokens", "BIGINT", "input + cache read + cache write + output, as ccusage counts them."),
    (
        "cost_usd",
        "DOUBLE",
        "The transcript's own cost where it records one (pi), else priced offline by genai-prices; NULL when unknown.",
    ),
)

TURNS = _t(
    "turns",
    "One row per message: user prompts and assistant messages, in transcript order. Tool results live in `calls`. "
    "An assistant response split over several lines (Claude Code) is one row.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("turn_id", "VARCHAR", "The message's own id (Claude `message.id`, pi entry id); else a position-derived id."),
    ("turn_index", "INTEGER", "0-based position among the session's turns."),
    (
        "role",
        "VARCHAR",
        "`user` (a prompt), `assistant`, or `harness` (a message a harness sent in the user's place, such as an "
        'automatic "please continue": it does not start a user turn).',
    ),
    ("text", "VARCHAR", "Visible text (thinking excluded)."),
    ("model", "VARCHAR", "Model that wrote an assistant message."),
    ("ts", "TIMESTAMP", "Timestamp, UTC."),
    ("user_turn", "INTEGER", "0-based index of the user prompt this message belongs to."),
    ("is_sidechain", "BOOLEAN", "Claude Code sidechain (subagent) message."),
    ("input_tokens", "BIGINT", "Usage of the API response that produced the message: uncached input."),
    ("output_tokens", "BIGINT", "Output tokens."),
    ("cache_read_tokens", "BIGINT", "Cache-read input tokens."),
    ("cache_write_tokens", "BIGINT", "Cache-write input tokens."),
    ("total_tokens", "BIGINT", "Sum of the four, or the agent's own total where it records one (Codex)."),
    ("cost_usd", "DOUBLE", "Cost of the response."),
    (
        "cost_source",
        "VARCHAR",
        "Where `cost_usd` came from: `transcript`; `genai-prices:<provider>/<model>` (the "
        "price database's entry for this model); `genai-prices~<provider>/<model>` (an inexact match: "
        "a different model name); `unknown model` (usage but no price: `cost_usd` is NULL); NULL without usage.",
    ),
    (
        "usage_key",
        "VARCHAR",
        "Deduplication key of the API response, so one response split over several lines "
        "or replayed in another file counts once (Claude Code: `message.id`, with `:requestId` or `@sessionId` where "
        "ccusage tells copies apart); NULL where every message is its own response (pi, Codex).",
    ),
    (
        "usage_counted",
        "BOOLEAN",
        "True on the one row per `usage_key` whose usage counts (largest, non-sidechain "
        "first); session totals sum only these.",
    ),
    ("file_id", "INTEGER", "`files.file_id`."),
    ("line", "BIGINT", "Physical line where the message starts."),
)

CALLS = _t(
    "calls",
    "One row per tool call issued by the agent, with its result. A user's own shell command (pi `!cmd`) is not a call. "
    "A call a resumed Claude Code session copied from the session it resumes (same `toolu_` id) is stored once, in "
    "the session that ended first.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("seq", "INTEGER", "0-based position among the session's calls, in transcript order."),
    ("call_id", "VARCHAR", "The transcript's own call id."),
    ("turn_id", "VARCHAR", "The assistant message (`turns.turn_id`) that issued the call."),
    ("user_turn", "INTEGER", "0-based index of the user prompt the call answers."),
    ("tool", "VARCHAR", "Tool name."),
    ("args", "VARCHAR", "Arguments as canonical JSON (keys sorted at every depth, arrays in order)."),
    (
        "call_key",
        "VARCHAR",
        "Hash of tool + canonical args: equal keys are the same call. Every hash in the store "
        "is XXH3-64 as 16 hex digits (`analyzer.detect.keys.digest`, the function a live guard uses).",
    ),
    ("call_key_ordered", "VARCHAR", "Hash of tool + insertion-order args (`JSON.stringify`), for guards that use it."),
    ("call_key_shallow", "VARCHAR", "Hash of tool + args with only top-level keys sorted (Roo Code)."),
    (
        "action_key",
        "VARCHAR",
        "Hash of tool + the call's action arguments: the arguments without the fields its tool declares commentary "
        "or tuning (Claude Code's `description`, timeouts, output limits, wait times), a shell command reduced to "
        "what it runs (no `sleep N &&`, `timeout N`, `| head`, `2>&1`, `|| echo …` or `set -o …` wrapper, no output "
        "captured and printed back; `cd DIR && CMD rel` as `CMD DIR/rel`; blanks collapsed). Equal keys are the "
        "same action on the same object: the detector's signals, findings and the `loopscope` guard compare calls "
        'by it (docs/detectors.md, "The semantics of tool arguments"). Equals `call_key` when nothing was dropped.',
    ),
    (
        "action_args",
        "VARCHAR",
        "The action arguments as canonical JSON, what `action_key` hashes and near-identical arguments (drift) are "
        "compared on; NULL when they equal `args`.",
    ),
    (
        "result_text",
        "VARCHAR",
        "Result text, each image in the result a line `[image/png, N bytes, sha1 …]` (its data is never stored); "
        "NULL when the call got no result (an aborted turn). A result longer "
        f"than {STORED_HEAD_CHARS:,} + {STORED_TAIL_CHARS:,} characters keeps only its first {STORED_HEAD_CHARS:,} and "
        f"last {STORED_TAIL_CHARS:,}, with a line `[… N characters not stored: loopscope show SESSION:SEQ prints the "
        "whole result …]` between them, unless the store was ingested with `--full-results`; `loopscope show` reads a "
        "whole result back from its transcript.",
        "zstd",
    ),
    (
        "result_chars",
        "BIGINT",
        "Length of the full result text in characters (whether or not `result_text` is "
        "clipped); NULL without a result.",
    ),
    ("result_key", "VARCHAR", "Hash of the normalised full result text and error flag; NULL without a result."),
    ("is_error", "BOOLEAN", "The result was an error (flag, non-zero exit code, error text); NULL without a result."),
    (
        "error_kind",
        "VARCHAR",
        "`rejected` when the user refused the call, `cancelled` when it never ran because a "
        "sibling in its parallel batch failed, `validation` when the tool refused its arguments before running, "
        "`exit_code` / `flag` / `text` for how another error was known. `placeholder` (with `is_error` false) marks a "
        'result that only points at an earlier one (Claude Code\'s "File unchanged since last read"): never evidence '
        "of the same result again.",
    ),
    ("parent_call_id", "VARCHAR", "The call this one was made inside (a script's nested calls)."),
    ("ts", "TIMESTAMP", "When the call was issued, UTC."),
    ("result_ts", "TIMESTAMP", "When the result arrived, UTC."),
    ("file_id", "INTEGER", "`files.file_id`."),
    ("line", "BIGINT", "Physical line of the call."),
)

ALL_TABLES = (FILES, INGEST_ERRORS, SESSIONS, TURNS, CALLS)

# -- the scan: detector outputs (declared with the detector rules, analyzer/detect/rules.py) ---------------------------

SCAN_STATE = _t(
    "scan_state",
    "One row per scanned session: which version of its data and of the detector the stored signals and findings "
    "come from. `loopscope scan` rescans only sessions whose fingerprint changed.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    (
        "fingerprint",
        "VARCHAR",
        "Hash of the session's file (content hash, ingest time), its counts and token "
        "totals, the detector version and the scan options.",
    ),
    ("detector", "VARCHAR", "Detector version and options, readable."),
    ("calls", "INTEGER", "Calls scanned."),
    ("texts", "INTEGER", "Assistant messages with text scanned."),
    ("findings", "INTEGER", "Findings written."),
    ("scanned_at", "TIMESTAMP", "When, UTC."),
)

SCAN_TABLES = (SIGNALS, TEXT_SIGNALS, FINDINGS, SCAN_STATE)
ALL_TABLES = ALL_TABLES + SCAN_TABLES

# -- calibration: threshold sweeps (analyzer.calibrate) ---------------------------------------------------------------

CALIBRATION_RUNS = _t(
    "calibration_runs",
    "One row per `loopscope calibrate` run (kept as history): what was swept, over which sessions, with which "
    "definition of stuck, and what it recommends. The report draws the latest run over its own session filter "
    "(and sweeps afresh, unsaved, when there is none).",
    ("run_id", "VARCHAR", "Id of the run; `calibration_sweep.run_id` of its settings."),
    (
        "base_policy",
        "VARCHAR",
        "The preset whose measure was swept (`open-codesign`, `gitagent`, "
        "`pi-anti-doom-loop`, `gemini-cli`, `cline`, `roo-code`).",
    ),
    ("computed_at", "TIMESTAMP", "When, UTC."),
    ("scope", "VARCHAR", "The session filter (`--since`, `--until`, `--agent`, `--project`) in words."),
    ("sessions", "INTEGER", "Scanned sessions in scope: the false-halt rate's denominator."),
    ("unscanned_sessions", "INTEGER", "Sessions matching the filter that were never scanned, left out."),
    ("stuck_episodes", "INTEGER", "Stuck episodes in scope (stuck findings with calls, or `stuck` label spans)."),
    ("total_tokens", "BIGINT", "Tokens of the sessions in scope (what a halt could save at most)."),
    ("total_cost_usd", "DOUBLE", "Their cost."),
    ("labels_file", "VARCHAR", "The labels file that overrode the scan's stuck/progress proxy; NULL for none."),
    ("label_rows", "INTEGER", "Rows in the labels file (0 without one)."),
    ("target_false_halt_rate", "DOUBLE", "The target: the share of sessions allowed a false halt (0..1)."),
    ("grid", "VARCHAR", "The swept values as JSON: `warn`, `halt`, `window`, `similarity` lists."),
    ("settings", "INTEGER", "Settings swept (rows written to `calibration_sweep`)."),
    ("recommended", "VARCHAR", "The recommended setting's sweep row as JSON; NULL when nothing was swept."),
    (
        "qualified",
        "BOOLEAN",
        "The recommendation meets the target (false when none did and the lowest-rate setting was chosen instead).",
    ),
    ("rationale", "VARCHAR", "Why this setting, in a sentence, with the exact replay's figures."),
    ("paste", "VARCHAR", "Text to paste into each guard, as a JSON object (guard -> text); translations say so."),
    (
        "verification",
        "VARCHAR",
        "The exact replay of the recommended setting (`analyzer.guards.replay`) as JSON: halts, "
        "tokens and dollars saved, false-halt sessions and rate, stuck episodes caught; NULL when not run.",
    ),
    ("sweep_seconds", "DOUBLE", "Time to load the signals and sweep every setting."),
    ("verify_seconds", "DOUBLE", "Time of the exact replay."),
)

CALIBRATION_SWEEP = _t(
    "calibration_sweep",
    "One row per swept setting of the latest `loopscope calibrate` run of each base policy (an older run's rows are "
    "replaced). Figures are the vectorised sweep's, an approximation of the exact guard (the run's `verification` "
    "holds the exact replay of the recommended row).",
    ("run_id", "VARCHAR", "`calibration_runs.run_id`."),
    ("base_policy", "VARCHAR", "`calibration_runs.base_policy`."),
    (
        "warn",
        "INTEGER",
        "Warning threshold (equal to `halt` for guards without a separate warning; "
        "`PI_ANTI_LOOP_REPEATS` for pi-anti-doom-loop).",
    ),
    (
        "halt",
        "INTEGER",
        "Halt threshold (for pi-anti-doom-loop the same R: it aborts when a blocked call is re-issued).",
    ),
    (
        "window_size",
        "INTEGER",
        "pi-anti-doom-loop's window in calls (`PI_ANTI_LOOP_WINDOW`); NULL for other guards "
        "(`window` in the command's output: the name is reserved in SQL).",
    ),
    (
        "similarity",
        "DOUBLE",
        "pi-anti-doom-loop's near-identical bar (shared-token score); NULL when off or for other guards.",
    ),
    ("halts", "BIGINT", "Runs (user turns) the setting halts."),
    ("halts_stuck", "BIGINT", "Halts on a call in a stuck finding or a `stuck` label span."),
    ("halts_progress", "BIGINT", "Halts on a call in a finding that made progress (a false halt)."),
    ("halts_none", "BIGINT", "Halts on a call in no finding: healthy work interrupted (a false halt)."),
    ("halts_benign", "BIGINT", "Halts on a call in a `benign` label span (a false halt)."),
    ("sessions_warned", "BIGINT", "Sessions with at least one warning (or halt, for guards without a warning)."),
    ("sessions_halted", "BIGINT", "Sessions with at least one halt."),
    ("false_halt_sessions", "BIGINT", "Sessions with at least one halt that was not on a stuck call."),
    ("sessions", "BIGINT", "Sessions in scope."),
    ("false_halt_rate", "DOUBLE", "`false_halt_sessions / sessions` (0..1)."),
    (
        "false_warn_sessions",
        "BIGINT",
        "Sessions where the guard warns (or halts) on a call that was not stuck before "
        "its run stops: a warning blocks the call in open-codesign and pi-anti-doom-loop.",
    ),
    ("false_warn_rate", "DOUBLE", "`false_warn_sessions / sessions` (0..1)."),
    ("stuck_episodes", "BIGINT", "Stuck episodes in scope."),
    (
        "stuck_caught",
        "BIGINT",
        "Stuck episodes in which the guard's first action (warning or halt) lands no later than its run's halt.",
    ),
    ("median_calls_to_detect", "DOUBLE", "Median over the caught episodes of detecting call seq - first_seq + 1."),
    (
        "tokens_saved",
        "BIGINT",
        "Counted tokens of the assistant messages after each halt, to the end of its run "
        "(as `loopscope replay` counts them).",
    ),
    ("dollars_saved", "DOUBLE", "Their cost."),
    ("calls_saved", "BIGINT", "Calls after each halt in its run."),
    ("on_frontier", "BOOLEAN", "No other setting saves more tokens at a false-halt rate as low or lower."),
    ("recommended", "BOOLEAN", "The recommended setting."),
)

CALIBRATION_TABLES = (CALIBRATION_RUNS, CALIBRATION_SWEEP)
ALL_TABLES = ALL_TABLES + CALIBRATION_TABLES
DERIVED_TABLES = SCAN_TABLES + CALIBRATION_TABLES


def spool_columns(
    table: Table,
    drop: tuple[str, ...] | list[str] = (),
    rename: dict[str, str] | None = None,
) -> tuple[tuple[str, str], ...]:
    """The ingest spool's (name, SQL type) columns for a store table: its columns in order, less ``drop`` (what
    loading computes), renamed. Timestamps travel as the transcript's own text and are parsed when the spool is
    loaded."""
    rename = rename or {}
    out: list[tuple[str, str]] = []
    for c in table.columns:
        if c.name in drop:
            continue
        out.append((rename.get(c.name, c.name), "VARCHAR" if c.sql == "TIMESTAMP" else c.sql))
    return tuple(out)
