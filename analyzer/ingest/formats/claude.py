"""Claude Code transcripts (``~/.claude/projects/<project>/<sessionId>.jsonl``). docs/formats.md#claude-code.

Sessions. A record belongs to its ``sessionId``; a subagent record (``isSidechain`` with an ``agentId``, or any record
of a file named ``agent-*.jsonl``, in either layout: beside the session file or under ``<sessionId>/subagents/``)
belongs to the session ``agent-<agentId>`` whose parent is the trunk ``sessionId``. A file of only ``summary``,
``file-history-snapshot``, ``queue-operation`` or newer bookkeeping lines (``last-prompt``, ``ai-title``,
``attachment``, ``mode``, ``permission-mode``, …: recognised, ignored quietly), or a subagent's
``agent-<id>.meta.json``, is a Claude file with nothing to load: zero sessions, no error. Workflow runs put their agents
under ``<sessionId>/subagents/workflows/<run>/agent-*.jsonl`` (read as subagents of the trunk) beside a
``journal.jsonl`` of the run's steps, which is not a transcript: skipped with that reason (``describe_file``), unless
its lines are transcript lines. A resumed session copies the earlier session's lines, tool_use ids included, under its
new session id: the store keeps each such call once, in the session that ended first (``land._drop_replayed_calls``).
Some versions keep the earlier session's id on the copied user lines (between the copied replies, which carry the new
id): in a trunk file named ``<uuid>.jsonl`` that holds lines of that session, every trunk line belongs to it
(``_own``; lines of another id before its first line are held until it comes). Read as a session of their own, the
copied prompts would claim the earlier session's id first, and its own file would then be refused as a duplicate.
A resumed subagent can also write its own earlier lines again into its file (same ``uuid``s): a user or assistant
line whose ``uuid`` the session already read is a copy, read once.

Calls and turns. Lines are read in file order (append order). One API response is written as one line per content
block, all sharing ``message.id``; they become one assistant turn (``turn_id`` = ``message.id``). ``tool_use`` (and the
API's own ``server_tool_use``) blocks are calls; ``tool_result`` blocks on user lines are their results. A result the
user refused ("The user doesn't want to proceed with this tool use…", or an interrupt of a running tool) is an error
with ``error_kind='rejected'``. A call that never ran because a sibling in its parallel batch failed ("Cancelled:
parallel tool call …", "Sibling tool call errored") is ``cancelled``, and arguments the tool refused before running
(``InputValidationError``, any ``<tool_use_error>``) ``validation``: not retries of a failing command. A result that
only points at an earlier one ("File unchanged since last read", "… identical to result …") is not an error but is
marked ``error_kind='placeholder'``, so it is never evidence of "the same result again". ``progress`` lines are ignored
whole: the subagent messages ``agent_progress`` embeds also live in the subagent's own file, so reading them would count
its calls twice.

User prompts (a prompt starts a new user turn, where loop counting resets): a user line whose content is not only
``tool_result`` blocks, except ``isMeta`` lines (caveats, expanded skill text), ``isCompactSummary`` lines (the summary
that continues a compacted session), output the user did not type (``<local-command-stdout>``, the ``!`` shell mode's
``<bash-input>``/``<bash-stdout>``, which like pi's ``!cmd`` is neither a prompt nor an agent call) and the
``[Request interrupted by user]`` marker. A slash command line (``<command-name>/init</command-name>…``) *is* a prompt,
stored as ``/init args``: the user acted, and for a command that makes the model work (``/init``, custom commands) it
is the instruction being answered; a local command (``/model``) merely adds a turn in which nothing runs. A message the
user queued while the agent was working and that the agent absorbed mid-turn (``attachment`` of type
``queued_command`` from a human) is a prompt too: the user stepped in. In the trunk, a sidechain's own user lines
(subagent transcripts written inline, without ``agentId``) are not the user's prompts.

Tokens agree with ``ccusage claude session`` 20.0.24 (checked against the binary, whose rules differ in places from
the repository's README). ccusage counts every line with a ``message.usage`` its schema accepts (``_usage``: a strict
timestamp, a semver ``version``, integer token counts, no null ``id``/``model``/... anywhere in the line) and keeps one
entry per response across all files, the largest, a non-sidechain copy winning over a sidechain one. A response is
(``message.id``, ``requestId``), or (``sessionId``, ``message.id``) when there is no ``requestId`` (Bedrock). A
sidechain line with another request id also joins a response of the same session when it carries the timestamp of
the line that response kept: that drops the copies of parent messages a ``/btw`` aside replays when the copied
message was one line, but not (in ccusage either) when it was several.

``usage_key`` reproduces this for the store, which counts one row per key (non-sidechain first, then the largest):
``message.id`` for a trunk response (a second request id for the same message id, seen later in the file, gets
``message.id:requestId``: ccusage counts both), ``message.id@sessionId`` without a request id, and for a sidechain
response ``message.id`` when all its lines share one timestamp (so a replayed one-line message falls onto the trunk's
row and loses to it) or ``message.id:requestId`` when they do not (a replayed split message, which ccusage counts
again). Sidechain lines are therefore held until their response is complete (the next record that is not one of its
lines), a few lines at most. Lines without ``message.id`` are not deduplicated, like ccusage. ``cache_creation``
(5m + 1h) wins over ``cache_creation_input_tokens`` when present, and ``advisor_message`` iterations add their usage,
as ccusage reports them. ``costUSD``, when a line records it, is the turn's cost.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.base import FileContext, result_text_of, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder

FORMAT = "claude_code"
ALIASES = ("claude", "claude-code", "cc")
SNIFF_RANK = 20


def default_roots() -> list[Path]:
    """``$CLAUDE_CONFIG_DIR/projects``, else ``~/.claude/projects`` and ``~/.config/claude/projects``."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    home = Path.home()
    return [Path(env) / "projects"] if env else [home / ".claude/projects", home / ".config/claude/projects"]


def describe_file(path: Path) -> str | None:
    """Why a Claude Code file no format reads is skipped: a workflow run's ``journal.jsonl`` (beside its agents'
    ``agent-*.jsonl`` under ``<session>/subagents/workflows/<run>/``) records the run's steps, not messages or calls.
    A journal whose lines are transcript lines would be read like any other file."""
    if path.name == "journal.jsonl" and "workflows" in path.parts:
        return (
            "Claude Code workflow journal (subagents/workflows/<run>/journal.jsonl): the run's bookkeeping, "
            "not a transcript; the run's agent-*.jsonl files are read"
        )
    return None


_REJECTED = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action right now",
    "[Request interrupted by user for tool use]",
)
# Results Claude Code writes instead of the real output, pointing at an earlier one: never evidence of "the same
# result again" (``error_kind='placeholder'``, ``is_error`` false).
_PLACEHOLDERS = ("File unchanged since last read",)
_PLACEHOLDER_INNER = "identical to result"
# A call that never ran because a sibling in the same parallel batch failed, and arguments the tool refused before
# running: not retries of a failing command (``error_kind`` ``cancelled`` / ``validation``).
_CANCELLED = ("Cancelled: parallel tool call", "Sibling tool call errored")
_VALIDATION = ("InputValidationError", "<tool_use_error>")
# Line types newer builds write that hold nothing to load; recognised (a file of only these is a Claude file) and
# ignored quietly.
_QUIET_TYPES = frozenset(
    {
        "last-prompt",
        "ai-title",
        "attachment",
        "mode",
        "permission-mode",
        "custom-title",
        "agent-setting",
        "pr-link",
        "agent-name",
    }
)
_NOT_PROMPTS = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)

# ccusage's schema, mirrored so a line counts here exactly when it counts there (rust/crates/ccusage/src/adapter/
# claude/mod.rs, checked against the 20.0.24 binary): a timestamp of exactly this shape, a semver-prefixed version,
# and none of these keys set to null anywhere in the line.
_TS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{3})?(?:Z|[+-][0-9]{2}:[0-9]{2})")
_SEMVER = re.compile(r"[0-9]+\.[0-9]+\.[0-9]")
_NULL_FIELDS = frozenset(
    {
        "id",
        "cwd",
        "model",
        "speed",
        "costUSD",
        "version",
        "sessionId",
        "requestId",
        "isApiErrorMessage",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    }
)
_NULL_KEYS = frozenset(f.encode() for f in _NULL_FIELDS)  # the keys as they read in orjson's output, before `":null`
_SPEEDS = frozenset({"fast", "standard"})
_SYNTHETIC = "<synthetic>"


def sniff(rec: Any) -> bool:
    if not isinstance(rec, dict) or "payload" in rec or "projectHash" in rec:
        return False
    kind = rec.get("type")
    if kind == "summary":
        return "leafUuid" in rec
    if kind == "file-history-snapshot":
        return "snapshot" in rec
    if kind == "queue-operation":
        return "operation" in rec
    if kind in _QUIET_TYPES and "sessionId" in rec:
        return True
    if "sessionId" not in rec:
        return "agentType" in rec and "toolUseId" in rec  # a subagent's agent-<id>.meta.json: nothing to load
    if "uuid" in rec or "parentUuid" in rec:
        return True
    msg = rec.get("message")
    return isinstance(msg, dict) and ("usage" in msg or msg.get("role") in ("user", "assistant"))


# -- usage, as ccusage reads it ------------------------------------------------------------------------------------


def _count(value: Any) -> int | None:
    """A token count as ccusage's u64 fields accept it: a non-negative JSON integer (not a float, string or bool)."""
    return value if type(value) is int and value >= 0 else None


def _tokens(u: dict[str, Any]) -> Usage | None:
    """One usage object; ``None`` when ccusage would reject the line for it."""
    inp, out = _count(u.get("input_tokens")), _count(u.get("output_tokens"))
    cache_read = _count(u.get("cache_read_input_tokens", 0))
    cache_write = _count(u.get("cache_creation_input_tokens", 0))
    if inp is None or out is None or cache_read is None or cache_write is None:
        return None
    speed = u.get("speed")
    if speed is not None and speed not in _SPEEDS:
        return None
    cc = u.get("cache_creation")
    if isinstance(cc, dict):
        five, hour = _count(cc.get("ephemeral_5m_input_tokens", 0)), _count(cc.get("ephemeral_1h_input_tokens", 0))
        if five is None or hour is None:
            return None
        cache_write = five + hour
    elif cc is not None:
        return None
    return Usage(input=inp, output=out, cache_read=cache_read, cache_write=cache_write)


def _has_null_field(obj: Any) -> bool:
    """ccusage skips a line where one of ``_NULL_FIELDS`` is null at any depth (even inside a tool's input). Most
    lines hold none, which a search of orjson's output tells several times faster than a walk in Python (the walk
    confirms a hit: a key that holds an escaped quote could look like one)."""
    try:
        text = orjson.dumps(obj)
        # Every `":null` (Claude Code writes one or two a line, ``stop_sequence``), its key read back to the quote
        # before it: a few ``find``s instead of one scan of the line per field (0.6 s of 290 MB of Claude Code).
        at = text.find(b'":null')
        while at >= 0:
            if text[text.rfind(b'"', 0, at) + 1 : at] in _NULL_KEYS:
                break
            at = text.find(b'":null', at + 6)
        else:
            return False
    except (TypeError, orjson.JSONEncodeError):  # integers beyond 64 bits: walk
        pass
    stack = [obj]
    while stack:
        o = stack.pop()
        items = o.items() if isinstance(o, dict) else enumerate(o)
        for k, v in items:
            if v is None:
                if k in _NULL_FIELDS:
                    return True
            elif isinstance(v, (dict, list)):
                stack.append(v)
    return False


def _valid_ts(ts: Any) -> bool:
    if not isinstance(ts, str) or not _TS.fullmatch(ts):
        return False
    try:
        datetime.fromisoformat(ts)
    except ValueError:
        return False
    return True


def _usage(rec: dict[str, Any], msg: dict[str, Any]) -> tuple[Usage, bool] | None:
    """The line's usage and whether it is a ``fast`` one, when ccusage counts this line; else ``None``."""
    u = msg.get("usage")
    if not isinstance(u, dict) or not _valid_ts(rec.get("timestamp")):
        return None
    for key in ("version", "sessionId", "requestId"):
        if key in rec and (not isinstance(rec[key], str) or not rec[key]):
            return None
    if "version" in rec and not _SEMVER.match(rec["version"]):
        return None
    for key in ("isSidechain", "isApiErrorMessage"):
        if rec.get(key) is not None and not isinstance(rec[key], bool):
            return None
    cost = rec.get("costUSD")
    if "costUSD" in rec and (type(cost) not in (int, float)):
        return None
    for key in ("id", "model"):
        if key in msg and (not isinstance(msg[key], str) or not msg[key]):
            return None
    usage = _tokens(u)
    if usage is None or _has_null_field(rec):
        return None
    iterations = u.get("iterations")
    if isinstance(iterations, list):
        for it in iterations:
            if not isinstance(it, dict) or it.get("type") != "advisor_message":
                continue
            model = it.get("model")
            extra = _tokens(it) if isinstance(model, str) and model else None
            if extra is not None:  # ccusage drops an advisor entry it cannot read and keeps the main one
                usage.input += extra.input
                usage.output += extra.output
                usage.cache_read += extra.cache_read
                usage.cache_write += extra.cache_write
    if cost is not None:
        usage.cost = float(cost)
    return usage, u.get("speed") is not None


# -- the parser -----------------------------------------------------------------------------------------------------


@dataclass
class _Session:
    b: SessionBuilder
    is_agent: bool
    # Best (total, has speed) passed to the builder per usage key since the last prompt: the builder keeps the last of
    # equal usages, ccusage the first (unless the later one has ``speed``), so only a strictly better one is passed.
    best: dict[str, tuple[int, bool]] = field(default_factory=dict)
    # The ``uuid`` of every user and assistant line read: a subagent transcript that is resumed can write its earlier
    # lines again, byte for byte (same uuids, same tool_use ids); a copy is not a second message or a second call.
    uuids: set[str] = field(default_factory=set)
    # The ``tool_use`` ids read: one API response recorded again on another branch of the conversation (a new
    # ``uuid``, the same ``message.id``, ``requestId`` and tool ids) is not a second call.
    call_ids: set[str] = field(default_factory=set)

    def copy(self, rec: dict[str, Any]) -> bool:
        """Whether ``rec`` is a line of this session already read (its ``uuid`` seen); records it otherwise."""
        uuid = rec.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            return False
        if uuid in self.uuids:
            return True
        self.uuids.add(uuid)
        return False


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        stem = ctx.path.stem
        self.agent_file = stem.startswith("agent-")
        self.stem = stem
        self.sessions: dict[str, _Session] = {}
        self.last_sid: str | None = None
        self.first_request: dict[str, str] = {}  # message.id -> first requestId seen on a trunk line of this file
        self.held: list[tuple[dict[str, Any], int]] = []  # the lines of the sidechain response being read
        self.held_id: tuple[Any, ...] = ()
        # A trunk file named by a session id (a UUID): lines of another session held until the file's own session
        # starts (``prefix``), then read as its own, as every later trunk line is (``own``). None and False when the
        # file is not named so.
        self.prefix: list[tuple[dict[str, Any], int]] | None = (
            [] if not self.agent_file and _SESSION_STEM.fullmatch(stem) else None
        )
        self.own = False

    # -- routing --------------------------------------------------------------------------------------------------
    def _session(self, rec: dict[str, Any]) -> _Session:
        sid = rec.get("sessionId")
        if isinstance(sid, str) and sid:
            self.last_sid = sid
        else:
            sid = self.last_sid or self.stem
        agent = rec.get("agentId")
        agent = agent if isinstance(agent, str) and agent else None
        if self.agent_file or (agent and rec.get("isSidechain") is True):
            key = f"agent-{agent}" if agent else self.stem
            parent = sid if sid != key else None
        else:
            key, parent = sid, None
        s = self.sessions.get(key)
        cwd, version = rec.get("cwd"), rec.get("version")
        if s is None:
            b = self.ctx.builder(
                FORMAT,
                key,
                cwd=cwd if isinstance(cwd, str) else None,
                parent_session_id=parent,
                agent_version=version if isinstance(version, str) else None,
            )
            s = self.sessions[key] = _Session(b, key != sid or self.agent_file)
        else:
            b = s.b
            if b.cwd is None and isinstance(cwd, str):
                b.cwd = cwd
            if b.agent_version is None and isinstance(version, str):
                b.agent_version = version
        return s

    def feed(self, rec: Any, line: int) -> None:
        if not isinstance(rec, dict):
            self.ctx.error(line, "not a JSON object", rec)
            return
        if self.prefix is not None or self.own:
            rec = self._own(rec, line)
            if rec is None:
                return
        self._feed(rec, line)

    def _own(self, rec: dict[str, Any], line: int) -> dict[str, Any] | None:
        """A trunk line of a file named by its session id, as that session's (a resumed session's copy of earlier
        prompts keeps their old id); None while it is held, before the file's own session has started."""
        sid = rec.get("sessionId")
        foreign = isinstance(sid, str) and sid and sid != self.stem and rec.get("isSidechain") is not True
        if self.own:
            return {**rec, "sessionId": self.stem} if foreign else rec
        prefix = self.prefix
        assert prefix is not None
        if sid == self.stem:
            self.prefix, self.own = None, True
            for held, at in prefix:
                self._feed({**held, "sessionId": self.stem}, at)
            return rec
        if (foreign or (prefix and not sid)) and len(prefix) < PREFIX_LINES:
            prefix.append((rec, line))  # a line without a session id (a snapshot) between held lines is held too
            return None
        if prefix:  # too long to be a copy: the held lines are what they say
            self._flush_prefix()
        return rec

    def _flush_prefix(self) -> None:
        held, self.prefix = self.prefix or [], None
        for rec, line in held:
            self._feed(rec, line)

    def _feed(self, rec: dict[str, Any], line: int) -> None:
        kind = rec.get("type")
        msg = rec.get("message")
        if kind == "assistant" or (kind != "user" and isinstance(msg, dict) and (kind is None or "usage" in msg)):
            if not isinstance(msg, dict):
                self.ctx.error(line, "assistant line without a message object", rec)
                return
            mid, rid = _str(msg.get("id")), _str(rec.get("requestId"))
            if mid and rid and rec.get("isSidechain") is True:
                ident = (mid, rec.get("sessionId"), rec.get("agentId"))
                if ident != self.held_id:
                    self._release()
                    self.held_id = ident
                self.held.append((rec, line))
                return
            self._release()
            if not mid:
                self._assistant(rec, msg, line, f"L{line}", None)
            elif not rid:
                self._assistant(rec, msg, line, mid, f"{mid}@{rec.get('sessionId') or ''}")
            else:
                first = self.first_request.setdefault(mid, rid)
                key = mid if rid == first else f"{mid}:{rid}"
                self._assistant(rec, msg, line, key, key)
        elif kind == "user":
            self._release()
            self._user(rec, line)
        elif kind == "attachment":
            self._release()
            self._attachment(rec, line)
        # summary, system, progress, file-history-snapshot, queue-operation, custom-title, ...: nothing to load. (A
        # line of another type with a top-level ``message.usage`` is read as an assistant line above, as ccusage
        # counts it; a user line with usage, never written by Claude Code, is not.)

    def _release(self) -> None:
        """Load the held sidechain response, now that all its lines are known (see the module docstring)."""
        if not self.held:
            return
        held, self.held, self.held_id = self.held, [], ()
        first = held[0][0]
        mid, rid = first["message"]["id"], first["requestId"]
        one_time = all(rec.get("timestamp") == first.get("timestamp") for rec, _ in held)
        key = mid if one_time else f"{mid}:{rid}"
        for rec, line in held:
            s = self._session(rec)
            # inside a trunk session, keep the aside's turn apart from the trunk's own turn for the same message
            self._assistant(rec, rec["message"], line, mid if s.is_agent else f"{mid}:{rid}", key, s)

    # -- assistant ------------------------------------------------------------------------------------------------
    def _assistant(
        self,
        rec: dict[str, Any],
        msg: dict[str, Any],
        line: int,
        turn_id: str,
        key: str | None,
        s: _Session | None = None,
    ) -> None:
        s = s or self._session(rec)
        if s.copy(rec):
            return
        found = _usage(rec, msg)
        usage = None
        if found is not None:
            usage, fast = found
            if key is not None:
                score = (usage.total_tokens, fast)
                prev = s.best.get(key)
                if prev is None or score[0] > prev[0] or (score[0] == prev[0] and fast and not prev[1]):
                    s.best[key] = score
                else:
                    usage = None
        model = msg.get("model")
        model = model if isinstance(model, str) and model and model != _SYNTHETIC else None
        content = msg.get("content")
        ts = rec.get("timestamp")
        tid = s.b.assistant(
            turn_id,
            text_of(content) or None,
            ts,
            line,
            model=model,
            usage=usage,
            usage_key=key,
            is_sidechain=rec.get("isSidechain") is True,
        )
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "tool_use" or btype == "server_tool_use":
                cid = _str(block.get("id"))
                if cid is not None:
                    if cid in s.call_ids:
                        continue
                    s.call_ids.add(cid)
                s.b.call(cid, str(block.get("name") or "?"), block.get("input"), ts, line, turn_id=tid)
            elif isinstance(btype, str) and btype.endswith("_tool_result"):  # a server tool's result, same message
                self._server_result(s.b, block, ts, line)

    def _server_result(self, b: SessionBuilder, block: dict[str, Any], ts: Any, line: int) -> None:
        c = block.get("content")
        is_error = isinstance(c, dict) and str(c.get("type", "")).endswith("_error")
        if is_error:
            text = str(c.get("error_code") or c.get("type"))
        elif isinstance(c, list):  # search hits: the urls are what changes from one search to the next
            text = "\n".join(str(p.get("url") or p.get("title") or "") for p in c if isinstance(p, dict))
        else:
            text = text_of(c)
        if not b.result(_str(block.get("tool_use_id")), text, is_error, ts):
            self.ctx.error(
                line,
                f"server tool result for a call not in this session ({block.get('tool_use_id')})",
                {"tool_use_id": block.get("tool_use_id")},
            )

    # -- user -----------------------------------------------------------------------------------------------------
    def _user(self, rec: dict[str, Any], line: int) -> None:
        msg = rec.get("message")
        if not isinstance(msg, dict):
            self.ctx.error(line, "user line without a message object", rec)
            return
        s = self._session(rec)
        if s.copy(rec):
            return
        content = msg.get("content")
        ts = rec.get("timestamp")
        if isinstance(content, list):
            others = []
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self._result(s.b, block, ts, line, s.call_ids)
                else:
                    others.append(block)
            if not others:
                return
            text = text_of(others)
        elif isinstance(content, str):
            text = content
        else:
            return
        if rec.get("isMeta") is True or rec.get("isCompactSummary") is True:
            return
        if rec.get("isSidechain") is True and not s.is_agent:
            return
        head = text.lstrip()
        if head.startswith(_NOT_PROMPTS):
            return
        if "<command-name>" in head[:500]:
            text = _command_text(text)
        self._prompt(s, text, ts, line, rec.get("uuid"))

    def _result(
        self,
        b: SessionBuilder,
        block: dict[str, Any],
        ts: Any,
        line: int,
        called: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        cid = _str(block.get("tool_use_id"))
        text = result_text_of(block.get("content"))
        is_error = block.get("is_error") is True
        kind = result_kind(text, is_error)
        if kind == "rejected":
            is_error = True
        if not b.result(cid, text, is_error, ts, error_kind=kind) and not (cid and cid in called):
            # (the result of a call read before: the same exchange recorded again on another branch)
            self.ctx.error(line, f"tool result for a call not in this session ({cid})", {"tool_use_id": cid})

    def _attachment(self, rec: dict[str, Any], line: int) -> None:
        att = rec.get("attachment")
        if not isinstance(att, dict) or att.get("type") != "queued_command":
            return
        prompt, origin = att.get("prompt"), att.get("origin")
        if not isinstance(prompt, str) or att.get("commandMode") not in (None, "prompt"):
            return
        if origin is not None and not (isinstance(origin, dict) and origin.get("kind") == "human"):
            return  # runtime plumbing (task notifications), not the user
        s = self._session(rec)
        if rec.get("isSidechain") is True and not s.is_agent:
            return
        self._prompt(s, prompt, rec.get("timestamp"), line, rec.get("uuid"))

    def _prompt(self, s: _Session, text: str, ts: Any, line: int, uuid: Any) -> None:
        s.best.clear()  # the builder closes every open turn here; the store picks the best row per key
        s.b.user_prompt(text, ts, line, turn_id=_str(uuid))

    def close(self) -> int:
        # The file's own session never came: a file named by a session id whose every line carries another one is
        # that session's continuation, written under the earlier id by some Claude Code versions; read as a session
        # of the earlier id it is refused as a duplicate of the earlier file, and its calls are lost.
        held, self.prefix = self.prefix or [], None
        for rec, at in held:
            self._feed({**rec, "sessionId": self.stem}, at)
        self._release()
        for s in self.sessions.values():
            s.b.finish()
        n = len(self.sessions)
        self.sessions = {}
        return n


# A Claude Code session file's name: its session id (a UUID).
_SESSION_STEM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PREFIX_LINES = 10_000  # the longest copied prefix held before the file's own session starts


def result_kind(text: str, is_error: bool) -> str | None:
    """``rejected``, ``cancelled``, ``validation`` or ``placeholder`` for a result of one of those kinds, else None
    (an ordinary result, or an error known only by its flag)."""
    head = text.lstrip()[:300]
    if head.startswith(_REJECTED):
        return "rejected"
    if not is_error:
        if head.startswith(_PLACEHOLDERS) or (_PLACEHOLDER_INNER in head and len(text) < 2000):
            return "placeholder"
        return None
    inner = head[len("<tool_use_error>") :].lstrip() if head.startswith("<tool_use_error>") else head
    if inner.startswith(_CANCELLED):
        return "cancelled"
    if any(v in head for v in _VALIDATION):
        return "validation"
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _command_text(text: str) -> str:
    """``<command-name>/init</command-name><command-args>x</command-args>`` -> ``/init x`` (1.0.x wrote ``init``)."""
    m = _COMMAND.search(text)
    if not m:
        return text
    name = m.group(1).strip()
    args = _COMMAND_ARGS.search(text)
    return f"{name if name.startswith('/') else '/' + name} {args.group(1).strip() if args else ''}".strip()
