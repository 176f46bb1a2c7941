"""Gemini CLI chats (``~/.gemini/tmp/<project>/chats/``). docs/formats.md#gemini-cli.

Two layouts: until v0.38 a chat is one JSON ``ConversationRecord`` (rewritten whole on every change); from v0.39 it
is append-only JSONL: a metadata line, message records, ``{"$set": {...}}`` updates and ``{"$rewindTo": id}``.

In JSONL the same message id is appended again each time the message grows (tokens arrive later, tool calls are
merged in), so messages are keyed by id: the last write wins and the message keeps the place where it first
appeared, as ccusage does. ``$set.messages`` checkpoints are merged the same way. ``$rewindTo`` is *not* applied:
rewound-away work happened and consumed tokens (ccusage counts it too), like pi's abandoned branches.

A tool call's result sits in its own ``ToolCallRecord`` (``result[].functionResponse.response.output|error``);
``status`` ``error`` or ``cancelled`` marks it failed. Tokens: ``input`` includes ``cached`` and ``output`` excludes
``thoughts``, so a turn's input is ``input - cached (+ tool)``, its cache read ``cached``, its output
``output + thoughts`` (thinking is billed as output) and its total the recorded ``total``.

Resuming a legacy chat makes the CLI write all of it again to ``<name>.jsonl`` and leave the ``.json``: a legacy
file with that sibling yields no session (one recorded note says so), the ``.jsonl`` holds it whole.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analyzer.ingest.base import LOCAL, FileContext, Files, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder, as_int

FORMAT = "gemini_cli"
ALIASES = ("gemini", "gemini-cli")
SNIFF_RANK = 15


def default_roots() -> list[Path]:
    """ccusage's ``GEMINI_DATA_DIR`` (comma-separated tmp folders), else ``$GEMINI_CLI_HOME/.gemini/tmp``."""
    env = os.environ
    if env.get("GEMINI_DATA_DIR"):
        return [Path(p.strip()) for p in env["GEMINI_DATA_DIR"].split(",") if p.strip()]
    return [Path(env.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini/tmp"]


def companion_state(path: str, size: int, mtime_ns: int, files: Files = LOCAL) -> tuple[int, int] | None:
    """A legacy single-JSON chat ``session-*.json`` counts the ``.jsonl`` the CLI migrates it to on resume, so the
    legacy copy is read again (and yields to the ``.jsonl``) once that appears."""
    name = os.path.basename(path)
    if not (name.startswith("session-") and name.endswith(".json")):
        return None
    st = files.stat(path + "l")
    if st is None:
        return None
    return size + st[0], max(mtime_ns, st[1])


def file_group(path: str) -> str | None:
    """A legacy ``session-*.json`` is read knowing whether its migrated ``.jsonl`` is there: the two go together."""
    name = os.path.basename(path)
    if name.startswith("session-") and name.endswith((".json", ".jsonl")):
        return path.removesuffix("l")
    return None


_MESSAGE_TYPES = {"user", "gemini", "info", "error", "warning"}
_DONE = {"success", "error", "cancelled"}
_FAILED = {"error", "cancelled"}


def sniff(rec: Any) -> bool:
    """A JSONL chat line: the metadata header, a ``$set``/``$rewindTo`` update, or a ``gemini`` message."""
    if not isinstance(rec, dict) or "payload" in rec:
        return False
    if "sessionId" in rec and "projectHash" in rec and "uuid" not in rec:
        return True
    if isinstance(rec.get("$set"), dict) or isinstance(rec.get("$rewindTo"), str):
        return True
    return rec.get("type") == "gemini" and isinstance(rec.get("id"), str) and "content" in rec and "uuid" not in rec


def sniff_document(doc: Any) -> bool:
    """A legacy single-JSON chat: a ConversationRecord."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("messages"), list)
        and "sessionId" in doc
        and ("projectHash" in doc or "startTime" in doc)
    )


def usage_of(tokens: Any) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    inp, cached = as_int(tokens.get("input")), as_int(tokens.get("cached"))
    out, thoughts, tool = as_int(tokens.get("output")), as_int(tokens.get("thoughts")), as_int(tokens.get("tool"))
    total = tokens.get("total")
    return Usage(
        input=inp - min(inp, cached) + tool,
        output=out + thoughts,
        cache_read=cached,
        total=as_int(total) if total is not None else inp + out + thoughts + tool,
    )


def result_of(tc: dict[str, Any]) -> tuple[str | None, bool]:
    """(result text, is_error) of a ToolCallRecord; text ``None`` while the call has not finished."""
    status = tc.get("status")
    texts: list[str] = []
    failed = status in _FAILED
    res = tc.get("result")
    for part in res if isinstance(res, list) else [res] if isinstance(res, dict) else []:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        resp = fr.get("response") if isinstance(fr, dict) else None
        if isinstance(resp, dict):
            if "error" in resp and resp["error"] not in (None, ""):
                failed = True
                texts.append(_as_text(resp["error"]))
            elif "output" in resp:
                texts.append(_as_text(resp["output"]))
            else:
                texts.append(_as_text(resp))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not texts and isinstance(tc.get("resultDisplay"), str):
        texts.append(tc["resultDisplay"])
    if not texts and status not in _DONE and res is None:
        return None, False
    return "\n".join(texts), failed


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import orjson

    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.meta: dict[str, Any] = {}
        self.messages: dict[str, tuple[dict[str, Any], int]] = {}  # id -> (last record, its line), first-seen order
        self.anon = 0
        self.sessions = 0
        self.legacy = False

    # -- reading -------------------------------------------------------------------------------------------------------
    def feed(self, rec: Any, line: int) -> None:
        if not isinstance(rec, dict):
            self.ctx.error(line, "not a JSON object", rec)
            return
        if isinstance(rec.get("messages"), list) and "sessionId" in rec:  # a whole legacy document
            self.legacy = True
            self.meta.update({k: v for k, v in rec.items() if k != "messages"})
            for i, m in enumerate(rec["messages"]):
                self._message(m, line, f"messages[{i}]")
            return
        if "$set" in rec:
            upd = rec["$set"]
            if not isinstance(upd, dict):
                self.ctx.error(line, "Gemini CLI $set update that is not an object", rec)
                return
            self.meta.update({k: v for k, v in upd.items() if k != "messages"})
            msgs = upd.get("messages")
            if isinstance(msgs, list):
                for i, m in enumerate(msgs):
                    self._message(m, line, f"$set.messages[{i}]")
            return
        if "$rewindTo" in rec:
            return  # not applied: see the module docstring
        if "type" in rec and "id" in rec:
            self._message(rec, line, None)
            return
        if "sessionId" in rec or "projectHash" in rec:
            self.meta.update(rec)
            return
        self.ctx.error(line, "Gemini CLI record of no known kind", rec)

    def _message(self, m: Any, line: int, where: str | None) -> None:
        at = f" ({where})" if where else ""
        if not isinstance(m, dict):
            self.ctx.error(line, f"Gemini CLI message that is not an object{at}", m)
            return
        kind = m.get("type")
        if kind not in _MESSAGE_TYPES:
            self.ctx.error(line, f"Gemini CLI message of unknown type {kind!r}{at}", m)
            return
        mid = m.get("id")
        if not isinstance(mid, str) or not mid:
            mid = f"#anon{self.anon}"
            self.anon += 1
        self.messages[mid] = (m, line)

    # -- writing -------------------------------------------------------------------------------------------------------
    def _session_id(self) -> str:
        sid = self.meta.get("sessionId")
        if isinstance(sid, str) and sid:
            return sid
        return self.ctx.path.stem

    def close(self) -> int:
        if not self.messages and not self.meta:
            return 0
        path: Path = self.ctx.path
        if self.legacy and path.suffix == ".json" and self.ctx.files.stat(str(path) + "l") is not None:
            self.ctx.error(
                None,
                f"Gemini CLI legacy chat superseded by {path.name}l, which the CLI migrated it to "
                "when the session was resumed: the session is read from there",
            )
            return 0
        parent = None
        if self.meta.get("kind") == "subagent" or (path.parent.name != "chats" and path.parent.parent.name == "chats"):
            if path.parent.name != "chats":
                parent = path.parent.name
        b = self.ctx.builder(FORMAT, self._session_id(), parent_session_id=parent)
        dirs = self.meta.get("directories")
        if isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
            b.cwd = dirs[0]
        b.see_ts(self.meta.get("startTime"))
        for mid, (m, line) in self.messages.items():
            try:
                self._write(b, mid, m, line)
            except Exception as exc:  # noqa: BLE001 - one bad message must not lose the session
                self.ctx.error(line, f"Gemini CLI message {mid} could not be read ({type(exc).__name__}: {exc})", m)
        b.see_ts(self.meta.get("lastUpdated"))
        b.finish()
        self.sessions = 1
        return 1

    def _write(self, b: SessionBuilder, mid: str, m: dict[str, Any], line: int) -> None:
        kind = m.get("type")
        ts = m.get("timestamp")
        if kind == "user":
            b.user_prompt(text_of(m.get("content")), ts, line, turn_id=mid)
            return
        if kind != "gemini":
            b.see_ts(ts)
            return  # info / error / warning: the CLI's own notices
        model = m.get("model") if isinstance(m.get("model"), str) else None
        tid = b.assistant(mid, text_of(m.get("content")), ts, line, model=model, usage=usage_of(m.get("tokens")))
        calls = m.get("toolCalls")
        if calls is None:
            return
        if not isinstance(calls, list):
            self.ctx.error(line, "Gemini CLI toolCalls that is not a list", m)
            return
        for tc in calls:
            if not isinstance(tc, dict) or not isinstance(tc.get("name"), str):
                self.ctx.error(line, "Gemini CLI tool call without a name", tc)
                continue
            cid = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else None
            b.call(cid, tc["name"], tc.get("args"), tc.get("timestamp") or ts, line, turn_id=tid)
            text, failed = result_of(tc)
            if text is not None:
                b.result(
                    cid or f"#{b.n_calls - 1}",
                    text,
                    failed,
                    tc.get("timestamp") or ts,
                    error_kind="rejected" if tc.get("status") == "cancelled" else None,
                )
