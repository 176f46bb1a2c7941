"""pi coding agent sessions (v1 without ids, v2/v3 with the ``id``/``parentId`` tree). docs/formats.md#pi.

Calls are read in file order, which is append order: abandoned branches happened and cost tokens, and a branch starts
at a user prompt, which resets loop counting anyway. A user's ``!command`` (``bashExecution``) is not an agent call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analyzer.ingest.base import FileContext, result_text_of, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder, as_int

FORMAT = "pi"
ALIASES = ("pi-agent", "pi-coding-agent")
SNIFF_RANK = 30  # pi's records are looser than Codex's and Claude's: tried after them


def default_roots() -> list[Path]:
    """``$PI_CODING_AGENT_DIR/sessions``, else ``~/.pi/agent/sessions``."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return [Path(env) / "sessions" if env else Path.home() / ".pi/agent/sessions"]


_ROLES = {
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "hookMessage",
    "branchSummary",
    "compactionSummary",
    "system",
}


def sniff(rec: Any) -> bool:
    if not isinstance(rec, dict) or "payload" in rec or "sessionId" in rec:
        return False
    if rec.get("type") == "session" and "cwd" in rec:
        return True
    msg = rec.get("message")
    return rec.get("type") == "message" and isinstance(msg, dict) and msg.get("role") in _ROLES


def _session_id_from_path(path: Path) -> str:
    stem = path.stem
    return stem.rsplit("_", 1)[-1] if "_" in stem else stem


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.b: SessionBuilder | None = None
        self.sessions = 0

    def _builder(self, rec: dict[str, Any] | None = None) -> SessionBuilder:
        if self.b is None:
            sid = (rec or {}).get("id") if rec else None
            self.b = self.ctx.builder(FORMAT, str(sid) if sid else _session_id_from_path(self.ctx.path))
        return self.b

    def feed(self, rec: Any, line: int) -> None:
        if not isinstance(rec, dict):
            self.ctx.error(line, "not a JSON object", rec)
            return
        kind = rec.get("type")
        if kind == "session":
            if self.b is not None and self.b.n_turns:
                self.close_session()
            b = self._builder(rec)
            b.session_id = str(rec.get("id") or b.session_id)
            b.cwd = rec.get("cwd") or b.cwd
            v = rec.get("version")
            b.agent_version = f"session v{v}" if v is not None else "session v1"
            parent = rec.get("parentSession") or rec.get("branchedFrom")
            if isinstance(parent, str) and parent:
                b.parent_session_id = _session_id_from_path(Path(parent))
            b.see_ts(rec.get("timestamp"))
            return
        if kind != "message":
            return  # model_change, thinking_level_change, compaction, label, custom, session_info, ...
        msg = rec.get("message")
        if not isinstance(msg, dict):
            self.ctx.error(line, "pi message entry without a message object", rec)
            return
        b = self._builder()
        role = msg.get("role")
        ts = rec.get("timestamp") or msg.get("timestamp")
        if role == "user":
            b.user_prompt(text_of(msg.get("content")), ts, line, turn_id=rec.get("id"))
        elif role == "assistant":
            self._assistant(b, rec, msg, ts, line)
        elif role == "toolResult":
            cid = msg.get("toolCallId")
            text = result_text_of(msg.get("content"))
            if not b.result(cid, text, bool(msg.get("isError")), ts):
                self.ctx.error(line, f"tool result for a call not in this file ({cid})", rec)
        # bashExecution is the user's own shell command; custom/summary roles carry no calls.

    def _assistant(self, b: SessionBuilder, rec: dict[str, Any], msg: dict[str, Any], ts: Any, line: int) -> None:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        text = text_of(content)
        u = msg.get("usage")
        usage = None
        if isinstance(u, dict):
            cost = u.get("cost")
            total_cost = cost.get("total") if isinstance(cost, dict) else None
            usage = Usage(
                input=as_int(u.get("input")),
                output=as_int(u.get("output")),
                cache_read=as_int(u.get("cacheRead")),
                cache_write=as_int(u.get("cacheWrite")),
                cost=total_cost if type(total_cost) in (int, float) else None,
            )
        tid = b.assistant(rec.get("id") or f"L{line}", text, ts, line, model=msg.get("model"), usage=usage)
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                b.call(
                    block.get("id"),
                    str(block.get("name") or "?"),
                    block.get("arguments"),
                    ts,
                    line,
                    turn_id=tid,
                    parent_call_id=block.get("parentToolCallId"),
                )

    def close_session(self) -> None:
        if self.b is not None:
            self.b.finish()
            self.sessions += 1
            self.b = None

    def close(self) -> int:
        self.close_session()
        return self.sessions
