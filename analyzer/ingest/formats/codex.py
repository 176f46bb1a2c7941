"""OpenAI Codex CLI rollouts (``rollout-<time>-<uuid>.jsonl``): one file is one session. docs/formats.md#codex-cli.

Records are envelopes ``{timestamp, type, payload}``. Calls are ``function_call`` / ``custom_tool_call`` /
``local_shell_call`` response items (plus ``web_search_call``, which has no recorded result); results are
``function_call_output`` / ``custom_tool_call_output`` items with the same ``call_id``. Outputs carry no error flag:
an error is a non-zero exit code (JSON ``metadata.exit_code``, the exec header "Process exited with code N" /
"Exit code: N", or a matching ``exec_command_end`` / ``patch_apply_end`` / ``mcp_tool_call_end`` event) or one of a
few unmistakable error texts.

Decisions:

* **Rollouts from before the envelopes** (mid-2025): a header line ``{id, timestamp, instructions, git}``, then bare
  response items and ``{"record_type": "state"}`` lines (``legacy_header``): read as ``session_meta`` and
  ``response_item`` records without timestamps; the working folder comes from the injected ``<environment_context>``.

* **User prompts.** A prompt is an ``event_msg user_message`` or a ``response_item`` user message, whichever comes
  first; its twin from the other record kind is dropped (text is stored twice in newer builds; older builds write only
  the response item). Injected context is never a prompt: ``<environment_context>``, ``<user_instructions>``,
  ``# AGENTS.md instructions for …``, ``<skill>``, ``<user_shell_command>``, ``<turn_aborted>``,
  ``<subagent_notification>`` and friends, a ``user_message`` whose ``kind`` is not ``plain``, and any developer or
  system message. Assistant text (``agent_message`` + assistant ``message``) is de-duplicated the same way.
* **Turn grouping.** The items one model request produced (reasoning, text, calls) form one assistant turn, with a
  synthesized id ``L<line of its first item>``. A request ends at the ``token_count`` that reports its usage, at a
  user prompt, or (for builds that record outputs before usage, or no usage at all) when a model item follows a
  tool output. A ``token_count`` with no open request (a compaction, a re-emitted count) is a turn of its own.
* **Parents.** A subagent's ``session_meta.source`` is an object ``{"subagent": {"thread_spawn":
  {"parent_thread_id": …}}}``: the parent thread is ``parent_session_id``; a fork's ``forked_from_id`` is too.
  ``archived_sessions/`` (flat) holds rollouts of the same shape, read like ``sessions/``.
* **Tokens agree with ccusage 20.x** (``ryoppippi/ccusage`` ``adapter/codex``; behaviour checked against the 20.0.24
  binary): ``last_token_usage`` per event, else the difference of successive ``total_token_usage``; events without a
  timestamp or with all-zero counts are skipped; an event identical to one already counted (same instant, model and
  counts) counts once; in a subagent rollout (first line a ``session_meta`` with
  ``source.subagent.thread_spawn.parent_thread_id``) the parent's token_counts replayed at the top — those in the
  second of the first two usage events, when both fall in it — are skipped; the model is the event's, else the last
  seen (``turn_context`` or event), else ``gpt-5`` as ccusage assumes; ``codex-auto-review`` maps to the model
  current at the event's date. Usage = (input − cached, cached, output, the record's total or input + output).
"""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from analyzer.ingest.base import LOCAL, FileContext, Files, parse_arguments, result_text_of, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder, parse_ts

FORMAT = "codex"
ALIASES = ("codex-cli",)
SNIFF_RANK = 10  # Codex records carry unmistakable keys (``payload``)


def default_roots() -> list[Path]:
    """``$CODEX_HOME/sessions`` and ``archived_sessions`` (flat, no YYYY/MM/DD folders; read like sessions), else the
    same under ``~/.codex``. A session archived and still present in ``sessions/`` is loaded once (the store's
    duplicate-session rule)."""
    env = os.environ.get("CODEX_HOME")
    home = Path(env) if env else Path.home() / ".codex"
    return [home / "sessions", home / "archived_sessions"]


_ENVELOPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
_LEGACY_HEADER_KEYS = frozenset({"id", "timestamp", "instructions", "git"})
_CWD = re.compile(r"<environment_context>.*?<cwd>([^<]+)</cwd>", re.S)
_UUID_TAIL = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")
# Contextual user messages Codex injects itself (codex-rs contextual_user_message.rs / user_instructions.rs).
_INJECTED = (
    "<environment_context",
    "<user_instructions",
    "# agents.md instructions for",
    "<skill",
    "<user_shell_command",
    "<turn_aborted",
    "<subagent_notification",
    "<remembered_context",
    "<permissions instructions",
    "<collaboration_mode",
)
# Text results that are certainly failures. Kept short on purpose: tool output is free text and a guess that fires
# on ordinary output would invent errors.
# Older builds answer a patch run through the shell (``["apply_patch", "*** Begin Patch…"]``, which Codex intercepts)
# with its own refusal and no exit code: "error: Failed to find expected lines in …", "error: invalid hunk at line 4".
_ERROR_TEXT = re.compile(
    r"(?:write_stdin failed:|apply_patch verification failed|failed to parse function arguments|unsupported call:"
    r"|execution error:|aborted(?:\s*$| by user)|Script failed\b|failed in sandbox\b"
    r"|error: (?:Failed to find (?:expected lines|context)|invalid (?:hunk|patch)\b))",
    re.IGNORECASE,
)
_REJECTED_TEXT = re.compile(r"(?:exec command|patch) rejected by user", re.IGNORECASE)
_EXIT_LINE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$")
_HEADER_KEYS = (
    "Chunk ID:",
    "Wall time:",
    "Process exited with code",
    "Process running with session ID",
    "Original token count:",
    "Exit code:",
    "Total output lines:",
)
_MAX_HINTS = 4096
# ccusage's substitutes for the `codex-auto-review` model: the newest model released on or before the event's date.
_AUTO_REVIEW = (
    ("2026-03-05", "gpt-5.4"),
    ("2026-02-05", "gpt-5.3-codex"),
    ("2025-12-11", "gpt-5.2-codex"),
    ("2025-11-13", "gpt-5.1-codex"),
    ("2025-09-15", "gpt-5-codex"),
    ("2025-08-07", "gpt-5"),
)


def sniff(rec: Any) -> bool:
    return (
        isinstance(rec, dict) and rec.get("type") in _ENVELOPES and isinstance(rec.get("payload"), dict)
    ) or legacy_header(rec)


def legacy_header(rec: Any) -> bool:
    """The first line of a rollout written before the envelopes (Codex CLI of mid-2025): the session's id and start
    time, its instructions and git state; bare response items and ``{"record_type": "state"}`` lines follow
    (docs/formats.md, Codex pitfall 7)."""
    return (
        isinstance(rec, dict)
        and "instructions" in rec
        and rec.keys() <= _LEGACY_HEADER_KEYS  # a dataset row with an id and instructions holds more (messages)
        and isinstance(rec.get("id"), str)
        and bool(_UUID_TAIL.search(rec["id"]))
        and isinstance(rec.get("timestamp"), str)
    )


# -- usage, as ccusage reads it ----------------------------------------------------------------------------------------
class RawUsage(NamedTuple):
    input: int
    cached: int
    output: int
    reasoning: int
    total: int


_U64_END = 1 << 64


def _u64(value: Any) -> int | None:
    """ccusage's lossy counter: a non-negative integer or a string of digits; anything else is absent."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _U64_END else None
    if isinstance(value, str):
        s = value.strip()
        s = s[1:] if s.startswith("+") else s
        return int(s) if s.isascii() and s.isdigit() else None
    return None


def _first(d: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = d.get(k)
        if type(v) is int and 0 <= v < _U64_END:  # what Codex writes: ``_u64``'s answer without the call
            return v
        if v is not None:
            v = _u64(v)
            if v is not None:
                return v
    return None


def raw_usage(obj: Any) -> RawUsage | None:
    """A ``*_token_usage`` object; ``None`` unless it is an object. ``total`` falls back to input + output."""
    if not isinstance(obj, dict):
        return None
    inp = _first(obj, "input_tokens", "prompt_tokens", "input") or 0
    out = _first(obj, "output_tokens", "completion_tokens", "output") or 0
    total = _first(obj, "total_tokens")
    return RawUsage(
        inp,
        _first(obj, "cached_input_tokens", "cache_read_input_tokens", "cached_tokens") or 0,
        out,
        _first(obj, "reasoning_output_tokens", "reasoning_tokens") or 0,
        total if total is not None and (total > 0 or inp + out == 0) else inp + out,
    )


def _minus(cur: RawUsage, prev: RawUsage | None) -> RawUsage:
    if prev is None:
        return cur
    return RawUsage(*(max(a - b, 0) for a, b in zip(cur, prev)))


def usage_instant(value: Any) -> str | None:
    """The event time as ccusage keys it (UTC, milliseconds); ``None`` when ccusage would skip the event."""
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        if len(s) == 24 and s[-1] == "Z" and s[10] == "T" and s[19] == ".":
            return s[:-1]  # already UTC with milliseconds, as Codex writes it: skip the datetime round trip
        dt = parse_ts(s)
        return dt.isoformat(timespec="milliseconds") if dt else s
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        ms = value if value > 10_000_000_000 else value * 1000
        try:
            return datetime.fromtimestamp(ms / 1000, tz=UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")
        except (OverflowError, OSError, ValueError):
            return str(value)
    return None


def _model_of(d: Any) -> str | None:
    if not isinstance(d, dict):
        return None
    for v in (
        d.get("model"),
        d.get("model_name"),
        (d.get("metadata") or {}).get("model") if isinstance(d.get("metadata"), dict) else None,
    ):
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def _auto_review(instant: str) -> str:
    day = instant[:10]
    return next((m for released, m in _AUTO_REVIEW if day >= released), "gpt-5")


def _token_event(rec: Any) -> tuple[str, RawUsage | None, RawUsage | None] | None:
    """(instant, last, total) of a usage-bearing token_count record, for the replay pre-scan."""
    if not isinstance(rec, dict) or rec.get("type") != "event_msg":
        return None
    p = rec.get("payload")
    if not isinstance(p, dict) or p.get("type") != "token_count" or not isinstance(p.get("info"), dict):
        return None
    last, total = raw_usage(p["info"].get("last_token_usage")), raw_usage(p["info"].get("total_token_usage"))
    instant = usage_instant(rec.get("timestamp"))
    if (last is None and total is None) or instant is None:
        return None
    return instant, last, total


def replay_second(path: Path, files: Files = LOCAL) -> str | None:
    """The second (``YYYY-MM-DDTHH:MM:SS``) of the parent's replayed token_counts at the top of a subagent rollout:
    set when the file's first two usage events fall in the same second (ccusage's rule). Reads only up to the second
    usage event."""
    first: str | None = None
    try:
        with files.open(str(path)) as f:
            for raw in f:
                if b"token_count" not in raw:
                    continue
                try:
                    ev = _token_event(orjson.loads(raw))
                except orjson.JSONDecodeError:
                    continue
                if ev is None:
                    continue
                if first is None:
                    first = ev[0][:19]
                else:
                    return first if ev[0][:19] == first else None
    except OSError:
        return None
    return None


# -- outputs -----------------------------------------------------------------------------------------------------------
def _header_exit_code(text: str) -> int | None:
    """Exit code from the header Codex puts before ``Output:`` (unified exec, shell_command); never from the
    command's own output below it."""
    if "Output:" not in text[:2000] and "Wall time:" not in text[:2000]:
        return None
    for ln in text[:2000].splitlines()[:10]:
        ln = ln.strip()
        if ln == "Output:":
            break
        if not ln.startswith(_HEADER_KEYS):
            return None
        m = _EXIT_LINE.match(ln)
        if m:
            return int(m.group(1))
    return None


_CELL_HEAD = re.compile(r"\AScript (?:completed|failed)\b.{0,200}?\nOutput:\n", re.S)
_CELL_EXIT = re.compile(r'\s*\{"chunk_id":"[^"]*",[^{}]{0,200}?"exit_code":(-?\d+)')


def _cell_exit_code(text: str) -> int | None:
    """The exit code a code-mode cell printed with its command's whole answer (``text(JSON.stringify(r))`` of one
    ``exec_command``: ``{"chunk_id":…,"exit_code":1,…}`` after the cell's ``Output:``); None for any other output (a
    cell that printed ``r.output`` alone says nothing of the exit code)."""
    head = _CELL_HEAD.match(text)
    if head is None:
        return None
    m = _CELL_EXIT.match(text, head.end())
    return int(m.group(1)) if m else None


def parse_output(output: Any) -> tuple[str, int | None, bool | None]:
    """(result text, exit code if known, explicit error flag if known) of a call output in any of its shapes."""
    if isinstance(output, list):
        text = result_text_of(output)
        return text, _cell_exit_code(text), None
    if isinstance(output, dict):  # {"content": …, "success": bool} from some builds
        body = output.get("content", output.get("output", output.get("text")))
        text = (
            body
            if isinstance(body, str)
            else (result_text_of(body) if isinstance(body, list) else orjson.dumps(output).decode())
        )
        ok = output.get("success")
        return text, None, (not ok) if isinstance(ok, bool) else None
    if output is None:
        return "", None, None
    text = output if isinstance(output, str) else str(output)
    head = text.lstrip()[:1]
    if head == "{" and '"metadata"' in text:
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            doc = None
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("exit_code"), int):
            out = doc.get("output")
            body = out if isinstance(out, str) else ("" if out is None else orjson.dumps(out).decode())
            return body, meta["exit_code"], None
    return text, _header_exit_code(text), None


def classify(
    text: str, code: int | None, flag: bool | None, hint: tuple[bool, str | None] | None
) -> tuple[bool, str | None]:
    """(is_error, error_kind). Most specific evidence first: the output's own exit code, its flag, the matching end
    event, then error text."""
    if code is not None:
        return (code != 0, "exit_code" if code != 0 else None)
    if flag is not None:
        return (flag, "flag" if flag else None)
    if hint is not None:
        return hint
    head = text.lstrip()[:200]
    if _REJECTED_TEXT.match(head):
        return True, "rejected"
    if _ERROR_TEXT.match(head):
        return True, "text"
    return False, None


# -- the parser --------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Request:
    """The items of one model request, waiting for the token_count that closes it."""

    tid: str
    ts: Any
    line: int
    texts: list[str] = field(default_factory=list)
    saw_output: bool = False


def _session_id_from_path(path: Path) -> str:
    m = _UUID_TAIL.search(path.stem)
    return m.group(1) if m else path.stem


def _is_injected(text: str) -> bool:
    return text.lstrip()[:40].lower().startswith(_INJECTED)


def _tool_name(p: dict[str, Any], default: str) -> str:
    name = p.get("name")
    name = name if isinstance(name, str) and name else default
    ns = p.get("namespace")
    if isinstance(ns, str) and ns:
        return f"{ns}{name}" if ns.endswith("_") else f"{ns}.{name}"
    return name


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.b: SessionBuilder | None = None
        self._meta_seen = False
        self._req: _Request | None = None
        self._last_tid: str | None = None
        self._n_requests = 0
        # ccusage's usage state
        self._prev_totals: RawUsage | None = None
        self._model: str | None = None
        self._model_is_fallback = False
        self._counted: set[tuple[Any, ...]] = set()
        self._replay: str | None = None
        # de-duplication of text stored twice: hashes of texts one record kind wrote that the other has not yet
        self._unmatched: dict[tuple[str, str], deque[int]] = {
            (role, src): deque(maxlen=32) for role in ("user", "assistant") for src in ("event", "item")
        }
        # errors known from end events before the output arrives: call_id -> (is_error, kind)
        self._hints: dict[str, tuple[bool, str | None]] = {}
        self._legacy = False  # a rollout from before the envelopes: its items are bare (``legacy_header``)

    def _builder(self) -> SessionBuilder:
        if self.b is None:
            self.b = self.ctx.builder(FORMAT, _session_id_from_path(self.ctx.path))
        return self.b

    # -- dispatch ------------------------------------------------------------------------------------------------------
    def feed(self, rec: Any, line: int) -> None:
        if not isinstance(rec, dict):
            self.ctx.error(line, "not a JSON object", rec)
            return
        kind = rec.get("type")
        if kind not in _ENVELOPES:
            if self._legacy or legacy_header(rec):
                self._legacy_record(rec, line)
            return  # newer record kinds (world_state, realtime_item, ...) carry no calls or prompts
        p = rec.get("payload")
        if not isinstance(p, dict):
            self.ctx.error(line, f"codex {kind} record without a payload object", rec)
            return
        b = self._builder()
        ts = rec.get("timestamp")
        b.see_ts(ts)
        if kind == "response_item":
            self._item(b, p, ts, line)
        elif kind == "event_msg":
            self._event(b, rec, p, ts, line)
        elif kind == "turn_context":
            model = _model_of(p)
            if model:
                self._model, self._model_is_fallback = model, False
            if not b.cwd and isinstance(p.get("cwd"), str):
                b.cwd = p["cwd"]
        elif kind == "session_meta":
            self._meta(b, p, line)

    def _legacy_record(self, rec: dict[str, Any], line: int) -> None:
        """A line of a rollout from before the envelopes: the session header, a bare response item (no timestamp of
        its own), or a state snapshot (nothing to read)."""
        if legacy_header(rec) and not self._meta_seen:
            self._legacy = True
            self._meta(self._builder(), {"id": rec["id"], "timestamp": rec["timestamp"]}, line)
        elif "record_type" not in rec and isinstance(rec.get("type"), str):
            b = self._builder()
            if not b.cwd and rec.get("role") == "user":  # no turn_context yet: the cwd is in the injected context
                m = _CWD.search(text_of(rec.get("content")))
                if m:
                    b.cwd = m.group(1).strip()
            self._item(b, rec, None, line)

    def _meta(self, b: SessionBuilder, p: dict[str, Any], line: int) -> None:
        if self._meta_seen:
            return  # a fork or resume may carry its source's meta too; the file's first one names the session
        self._meta_seen = True
        sid = p.get("id")
        if isinstance(sid, str) and sid and not b.n_turns and not b.n_calls and self._req is None:
            b.session_id = sid
        if isinstance(p.get("cwd"), str):
            b.cwd = p["cwd"]
        if isinstance(p.get("cli_version"), str):
            b.agent_version = p["cli_version"]
        b.see_ts(parse_ts(p.get("timestamp")))
        src = p.get("source")
        spawn = src.get("subagent") if isinstance(src, dict) else None
        spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
        parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
        if isinstance(parent, str) and parent:
            b.parent_session_id = parent
            if line == 1:  # ccusage looks for the spawn on the first line only
                self._replay = replay_second(self.ctx.path, self.ctx.files)
        else:
            fork = p.get("forked_from_id")  # a fork is a new thread whose history starts as its source's
            if isinstance(fork, str) and fork:
                b.parent_session_id = fork

    # -- response items ------------------------------------------------------------------------------------------------
    def _item(self, b: SessionBuilder, p: dict[str, Any], ts: Any, line: int) -> None:
        t = p.get("type")
        if t == "message":
            role = p.get("role")
            if role == "user":
                content = p.get("content")
                if isinstance(content, list) and content:
                    self._prompt(b, text_of(content), ts, line, "item")
            elif role == "assistant":
                self._text(text_of(p.get("content")), ts, line, "item")
            return  # developer / system: instructions, not turns
        if t in _CALL_ITEMS:
            self._call(b, t, p, ts, line)
        elif t in _OUTPUT_ITEMS:
            self._output(b, p, ts, line)
        elif t == "reasoning":
            self._request(ts, line)

    def _call(self, b: SessionBuilder, t: str, p: dict[str, Any], ts: Any, line: int) -> None:
        cid = p.get("call_id") or p.get("id")
        cid = str(cid) if cid else None
        if t == "function_call":
            tool, args = _tool_name(p, "?"), parse_arguments(p.get("arguments"))
        elif t == "custom_tool_call":
            inp = p.get("input")
            tool, args = _tool_name(p, "?"), {"input": inp if isinstance(inp, str) else parse_arguments(inp)}
        elif t == "local_shell_call":
            action = p.get("action")
            tool, args = "local_shell", action if isinstance(action, dict) else {}
        else:  # web_search_call: the search ran server-side and its result is not in the rollout
            action = p.get("action")
            tool, args = "web_search", action if isinstance(action, dict) else {}
        r = self._request(ts, line)
        b.call(cid, tool, args, ts, line, turn_id=r.tid)

    def _output(self, b: SessionBuilder, p: dict[str, Any], ts: Any, line: int) -> None:
        cid = p.get("call_id")
        cid = str(cid) if cid else ""
        text, code, flag = parse_output(p.get("output"))
        is_error, kind = classify(text, code, flag, self._hints.pop(cid, None))
        if self._req is not None:
            self._req.saw_output = True
        if not b.result(cid, text, is_error, ts, kind):
            self.ctx.error(line, f"tool output for a call not in this file ({cid or 'no call_id'})", p)

    # -- events --------------------------------------------------------------------------------------------------------
    def _event(self, b: SessionBuilder, rec: dict[str, Any], p: dict[str, Any], ts: Any, line: int) -> None:
        t = p.get("type")
        if t == "token_count":
            self._token_count(rec, p, line)
        elif t == "user_message":
            kind = p.get("kind")
            msg = p.get("message")
            if isinstance(msg, str) and kind in (None, "plain"):
                self._prompt(b, msg, ts, line, "event")
        elif t == "agent_message":
            msg = p.get("message")
            if isinstance(msg, str):
                self._text(msg, ts, line, "event")
        elif t == "exec_command_end":
            code = p.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                self._hint(p.get("call_id"), (code != 0, "exit_code" if code != 0 else None))
        elif t == "patch_apply_end":
            ok = p.get("success")
            if isinstance(ok, bool):
                self._hint(p.get("call_id"), (not ok, None if ok else "flag"))
        elif t == "mcp_tool_call_end":
            res = p.get("result")
            if isinstance(res, dict):
                okv = res.get("Ok")
                failed = "Err" in res or (isinstance(okv, dict) and okv.get("isError") is True)
                self._hint(p.get("call_id"), (failed, "flag" if failed else None))

    def _hint(self, cid: Any, hint: tuple[bool, str | None]) -> None:
        if isinstance(cid, str) and cid and self.b is not None and self.b.has_pending(cid):
            if len(self._hints) >= _MAX_HINTS:
                self._hints.pop(next(iter(self._hints)))
            self._hints[cid] = hint

    # -- text, prompts, requests ---------------------------------------------------------------------------------------
    def _once(self, role: str, src: str, text: str) -> bool:
        """False for the second copy of a text the other record kind already wrote."""
        h = hash(text.strip())
        other = self._unmatched[(role, "item" if src == "event" else "event")]
        if h in other:
            other.remove(h)
            return False
        self._unmatched[(role, src)].append(h)
        return True

    def _prompt(self, b: SessionBuilder, text: str, ts: Any, line: int, src: str) -> None:
        if _is_injected(text) or not self._once("user", src, text):
            return
        self._close_request()
        b.user_prompt(text, ts, line)

    def _text(self, text: str, ts: Any, line: int, src: str) -> None:
        if text.strip() and self._once("assistant", src, text):
            self._request(ts, line).texts.append(text)

    def _request(self, ts: Any, line: int) -> _Request:
        """The open model request, or a new one when none is open or the model already saw tool output."""
        r = self._req
        if r is not None and not r.saw_output:
            return r
        if r is not None:
            self._close_request()
        self._n_requests += 1
        tid = f"L{line}"
        if tid == self._last_tid:  # two requests starting on one physical line (glued records)
            tid = f"L{line}.{self._n_requests}"
        self._last_tid = tid
        self._req = _Request(tid, ts, line)
        return self._req

    def _close_request(self, usage: Usage | None = None, model: str | None = None) -> None:
        r, self._req = self._req, None
        if r is None:
            return
        current = None if self._model_is_fallback else self._model
        self._builder().assistant(r.tid, "\n".join(r.texts) or None, r.ts, r.line, model=model or current, usage=usage)

    # -- tokens --------------------------------------------------------------------------------------------------------
    def _token_count(self, rec: dict[str, Any], p: dict[str, Any], line: int) -> None:
        instant = usage_instant(rec.get("timestamp"))
        if instant is None:
            return
        info = p.get("info") if isinstance(p.get("info"), dict) else None
        last = raw_usage(info.get("last_token_usage")) if info else None
        total = raw_usage(info.get("total_token_usage")) if info else None
        if self._replay is not None and (last is not None or total is not None):
            if instant[:19] == self._replay:
                if total is not None:
                    self._prev_totals = total
                return
            self._replay = None  # the replay is over at the first usage event outside its second
        raw = last if last is not None else (_minus(total, self._prev_totals) if total is not None else None)
        if total is not None:
            self._prev_totals = total
        if raw is None or raw.input == raw.cached == raw.output == raw.reasoning == 0:
            return
        model = self._resolve_model(_model_of(p) or _model_of(info), instant)
        cached = min(raw.cached, raw.input)
        key = (instant, model, raw.input, cached, raw.output, raw.reasoning, raw.total)
        if key in self._counted:
            return  # the same count emitted twice
        self._counted.add(key)
        if self._req is None:
            self._request(rec.get("timestamp"), line)
        self._close_request(
            Usage(input=raw.input - cached, cache_read=cached, output=raw.output, total=raw.total), model
        )

    def _resolve_model(self, parsed: str | None, instant: str) -> str:
        if parsed:
            self._model, self._model_is_fallback = parsed, False
        model = parsed or self._model
        if model is None:
            model, self._model, self._model_is_fallback = "gpt-5", "gpt-5", True
        return _auto_review(instant) if model == "codex-auto-review" else model

    def close(self) -> int:
        if self.b is None:
            return 0
        self._close_request()
        self.b.finish()
        return 1
