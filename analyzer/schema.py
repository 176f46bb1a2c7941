"""The store's tables, declared once: DDL, the Arrow schema of ingest batches, and the README's column docs all come
from here, so they cannot drift apart (tests/test_readme.py checks the README against this file)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Column:
    name: str
    sql: str
    doc: str

    @property
    def arrow(self) -> pa.DataType:
        return _ARROW[self.sql]


_ARROW: dict[str, pa.DataType] = {
    "VARCHAR": pa.large_string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMP": pa.timestamp("us"),
    "VARCHAR[]": pa.list_(pa.large_string()),
}


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        cols = ",\n  ".join(f"{c.name} {c.sql}" for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.arrow) for c in self.columns])


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
    ("usage_key", "VARCHAR", "Deduplication key of the API response (Claude: `message.id:requestId`)."),
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

INGEST_TABLES = (SESSIONS, TURNS, CALLS)
ALL_TABLES = (FILES, INGEST_ERRORS, SESSIONS, TURNS, CALLS)
