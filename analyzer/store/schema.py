"""The store's tables, declared once: DDL, the Arrow schema of ingest batches, and the README's column docs all come
from here, so they cannot drift apart (tests/test_readme.py checks the README against this file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Column:
    name: str
    sql: str
    doc: str

    @property
    def arrow(self) -> "pa.DataType":
        import pyarrow as pa  # only bulk loads need Arrow; opening the store to read should not pay for it

        return {
            "VARCHAR": pa.large_string(), "BIGINT": pa.int64(), "INTEGER": pa.int32(), "DOUBLE": pa.float64(),
            "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us"), "VARCHAR[]": pa.list_(pa.large_string()),
        }[self.sql]


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c.name}" {c.sql}' for c in self.columns)  # quoted: a column may be a keyword
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]



def _t(name: str, doc: str, *cols: tuple[str, str, str]) -> Table:
    return Table(name, doc, tuple(Column(*c) for c in cols))


FILES = _t(
    "files",
    "One row per transcript file seen, ingested or skipped. Re-ingest skips a file whose size and mtime are unchanged, "
    "and one whose content hash is unchanged after a touch.",
    ("file_id", "INTEGER", "Internal id; every row ingested from the file carries it."),
    ("path", "VARCHAR", "Absolute path."),
    ("format", "VARCHAR", "`pi`, `claude_code`, `codex` or `openai_messages`; NULL when skipped."),
    ("status", "VARCHAR", "`ingested` or `skipped`."),
    ("reason", "VARCHAR", "Why the file was skipped (empty, binary, unknown format, ...)."),
    ("size", "BIGINT", "Bytes read."),
    ("mtime_ns", "BIGINT", "Modification time, nanoseconds since the epoch."),
    ("content_hash", "VARCHAR", "BLAKE2b-128 of the bytes read."),
    ("sessions", "INTEGER", "Sessions ingested from the file."),
    ("calls", "INTEGER", "Tool calls ingested from the file."),
    ("errors", "INTEGER", "Rows this file added to `ingest_errors`."),
    ("ingested_at", "TIMESTAMP", "When the file was last (re)ingested, UTC."),
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
    ("session_id", "VARCHAR", "The transcript's own id (pi header `id`, Claude `sessionId` or `agent-<agentId>` for a "
     "subagent, Codex `session_meta.payload.id`, the record's `id`/`uuid` for OpenAI messages, else `<file stem>:<line>`)."),
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
    ("cost_usd", "DOUBLE", "The transcript's own cost where it records one (pi), else the offline price table."),
)

TURNS = _t(
    "turns",
    "One row per message: user prompts and assistant messages, in transcript order. Tool results live in `calls`. "
    "An assistant response split over several lines (Claude Code) is one row.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("turn_id", "VARCHAR", "The message's own id (Claude `message.id`, pi entry id); else a position-derived id."),
    ("turn_index", "INTEGER", "0-based position among the session's turns."),
    ("role", "VARCHAR", "`user` (a prompt) or `assistant`."),
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
    ("cost_source", "VARCHAR", "`transcript`, `price_table` or NULL (unknown model or no usage)."),
    ("usage_key", "VARCHAR", "Deduplication key of the API response, so one response split over several lines "
     "or replayed in another file counts once (Claude Code: `message.id`, with `:requestId` or `@sessionId` where "
     "ccusage tells copies apart); NULL where every message is its own response (pi, Codex)."),
    ("usage_counted", "BOOLEAN", "True on the one row per `usage_key` whose usage counts (largest, non-sidechain "
     "first); session totals sum only these."),
    ("file_id", "INTEGER", "`files.file_id`."),
    ("line", "BIGINT", "Physical line where the message starts."),
)

CALLS = _t(
    "calls",
    "One row per tool call issued by the agent, with its result. A user's own shell command (pi `!cmd`) is not a call.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("seq", "INTEGER", "0-based position among the session's calls, in transcript order."),
    ("call_id", "VARCHAR", "The transcript's own call id."),
    ("turn_id", "VARCHAR", "The assistant message (`turns.turn_id`) that issued the call."),
    ("user_turn", "INTEGER", "0-based index of the user prompt the call answers."),
    ("tool", "VARCHAR", "Tool name."),
    ("args", "VARCHAR", "Arguments as canonical JSON (keys sorted at every depth, arrays in order)."),
    ("call_key", "VARCHAR", "Hash of tool + canonical args: equal keys are the same call."),
    ("call_key_ordered", "VARCHAR", "Hash of tool + insertion-order args (`JSON.stringify`), for guards that use it."),
    ("call_key_shallow", "VARCHAR", "Hash of tool + args with only top-level keys sorted (Roo Code)."),
    ("result_text", "VARCHAR", "Result text; NULL when the call got no result (an aborted turn)."),
    ("result_key", "VARCHAR", "Hash of the normalised result text and error flag; NULL without a result."),
    ("is_error", "BOOLEAN", "The result was an error (flag, non-zero exit code, error text); NULL without a result."),
    ("error_kind", "VARCHAR", "`rejected` when the user refused the call, `exit_code` / `flag` / `text` for how the "
     "error was known."),
    ("parent_call_id", "VARCHAR", "The call this one was made inside (a script's nested calls)."),
    ("ts", "TIMESTAMP", "When the call was issued, UTC."),
    ("result_ts", "TIMESTAMP", "When the result arrived, UTC."),
    ("file_id", "INTEGER", "`files.file_id`."),
    ("line", "BIGINT", "Physical line of the call."),
)

ALL_TABLES = (FILES, INGEST_ERRORS, SESSIONS, TURNS, CALLS)

# -- the scan: detector outputs (analyzer.scan, analyzer.detect) ------------------------------------------------------

SIGNALS = _t(
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
    ("streak", "INTEGER", "Identical calls (same `call_key`) in a row ending here, this one included; 1 for a call "
     "unlike the one before."),
    ("cycle2", "INTEGER", "How many times the block of the last 2 calls repeats back to back, ending here, when the "
     "block holds 2 distinct keys; 0 otherwise. `(A B) x 3` gives 3 at its last call."),
    ("cycle3", "INTEGER", "The same for blocks of 3 calls (at least 2 distinct keys)."),
    ("cycle4", "INTEGER", "The same for blocks of 4 calls."),
    ("cycle5", "INTEGER", "The same for blocks of 5 calls."),
    ("window5", "INTEGER", "Occurrences of this call's key in a window of this call and the 5 calls before it."),
    ("window_count", "INTEGER", "Occurrences of this call's key in this call and the 10 calls before it, as "
     "pi-anti-doom-loop counts (its repeat rule blocks at 3)."),
    ("window20", "INTEGER", "Occurrences of this call's key in this call and the 20 calls before it."),
    ("sim_prev", "DOUBLE", "Shared-token Jaccard similarity of the arguments with the previous call, when that call "
     "used the same tool (NULL otherwise, and at the first call after a reset). Drift at another bar B: a call links "
     "to the one before when `sim_prev >= B AND streak = 1`; a drift run is a run of linked calls."),
    ("drift_run", "INTEGER", "Consecutive calls of this tool ending here, each near-identical to the one before "
     "(`sim_prev` >= 0.55) but not identical (`streak` = 1); 1 for a call that does not continue such a run."),
    ("fail_run", "INTEGER", "Consecutive failed calls of this tool ending here, this one included (another tool's "
     "call in between breaks the run); 0 when this call did not fail."),
    ("same_result", "BOOLEAN", "The result equals the previous identical call's result (same text after "
     "normalisation and same error flag); NULL when there was no previous identical call or either lacks a result."),
    ("progress", "BOOLEAN", "The call made progress: it succeeded and its result differs from the previous "
     "identical call's, or, with no identical predecessor, it changed state (a successful edit/write-like tool) or "
     "its result differs from the previous call of the same tool. False for a failure, a repeated result or a "
     "missing result."),
    ("nested_repeat", "INTEGER", "For a nested call: 1 + the earlier calls of the same script it repeats "
     "(identical, or the same tool with near-identical arguments), among the script's last 100; 0 for a top-level "
     "call."),
    ("est_tokens", "INTEGER", "~4 characters per token of the call's arguments plus its result."),
    ("finding_id", "VARCHAR", "The finding (loop episode) the call belongs to, if any. Not a streaming signal: "
     "assigned once the session's episodes are known."),
)

TEXT_SIGNALS = _t(
    "text_signals",
    "One row per assistant message with visible text (blank, tool-only messages are not recorded): the counters of "
    "the text-loop rules (DETECTORS.md 2.3), from that message and the ones before it in the user turn.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("turn_id", "VARCHAR", "`turns.turn_id` of the message."),
    ("turn_index", "INTEGER", "`turns.turn_index` of the message."),
    ("user_turn", "INTEGER", "`turns.user_turn`."),
    ("sentence_repeats", "INTEGER", "Rule 1: occurrences of the most repeated sentence of 16+ characters inside "
     "this message (split after `.:!?`); 0 when no sentence is that long."),
    ("same_count", "INTEGER", "Rule 2: messages with exactly this text (whitespace runs collapsed) among the last "
     "10 messages, this one included."),
    ("similar_run", "INTEGER", "Rule 3: consecutive messages ending here, each identical or >= 0.55 similar to the "
     "one before."),
    ("similar_count", "INTEGER", "Rule 4: the largest set of mutually similar (identical or >= 0.55) messages among "
     "the last 10 that includes this one."),
    ("chunk_repeats", "INTEGER", "Occurrences of the most repeated 50-character chunk (any offset) in this "
     "message's last 5000 characters, fenced code removed (Gemini CLI's content rule counts to 10); 0 for text "
     "shorter than 50 characters."),
    ("est_tokens", "INTEGER", "~4 characters per token of the message text."),
    ("finding_id", "VARCHAR", "The text finding the message belongs to, if any."),
)

FINDINGS = _t(
    "findings",
    "One row per loop episode: a maximal run of calls (or messages) inside one user turn held together by one "
    "pattern. A call belongs to at most one call episode (claimed in the order cycle, streak, drift, failure, window). "
    "`loopscope findings --format json` prints these fields.",
    ("finding_id", "VARCHAR", "Stable id: a hash of session, kind and where the episode starts."),
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("kind", "VARCHAR", "`streak` (3+ identical calls in a row), `cycle` (a block of 2-5 calls with 2+ distinct "
     "keys repeated 3+ times), `window` (one call recurring 3+ times, each within 10 calls of the one before and 3 of "
     "them within a window of 10, with no successful edit in between), `drift` (3+ consecutive calls of one tool, "
     "each near-identical to the one before, sharing 2+ words), `failure` (3+ consecutive failures of one tool), "
     "`text` (3+ repeated or similar messages of 4+ words, or one message repeating a sentence 3+ times or a "
     "50-char chunk 10+ times), `nested` (a call repeated inside one script, 2+)."),
    ("period", "INTEGER", "Cycle length: the block size for `cycle`, 1 for `streak`, NULL for the other kinds."),
    ("tools", "VARCHAR[]", "Tools of the episode's calls, in order of first use."),
    ("call_ids", "VARCHAR[]", "The transcript's own ids of the episode's calls, in order; for `text`, the calls "
     "issued by the looping messages."),
    ("first_seq", "INTEGER", "`calls.seq` of the first call (NULL for a text episode without calls)."),
    ("last_seq", "INTEGER", "`calls.seq` of the last call."),
    ("repeats", "INTEGER", "How many times the pattern occurred: calls in a streak, drift, failure or window chain; "
     "full blocks of a cycle; calls in a nested cluster; messages in a text loop, or the repeats of a sentence "
     "(chunk) inside one message."),
    ("stuck", "BOOLEAN", "No repeat made progress: each returned the same result as before or failed. False for a "
     "poll whose result changed or for edits that each succeeded."),
    ("user_turn", "INTEGER", "The user turn the episode belongs to."),
    ("wasted_tokens", "BIGINT", "Measured: the usage of the assistant turns that issued the episode's calls after "
     "its first occurrence (after the first full block of a cycle, after the first message of a text loop), each "
     "turn counted once and only its deduplicated usage (`turns.usage_counted`); turns that also issued the first "
     "occurrence are not counted."),
    ("estimated_tokens", "BIGINT", "~4 characters per token of the repeated calls' arguments and results (of the "
     "repeated messages' text), for transcripts without usage."),
    ("cost_usd", "DOUBLE", "Cost of the turns counted in `wasted_tokens`."),
    ("first_turn_index", "INTEGER", "`turns.turn_index` of the first message involved."),
    ("last_turn_index", "INTEGER", "`turns.turn_index` of the last message involved."),
    ("turn_ids", "VARCHAR[]", "The turns counted in `wasted_tokens` (to deduplicate across findings)."),
    ("repeated", "VARCHAR", "What repeats: the first call (`tool` + arguments) or block of calls, or the message "
     "text; truncated to 160 characters."),
)

SCAN_STATE = _t(
    "scan_state",
    "One row per scanned session: which version of its data and of the detector the stored signals and findings "
    "come from. `loopscope scan` rescans only sessions whose fingerprint changed.",
    ("session_id", "VARCHAR", "`sessions.session_id`."),
    ("fingerprint", "VARCHAR", "Hash of the session's file (content hash, ingest time), its counts and token "
     "totals, the detector version and the scan options."),
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
    ("base_policy", "VARCHAR", "The preset whose measure was swept (`open-codesign`, `gitagent`, "
     "`pi-anti-doom-loop`, `gemini-cli`, `cline`, `roo-code`)."),
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
    ("qualified", "BOOLEAN", "The recommendation meets the target (false when none did and the lowest-rate setting "
     "was chosen instead)."),
    ("rationale", "VARCHAR", "Why this setting, in a sentence, with the exact replay's figures."),
    ("paste", "VARCHAR", "Text to paste into each guard, as a JSON object (guard -> text); translations say so."),
    ("verification", "VARCHAR", "The exact replay of the recommended setting (`analyzer.guards.replay`) as JSON: halts, "
     "tokens and dollars saved, false-halt sessions and rate, stuck episodes caught; NULL when not run."),
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
    ("warn", "INTEGER", "Warning threshold (equal to `halt` for guards without a separate warning; "
     "`PI_ANTI_LOOP_REPEATS` for pi-anti-doom-loop)."),
    ("halt", "INTEGER", "Halt threshold (for pi-anti-doom-loop the same R: it aborts when a blocked call is "
     "re-issued)."),
    ("window_size", "INTEGER", "pi-anti-doom-loop's window in calls (`PI_ANTI_LOOP_WINDOW`); NULL for other guards "
     "(`window` in the command's output: the name is reserved in SQL)."),
    ("similarity", "DOUBLE", "pi-anti-doom-loop's near-identical bar (shared-token score); NULL when off or for "
     "other guards."),
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
    ("false_warn_sessions", "BIGINT", "Sessions where the guard warns (or halts) on a call that was not stuck before "
     "its run stops: a warning blocks the call in open-codesign and pi-anti-doom-loop."),
    ("false_warn_rate", "DOUBLE", "`false_warn_sessions / sessions` (0..1)."),
    ("stuck_episodes", "BIGINT", "Stuck episodes in scope."),
    ("stuck_caught", "BIGINT", "Stuck episodes in which the guard's first action (warning or halt) lands no later "
     "than its run's halt."),
    ("median_calls_to_detect", "DOUBLE", "Median over the caught episodes of detecting call seq - first_seq + 1."),
    ("tokens_saved", "BIGINT", "Counted tokens of the assistant messages after each halt, to the end of its run "
     "(as `loopscope replay` counts them)."),
    ("dollars_saved", "DOUBLE", "Their cost."),
    ("calls_saved", "BIGINT", "Calls after each halt in its run."),
    ("on_frontier", "BOOLEAN", "No other setting saves more tokens at a false-halt rate as low or lower."),
    ("recommended", "BOOLEAN", "The recommended setting."),
)

CALIBRATION_TABLES = (CALIBRATION_RUNS, CALIBRATION_SWEEP)
ALL_TABLES = ALL_TABLES + CALIBRATION_TABLES
