"""OpenHands (V0 event stream). FORMATS.md section 6.

Three shapes, one event reader:
- a saved trajectory: one JSON array of events (``save_trajectory_path``), session id = file stem;
- an evaluation / resolver ``output.jsonl``: one instance per line with ``history`` (events, or in older files
  ``[action, observation]`` pairs / items with the action fields at top level) and ``metrics``; session id =
  ``instance_id``. A file with a single line is read as a document, with the same result;
- the file store's conversation folder ``<sid>/events/<n>.json`` (one event per file): read whole, in event order,
  when its lowest-numbered event file is ingested; the other event files of the folder write nothing.

An action (``run``, ``run_ipython``, ``edit``, ``read``, ``write``, ``browse``, ``browse_interactive``, ``think``,
``finish``, ``delegate``, MCP calls…) is a call; ``message`` actions are prompts (source user) or assistant text. An
observation is the result of the action named by its ``cause`` (else by ``tool_call_metadata.tool_call_id``, else
the oldest waiting call). Errors: ``observation == "error"``, ``user_rejected``, ``success: false``, an exit code
other than 0 (-1, "no exit code yet", included), an edit/read/write result starting with ``ERROR:``. An ``error``
observation that answers no action is a tool call OpenHands rejected before running it (invalid parameters): it is
kept as a failed call ``invalid_tool_call``. A run cost of 0.0 means "price unknown" in OpenHands: not recorded.

Usage: per LLM response from ``tool_call_metadata.model_response.usage`` (else the response's entry in
``llm_metrics.token_usages``), counted once per response id (parallel calls share one response). The run's cost
(``metrics.accumulated_cost`` of an output row, else the last ``llm_metrics.accumulated_cost``) is the session's
recorded cost: it sits on one extra assistant turn ``info``, and per-response usage then carries cost 0.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.base import FileContext, text_of
from analyzer.ingest.formats.openai_messages import parse_usage
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder

FORMAT = "openhands"
ALIASES = ("open-hands", "oh", "openhands-ai")
SNIFF_RANK = 40  # its output.jsonl rows before the loose OpenAI messages

# Actions that are not tool calls. Everything else an agent (or a user) asks the runtime to do is.
NOT_CALLS = frozenset({"message", "system", "recall", "change_agent_state", "null", "condensation",
                       "condensation_request", "start", "pause", "resume", "stop", "agent_state_changed"})
# Observations that answer no call.
NOT_RESULTS = frozenset({"agent_state_changed", "null", "recall", "agent_condensation", "condensation"})
# Keys of an action's args that describe it rather than what it does (the thought is the message's text).
NOISE_ARGS = frozenset({"thought", "impl_source", "translated_ipython_code", "confirmation_state", "security_risk",
                        "is_confirmed", "kernel_init_code", "hidden", "wait_for_response", "image_urls",
                        "images_urls", "keep_prompt"})
# Top-level keys of an event (openhands/events/serialization/event.py, TOP_KEYS) plus the older resolver extras.
TOP_KEYS = frozenset({"id", "timestamp", "source", "message", "cause", "action", "observation", "tool_call_metadata",
                      "llm_metrics", "args", "content", "extras", "success", "timeout", "hidden"})
_EVENT_FILE = re.compile(r"^\d+\.json$")


def _is_event(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e)


def _looks_like_history(hist: Any) -> bool:
    if not isinstance(hist, list):
        return False
    if not hist:
        return True
    items = [h for h in hist[:8] if isinstance(h, (dict, list))]
    for h in items:
        if isinstance(h, list):
            if any(_is_event(x) for x in h):
                return True
        elif _is_event(h):
            return True
    return False


def sniff(rec: Any) -> bool:
    """A line of an evaluation/resolver ``output.jsonl``."""
    return (isinstance(rec, dict) and "history" in rec and "messages" not in rec and "trajectory" not in rec
            and ("instance_id" in rec or "metrics" in rec or "instruction" in rec)
            and _looks_like_history(rec.get("history")) and bool(rec.get("history")))


def sniff_document(doc: Any) -> bool:
    if isinstance(doc, list):
        events = [e for e in doc[:8] if isinstance(e, dict)]
        return bool(events) and any(_is_event(e) for e in events) and all(
            _is_event(e) or "id" in e for e in events)
    return sniff(doc)


def sniff_file(path: Path, head: bytes) -> bool:
    """One event of a conversation folder: ``…/events/<n>.json``."""
    if path.parent.name != "events" or not _EVENT_FILE.match(path.name):
        return False
    try:
        ev = orjson.loads(head)
    except orjson.JSONDecodeError:
        return b'"action"' in head or b'"observation"' in head
    return _is_event(ev)


def _event_files(folder: Path) -> list[Path]:
    files = [p for p in folder.iterdir() if _EVENT_FILE.match(p.name) and p.is_file()]
    return sorted(files, key=lambda p: int(p.stem))


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.sessions = 0
        self._ids: set[str] = set()

    # -- the three entry points ---------------------------------------------------------------------------------------
    def feed(self, rec: Any, line: int) -> None:
        if isinstance(rec, list):  # a saved trajectory
            self._session(self.ctx.path.stem, rec, line, None, None)
            return
        if not isinstance(rec, dict) or not isinstance(rec.get("history"), list):
            self.ctx.error(line, "not an OpenHands record: no `history` list", rec)
            return
        inst = rec.get("instance_id")
        issue = rec.get("issue") if isinstance(rec.get("issue"), dict) else {}
        if not (isinstance(inst, (str, int)) and str(inst)) and all(issue.get(k) for k in ("owner", "repo", "number")):
            inst = f"{issue['owner']}/{issue['repo']}#{issue['number']}"  # a resolver run: the issue it resolved
        sid = str(inst) if isinstance(inst, (str, int)) and str(inst) else f"{self.ctx.path.stem}:{line}"
        if sid in self._ids:
            self.ctx.error(line, f"duplicate instance id {sid} in this file; loaded as {sid}:{line}", rec.get("instance_id"))
            sid = f"{sid}:{line}"
        self._ids.add(sid)
        metrics = rec.get("metrics")
        cost = None
        if isinstance(metrics, dict):
            cost = _cost(metrics.get("accumulated_cost"))
        elif metrics is not None:
            self.ctx.error(line, "`metrics` is not an object", metrics)
        self._session(sid, rec["history"], line, cost, None, outcome=_outcome(rec))

    def read(self, path: Path) -> None:
        files = _event_files(path.parent)
        if not files or files[0].name != path.name:
            return  # read with the folder's first event file
        events: list[Any] = []
        for p in files:
            try:
                events.append(orjson.loads(p.read_bytes()))
            except (OSError, orjson.JSONDecodeError) as exc:
                self.ctx.error(None, f"event file {p.name} unreadable: {exc}; skipped", p.name)
        sid = path.parent.parent.name or path.stem
        self._session(sid, events, 1, None, None)

    def close(self) -> int:
        return self.sessions

    # -- events ---------------------------------------------------------------------------------------------------------
    def _session(self, sid: str, history: list[Any], line: int, run_cost: float | None, prompt: str | None,
                 outcome: str | None = None) -> None:
        b = self.ctx.builder(FORMAT, sid)
        try:
            events = self._flatten(history, line)
            if run_cost is None:
                run_cost = _last_accumulated(events)
            self._events(b, events, line, run_cost, prompt)
            if run_cost is not None or outcome is not None:
                b.assistant("info", outcome, None, line,
                            usage=Usage(cost=run_cost) if run_cost is not None else None)
        finally:
            b.finish()
            self.sessions += 1

    def _flatten(self, history: list[Any], line: int) -> list[tuple[int, dict[str, Any]]]:
        out: list[tuple[int, dict[str, Any]]] = []
        for k, item in enumerate(history):
            if isinstance(item, list):  # older eval output: [action, observation] pairs
                for x in item:
                    if isinstance(x, dict):
                        out.append((k, x))
                    else:
                        self.ctx.error(line, f"history item {k}: an element that is not an object", x)
            elif isinstance(item, dict):
                out.append((k, item))
            else:
                self.ctx.error(line, f"history item {k} is not an object", item)
        return out

    def _events(self, b: SessionBuilder, events: list[tuple[int, dict[str, Any]]], line: int,
                run_cost: float | None, prompt: str | None) -> None:
        by_event: dict[str, str] = {}  # action event id -> call id
        by_tool: dict[str, deque[str]] = {}  # tool_call_id -> call ids
        order: deque[str] = deque()  # calls waiting, oldest first
        seen_responses: set[str] = set()
        n = 0
        if prompt:
            b.user_prompt(prompt, None, line)
        for k, ev in events:
            ts = ev.get("timestamp")
            if "action" in ev:
                action = ev.get("action")
                if not isinstance(action, str):
                    self.ctx.error(line, f"history item {k}: `action` is not a string", ev)
                    continue
                args = ev.get("args")
                if args is None:
                    args = {key: v for key, v in ev.items() if key not in TOP_KEYS}
                elif not isinstance(args, dict):
                    self.ctx.error(line, f"history item {k}: `args` is not an object; kept as text", ev)
                    args = {"raw": args}
                source = ev.get("source")
                thought = args.get("thought") if isinstance(args.get("thought"), str) else None
                if action == "message":
                    text = args.get("content") if isinstance(args.get("content"), str) else text_of(ev.get("message"))
                    if source == "user" or (source is None and not b.n_turns and not prompt):
                        b.user_prompt(text or "", ts, line)
                    else:
                        self._assistant(b, ev, k, text or None, ts, line, run_cost, seen_responses)
                    continue
                if action in NOT_CALLS:
                    continue
                tid = self._assistant(b, ev, k, thought, ts, line, run_cost, seen_responses)
                eid = ev.get("id")
                cid = f"e{eid}" if eid is not None else f"#{n}"
                n += 1
                tcm = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else {}
                b.call(cid, action, {key: v for key, v in args.items() if key not in NOISE_ARGS}, ts, line,
                       turn_id=tid)
                if eid is not None:
                    by_event[str(eid)] = cid
                tcid = tcm.get("tool_call_id")
                if isinstance(tcid, str):
                    by_tool.setdefault(tcid, deque()).append(cid)
                order.append(cid)
            elif "observation" in ev:
                obs = ev.get("observation")
                cause = ev.get("cause")
                cid = by_event.get(str(cause)) if cause is not None else None
                if cid is None:
                    tcm = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else {}
                    q = by_tool.get(tcm.get("tool_call_id")) if isinstance(tcm.get("tool_call_id"), str) else None
                    cid = next((c for c in q or () if c in order), None)
                if cid is None and cause is None and "id" not in ev and obs not in NOT_RESULTS and order:
                    cid = order[0]  # older files: no ids, an observation follows its action
                if cid is None and obs == "error" and cause is None:
                    # A tool call OpenHands rejected before running it (bad parameters): no action event was
                    # written, only this error. It is still a failed call of the agent.
                    cid = f"e{ev.get('id')}" if ev.get("id") is not None else f"#{n}"
                    n += 1
                    b.call(cid, "invalid_tool_call", {}, ts, line)
                    order.append(cid)
                if cid is None or cid not in order:
                    if obs not in NOT_RESULTS and cause is None:
                        self.ctx.error(line, f"history item {k}: observation `{obs}` answers no action", ev)
                    continue
                order.remove(cid)
                text = ev.get("content")
                text = text if isinstance(text, str) else (text_of(text) or text_of(ev.get("message")))
                err, kind = _error(ev, obs, text)
                b.result(cid, text, err, ts, kind if err else None)
            else:
                self.ctx.error(line, f"history item {k}: neither an action nor an observation", ev)

    def _assistant(self, b: SessionBuilder, ev: dict[str, Any], k: int, text: str | None, ts: Any, line: int,
                   run_cost: float | None, seen: set[str]) -> str:
        tcm = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else {}
        resp = tcm.get("model_response") if isinstance(tcm.get("model_response"), dict) else {}
        rid = resp.get("id") if isinstance(resp.get("id"), str) else None
        model = resp.get("model") if isinstance(resp.get("model"), str) else None
        usage = None
        if rid is None or rid not in seen:
            usage = parse_usage(resp.get("usage")) or _metrics_usage(ev.get("llm_metrics"), rid)
            if usage is not None and run_cost is not None:
                usage.cost = 0.0  # the run's recorded cost is on the `info` turn
            if rid is not None:
                seen.add(rid)
        eid = ev.get("id")
        tid = rid or (f"e{eid}" if eid is not None else f"h{k}")
        return b.assistant(tid, text, ts, line, model=model, usage=usage)


def _error(ev: dict[str, Any], obs: Any, text: str) -> tuple[bool, str | None]:
    if obs == "error":
        return True, "flag"
    if obs == "user_rejected":
        return True, "rejected"
    extras = ev.get("extras") if isinstance(ev.get("extras"), dict) else {}
    md = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
    code = md.get("exit_code", extras.get("exit_code", ev.get("exit_code")))
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return True, "exit_code"
    if ev.get("success") is False:
        return True, "flag"
    if obs in ("edit", "read", "write") and text.lstrip().startswith("ERROR:"):
        return True, "text"
    return False, None


def _cost(value: Any) -> float | None:
    """A recorded cost; 0 means OpenHands did not know the model's price (it records 0.0 then), so not recorded."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def _last_accumulated(events: list[tuple[int, dict[str, Any]]]) -> float | None:
    cost = None
    for _, ev in events:
        m = ev.get("llm_metrics")
        if isinstance(m, dict):
            c = _cost(m.get("accumulated_cost"))
            if c is not None:
                cost = c if cost is None else max(cost, c)
    return cost


def _metrics_usage(metrics: Any, rid: str | None) -> Usage | None:
    """The response's own entry of ``llm_metrics.token_usages`` (cumulative metrics: never the sum)."""
    if not isinstance(metrics, dict) or not isinstance(metrics.get("token_usages"), list) or rid is None:
        return None
    for tu in reversed(metrics["token_usages"]):
        if isinstance(tu, dict) and tu.get("response_id") == rid:
            return parse_usage({"prompt_tokens": tu.get("prompt_tokens"),
                                "completion_tokens": tu.get("completion_tokens"),
                                "prompt_tokens_details": {"cached_tokens": tu.get("cache_read_tokens")}})
    return None


def _outcome(rec: dict[str, Any]) -> str | None:
    """The run's outcome as one line: the patch it produced (its size), resolver ``success``, the run's ``error``."""
    parts = []
    tr = rec.get("test_result") if isinstance(rec.get("test_result"), dict) else {}
    patch = tr.get("git_patch", rec.get("git_patch"))
    if isinstance(patch, str) and patch.strip():
        parts.append(f"git_patch: {len(patch)} chars")
    if isinstance(rec.get("success"), bool):
        parts.append(f"success: {str(rec['success']).lower()}")
    if rec.get("error"):
        parts.append(f"error: {str(rec['error'])[:200]}")
    return "; ".join(parts) or None
