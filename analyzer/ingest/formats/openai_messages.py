"""Plain OpenAI chat-completions ``messages`` JSONL: one conversation per line. docs/formats.md#openai-messages.

Each line is its own session. The conversation is the record's ``messages`` list, or, in dataset rows that wrap it,
any top-level list of role messages (τ-bench's ``{"task_id", "reward", "info", "traj": [...]}``) or a ``messages``
list one level down (``{"sample": {"messages": [...]}}``). A ``.json`` file holding an array of such rows is a document
(each element one session, numbered by its position), and a ``.parquet`` file of such rows, as dataset hubs export
them, is read with pyarrow in batches of rows (``sniff_file`` on the ``PAR1`` magic and a column that holds role
messages).

Datasets bend the shape in every direction: ``arguments`` as a string, an object or a
double-encoded string; ``content`` as a string, a list of parts, a dict or null; every tool_call id set to ``"0"``
(so results can only be matched by position); the legacy single ``function_call`` + role ``function``. Results carry
no error flag, so a result is an error only when the record says so explicitly (``is_error``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson

from analyzer.ingest.base import LOCAL, FileContext, Files, parse_arguments, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder, parse_ts

FORMAT = "openai_messages"
ALIASES = ("openai", "openai-messages", "messages")
SNIFF_RANK = 90  # a bare ``messages`` list is the loosest shape of all: tried last
_ID_KEYS = ("id", "uuid", "conversation_id")
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_PARQUET_BATCH = 256
# Keys known to wrap a conversation, where even an empty list is one (a τ-bench task that failed before its first turn).
_WRAPPER_KEYS = frozenset({"traj", "conversation", "conversations", "dialog", "dialogue", "chat"})


def _role_list(value: Any, loose: bool) -> bool:
    """A list of chat messages: dicts with a string ``role`` (for a wrapped list, one of the chat roles, and at
    least one message, so an unrelated list of dicts with a ``role`` is not taken for one)."""
    if not isinstance(value, list) or (loose and not value):
        return False
    head = value[:4]
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in head):
        return False
    return not loose or all(m["role"] in _ROLES for m in head)


def messages_of(rec: Any, strict: bool = True) -> list[Any] | None:
    """The conversation a record holds: ``messages``, else a top-level list of role messages under any key, else a
    ``messages`` list one level down; None when there is none. Not ``strict`` (the parser, once the file is known to
    be ours), any ``messages`` list is the conversation and its odd elements are reported one by one."""
    if not isinstance(rec, dict):
        return None
    msgs = rec.get("messages")
    if isinstance(msgs, list):
        # An empty conversation is still one (datasets ship them); a Gemini/opencode `messages` list has no `role`.
        return msgs if not strict or _role_list(msgs, False) else None
    for k, v in rec.items():
        if _role_list(v, True) or (v == [] and k in _WRAPPER_KEYS):
            return v
    for v in rec.values():
        if isinstance(v, dict) and _role_list(v.get("messages"), True):
            return v["messages"]
    return None


def sniff(rec: Any) -> bool:
    if not isinstance(rec, dict) or "payload" in rec or "projectHash" in rec:
        return False
    return messages_of(rec) is not None


def sniff_document(doc: Any) -> bool:
    """A JSON array of conversation rows (τ-bench results, a dataset split saved as one ``.json``)."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and isinstance(doc[0], dict)
        and sniff(doc[0])
        and all(isinstance(r, dict) for r in doc[:16])
    )


def sniff_file(path: Any, head: bytes, files: Files = LOCAL) -> bool:
    """A Parquet file (``PAR1``) with a column of role messages, or of rows wrapping them."""
    if head[:4] != b"PAR1":
        return False
    import pyarrow as pa
    import pyarrow.parquet as pq

    def holds_messages(t: pa.DataType) -> bool:
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            v = t.value_type
            return pa.types.is_struct(v) and v.get_field_index("role") >= 0
        if pa.types.is_struct(t):
            i = t.get_field_index("messages")
            return i >= 0 and holds_messages(t.field(i).type)
        return False

    try:
        local = files.local(str(path))
        if local is not None:
            schema = pq.read_schema(local)
        else:
            with files.open(str(path)) as f:
                schema = pq.read_schema(f)
    except Exception:  # noqa: BLE001 - a damaged Parquet file is simply not ours
        return False
    return any(holds_messages(f.type) for f in schema)


def content_text(content: Any) -> str:
    """Visible text of a ``content`` of any shape. A dict without text (a structured payload) is kept as JSON,
    so a result that is an object is not lost."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        try:
            return orjson.dumps(content, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            return repr(content)
    if isinstance(content, list):
        return text_of(content)
    return str(content)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _first(d: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = _count(d.get(k))
        if v is not None:
            return v
    return None


def parse_usage(u: Any) -> Usage | None:
    """A chat-completions ``usage`` (``prompt_tokens`` include cached ones), a Responses-API one (``input_tokens``
    with ``input_tokens_details``), or an Anthropic-style one (``cache_read_input_tokens`` apart from input)."""
    if not isinstance(u, dict):
        return None
    if "cache_read_input_tokens" in u or "cache_creation_input_tokens" in u:
        inp = _first(u, "input_tokens", "prompt_tokens") or 0
        out = _first(u, "output_tokens", "completion_tokens") or 0
        cr = _first(u, "cache_read_input_tokens") or 0
        cw = _first(u, "cache_creation_input_tokens") or 0
        if inp == out == cr == cw == 0:
            return None
        return Usage(input=inp, output=out, cache_read=cr, cache_write=cw)
    prompt = _first(u, "prompt_tokens", "input_tokens")
    out = _first(u, "completion_tokens", "output_tokens")
    total = _first(u, "total_tokens")
    if prompt is None and out is None and total is None:
        return None
    details = u.get("prompt_tokens_details") or u.get("input_tokens_details")
    cached = (_first(details, "cached_tokens") if isinstance(details, dict) else None) or _first(u, "cached_tokens")
    prompt, out = prompt or 0, out or 0
    cached = min(cached or 0, prompt)
    return Usage(input=prompt - cached, output=out, cache_read=cached, total=total)


def _str_id(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int)):
        s = str(value).strip()
        return s or None
    return None


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.sessions = 0
        self._ids: set[str] = set()

    def read(self, path: Any) -> None:
        """A Parquet file of conversation rows, a batch of rows at a time; row N (from 1) stands for line N."""
        import pyarrow.parquet as pq

        n = 0
        local = self.ctx.files.local(str(path))
        source = local if local is not None else self.ctx.files.open(str(path))  # the disk's file read natively
        for batch in pq.ParquetFile(source).iter_batches(batch_size=_PARQUET_BATCH):
            for row in batch.to_pylist():
                n += 1
                self.feed(row, n)

    def feed(self, rec: Any, line: int) -> None:
        if line == 1 and not self.sessions and sniff_document(rec):  # a document: an array of rows
            for i, row in enumerate(rec, 1):
                self.feed(row, i)
            return
        if not isinstance(rec, dict):
            self.ctx.error(line, "not a JSON object", rec)
            return
        msgs = messages_of(rec, strict=False)
        if msgs is None:
            self.ctx.error(line, "not a chat record: no `messages` list", rec)
            return
        sid = next((s for s in (_str_id(rec.get(k)) for k in _ID_KEYS) if s), None) or f"{self.ctx.path.stem}:{line}"
        if sid in self._ids:
            self.ctx.error(line, f"duplicate session id {sid} in this file; loaded as {sid}:{line}", rec)
            sid = f"{sid}:{line}"
        self._ids.add(sid)
        b = self.ctx.builder(FORMAT, sid)
        try:
            self._conversation(b, rec, msgs, line)
        finally:
            b.finish()
            self.sessions += 1

    def _conversation(self, b: SessionBuilder, rec: dict[str, Any], msgs: list[Any], line: int) -> None:
        rec_ts = rec.get("timestamp") or rec.get("created_at") or rec.get("created")
        rec_model = rec.get("model") if isinstance(rec.get("model"), str) else None
        rec_usage = parse_usage(rec.get("usage"))
        last_assistant = max(
            (i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1
        )
        if rec_usage is not None and any(isinstance(m, dict) and isinstance(m.get("usage"), dict) for m in msgs):
            rec_usage = None  # per-message usage is finer; the record total would count it twice
        pending: deque[str] = deque()  # call ids in issue order, for results that can only be matched by position
        legacy: deque[tuple[str, str]] = deque()  # (synthetic id, name) of legacy function_call calls
        n_legacy = 0
        b.see_ts(parse_ts(rec_ts))
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                self.ctx.error(line, f"message {i} is not an object", m)
                continue
            role = m.get("role")
            ts = m.get("timestamp") or m.get("created_at") or rec_ts
            if role == "user":
                b.user_prompt(content_text(m.get("content")), ts, line)
            elif role == "assistant":
                usage = parse_usage(m.get("usage"))
                if usage is None and i == last_assistant:
                    usage = rec_usage
                model = m.get("model") if isinstance(m.get("model"), str) else rec_model
                tid = b.assistant(
                    _str_id(m.get("id")) or f"m{i}",
                    content_text(m.get("content")) or None,
                    ts,
                    line,
                    model=model,
                    usage=usage,
                )
                calls = m.get("tool_calls")
                for tc in calls if isinstance(calls, list) else ():
                    if not isinstance(tc, dict):
                        self.ctx.error(line, f"message {i}: a tool call that is not an object", tc)
                        continue
                    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
                    cid = _str_id(tc.get("id")) or f"#{b.n_calls}"
                    b.call(cid, str(fn.get("name") or "?"), parse_arguments(fn.get("arguments")), ts, line, turn_id=tid)
                    pending.append(cid)
                fc = m.get("function_call")
                if isinstance(fc, dict):
                    cid = f"fn{n_legacy}"
                    n_legacy += 1
                    name = str(fc.get("name") or "?")
                    b.call(cid, name, parse_arguments(fc.get("arguments")), ts, line, turn_id=tid)
                    legacy.append((cid, name))
            elif role == "tool":
                cid = _str_id(m.get("tool_call_id"))
                if cid is None or not b.has_pending(cid):
                    if cid is None and pending:
                        cid = pending[0]  # no id at all: the oldest call still waiting
                    else:
                        self.ctx.error(line, f"message {i}: tool result for a call not in this conversation ({cid})", m)
                        continue
                if cid in pending:
                    pending.remove(cid)
                err = _flag(m)
                b.result(cid, content_text(m.get("content")), err, ts, "flag" if err else None)
            elif role == "function":
                if not legacy:
                    self.ctx.error(line, f"message {i}: function result without a function_call", m)
                    continue
                name = m.get("name")
                match = next((x for x in legacy if x[1] == name), legacy[0])
                legacy.remove(match)
                err = _flag(m)
                b.result(match[0], content_text(m.get("content")), err, ts, "flag" if err else None)
            # system / developer messages are instructions, not turns

    def close(self) -> int:
        return self.sessions


def _flag(m: dict[str, Any]) -> bool:
    """Only an explicit flag makes a result an error: guessing from text would mislabel ordinary outputs."""
    return m.get("is_error") is True or m.get("status") == "error"
