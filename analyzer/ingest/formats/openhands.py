"""OpenHands (V0 event stream, and V1 software-agent-sdk event lists). docs/formats.md#openhands.

Three shapes, one event reader (V0) and a second one for V1 events:
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

V1 (OpenHands software-agent-sdk, ``Event.model_dump``): events carry a ``kind`` class name. A saved list (or an
output row's ``history``) holding V1 events is read by ``_events_v1``: every ``ActionEvent`` is one call, in list
order (``think`` and ``finish`` included), tool = ``tool_name`` (else ``tool_call.name``, else the action's
``kind``), args = the parsed ``tool_call.arguments`` (else the ``action`` object minus ``kind``), call id =
``tool_call_id``. Its result is the ``ObservationEvent`` whose ``action_id`` names it (else the same
``tool_call_id``): text = ``observation.output``, else ``content`` (text or text parts), else ``message``; error
when ``error`` is set (its text joins the result), ``is_error``, an error-observation kind, or an exit code other
than 0 (``exit_code``, else ``metadata.exit_code``). A ``UserRejectObservation`` or an ``AgentErrorEvent`` linked
to a call is its failed result (``rejected`` / ``flag``); an agent error linked to no call is no call. Calls sharing
``llm_response_id`` are one assistant turn, whose text is the actions' ``thought`` and ``reasoning_content``.
``MessageEvent`` from the user is a prompt, from the agent assistant text. Usage: ``metrics``/``llm_metrics`` of
an event (``model_name``, ``token_usages`` entry of the response, ``accumulated_cost`` as the run's cost) when
present; the sampled benchmark files carry none. System prompts, state updates, condensations, pauses: skipped.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.base import LOCAL, FileContext, Files, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.formats.openai_messages import parse_usage
from analyzer.ingest.rows import SessionBuilder

FORMAT = "openhands"
# OpenHands' evaluation harness answers an agent that stops without finishing in the user's place ("fake user
# response"): a nudge, not a person's prompt, so it does not start a new user turn.
_AUTO_CONTINUE = re.compile(r"\s*Please continue working on the task on whatever approach you think is suitable")
ALIASES = ("open-hands", "oh", "openhands-ai")
SNIFF_RANK = 40  # its output.jsonl rows before the loose OpenAI messages

# Actions that are not tool calls. Everything else an agent (or a user) asks the runtime to do is.
NOT_CALLS = frozenset(
    {
        "message",
        "system",
        "recall",
        "change_agent_state",
        "null",
        "condensation",
        "condensation_request",
        "start",
        "pause",
        "resume",
        "stop",
        "agent_state_changed",
    }
)
# Observations that answer no call.
NOT_RESULTS = frozenset({"agent_state_changed", "null", "recall", "agent_condensation", "condensation"})
# Keys of an action's args that the runtime or the controller sets, not the model: how the action was produced and
# confirmed, what the runtime adds (the thought is the message's text, kept as the turn's). ``security_risk`` is not
# one: newer tool schemas have the model fill it in, so it is part of the call as the model made it (older runtimes
# write it null on every action, which is no value at all: dropped, ``_model_args``).
NOISE_ARGS = frozenset(
    {
        "thought",
        "impl_source",
        "translated_ipython_code",
        "confirmation_state",
        "is_confirmed",
        "kernel_init_code",
        "hidden",
        "wait_for_response",
        "image_urls",
        "images_urls",
        "keep_prompt",
    }
)
# Top-level keys of an event (openhands/events/serialization/event.py, TOP_KEYS) plus the older resolver extras.
TOP_KEYS = frozenset(
    {
        "id",
        "timestamp",
        "source",
        "message",
        "cause",
        "action",
        "observation",
        "tool_call_metadata",
        "llm_metrics",
        "args",
        "content",
        "extras",
        "success",
        "timeout",
        "hidden",
    }
)
# V1 SDK event kinds (openhands/sdk/event/): the LLM-visible ones and the internal ones this reader skips.
V1_KINDS = frozenset(
    {
        "ActionEvent",
        "ObservationEvent",
        "MessageEvent",
        "SystemPromptEvent",
        "AgentErrorEvent",
        "UserRejectObservation",
        "TokenEvent",
        "PauseEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "ConversationStateUpdateEvent",
        "ConversationErrorEvent",
    }
)
_EVENT_FILE = re.compile(r"^\d+\.json$")


def _is_v1(e: Any) -> bool:
    """An event of the OpenHands V1 SDK (software-agent-sdk): a pydantic dump with a ``kind`` class name."""
    return isinstance(e, dict) and e.get("kind") in V1_KINDS


def _is_event(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e or _is_v1(e))


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
    return (
        isinstance(rec, dict)
        and "history" in rec
        and "messages" not in rec
        and "trajectory" not in rec
        and ("instance_id" in rec or "metrics" in rec or "instruction" in rec)
        and _looks_like_history(rec.get("history"))
        and bool(rec.get("history"))
    )


def sniff_document(doc: Any) -> bool:
    if isinstance(doc, list):
        events = [e for e in doc[:8] if isinstance(e, dict)]
        return (
            bool(events)
            and any(_is_event(e) for e in events)
            and all(_is_event(e) or "id" in e or isinstance(e.get("kind"), str) for e in events)
        )
    return sniff(doc)


def sniff_file(path: Path, head: bytes, files: Files = LOCAL) -> bool:
    """One event of a conversation folder: ``…/events/<n>.json``."""
    if path.parent.name != "events" or not _EVENT_FILE.match(path.name):
        return False
    try:
        ev = orjson.loads(head)
    except orjson.JSONDecodeError:
        return b'"action"' in head or b'"observation"' in head
    return _is_event(ev)


def file_group(path: str) -> str | None:
    """An event file is read with the rest of its ``events/`` folder (by the folder's first event file)."""
    folder, _, name = path.rpartition("/")
    return folder if folder.endswith("/events") and _EVENT_FILE.match(name) else None


def _event_files(folder: Path, files: Files = LOCAL) -> list[Path]:
    return sorted((folder / n for n in files.names(str(folder)) if _EVENT_FILE.match(n)), key=lambda p: int(p.stem))


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
            self.ctx.error(
                line, f"duplicate instance id {sid} in this file; loaded as {sid}:{line}", rec.get("instance_id")
            )
            sid = f"{sid}:{line}"
        self._ids.add(sid)
        cost = _cost(self.ctx.optional_object(line, rec, "metrics").get("accumulated_cost"))
        self._session(sid, rec["history"], line, cost, None, outcome=_outcome(rec))

    def read(self, path: Path) -> None:
        files = _event_files(path.parent, self.ctx.files)
        if not files or files[0].name != path.name:
            return  # read with the folder's first event file
        events: list[Any] = []
        for p in files:
            try:
                with self.ctx.files.open(str(p)) as f:
                    events.append(orjson.loads(f.read()))
            except (OSError, orjson.JSONDecodeError) as exc:
                self.ctx.error(None, f"event file {p.name} unreadable: {exc}; skipped", p.name)
        sid = path.parent.parent.name or path.stem
        self._session(sid, events, 1, None, None)

    def close(self) -> int:
        return self.sessions

    # -- events --------------------------------------------------------------------------------------------------------
    def _session(
        self,
        sid: str,
        history: list[Any],
        line: int,
        run_cost: float | None,
        prompt: str | None,
        outcome: str | None = None,
    ) -> None:
        b = self.ctx.builder(FORMAT, sid)
        try:
            if any(_is_v1(h) for h in history):
                run_cost = self._events_v1(b, history, line, run_cost)
            else:
                events = self._flatten(history, line)
                if run_cost is None:
                    run_cost = _last_accumulated(events)
                self._events(b, events, line, run_cost, prompt)
            if run_cost is not None or outcome is not None:
                b.assistant("info", outcome, None, line, usage=Usage(cost=run_cost) if run_cost is not None else None)
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

    def _events(
        self,
        b: SessionBuilder,
        events: list[tuple[int, dict[str, Any]]],
        line: int,
        run_cost: float | None,
        prompt: str | None,
    ) -> None:
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
                    if source == "user" and _AUTO_CONTINUE.match(text or ""):
                        b.harness_message(text or "", ts, line)
                    elif source == "user" or (source is None and not b.n_turns and not prompt):
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
                b.call(cid, action, _model_args(args), ts, line, turn_id=tid)
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

    # -- V1 SDK events -------------------------------------------------------------------------------------------------
    def _events_v1(self, b: SessionBuilder, history: list[Any], line: int, run_cost: float | None) -> float | None:
        """Write a V1 event list's turns and calls; returns the run's recorded cost."""
        by_event: dict[str, str] = {}  # ActionEvent id -> call id
        by_tool: dict[str, deque[str]] = {}  # tool_call_id -> call ids waiting
        waiting: set[str] = set()
        texts: dict[str, set[str]] = {}  # turn id -> texts already added (parallel calls repeat the thought)
        seen_responses: set[str] = set()
        if run_cost is None:
            run_cost = max(
                (
                    c
                    for ev in history
                    if isinstance(ev, dict)
                    for m in (ev.get("metrics"), ev.get("llm_metrics"))
                    if isinstance(m, dict)
                    for c in (_cost(m.get("accumulated_cost")),)
                    if c is not None
                ),
                default=None,
            )
        n = 0
        for k, ev in enumerate(history):
            if not isinstance(ev, dict):
                self.ctx.error(line, f"history item {k} is not an object", ev)
                continue
            kind = ev.get("kind")
            ts = ev.get("timestamp")
            model, usage = self._v1_metrics(ev, seen_responses, run_cost)
            if kind == "MessageEvent":
                msg = ev.get("llm_message") if isinstance(ev.get("llm_message"), dict) else {}
                text = text_of(msg.get("content"))
                extra = text_of(ev.get("extended_content"))
                if extra:
                    text = f"{text}\n{extra}" if text else extra
                if (ev.get("source") == "user" or msg.get("role") == "user") and _AUTO_CONTINUE.match(text or ""):
                    b.harness_message(text, ts, line)
                elif ev.get("source") == "user" or msg.get("role") == "user":
                    b.user_prompt(text, ts, line)
                else:
                    rid = ev.get("llm_response_id") if isinstance(ev.get("llm_response_id"), str) else None
                    tid = rid or f"e{ev.get('id', k)}"
                    b.assistant(
                        tid, self._new_text(texts, tid, text, _reasoning(msg)), ts, line, model=model, usage=usage
                    )
            elif kind == "ActionEvent":
                tc = ev.get("tool_call") if isinstance(ev.get("tool_call"), dict) else None
                action = ev.get("action") if isinstance(ev.get("action"), dict) else None
                tool = next(
                    (
                        t
                        for t in (ev.get("tool_name"), (tc or {}).get("name"), (action or {}).get("kind"))
                        if isinstance(t, str) and t
                    ),
                    None,
                )
                if tool is None:
                    self.ctx.error(line, f"history item {k}: ActionEvent names no tool", ev)
                    continue
                args: Any
                if tc is not None and "arguments" in tc:
                    args = tc["arguments"]
                    if isinstance(args, str):
                        try:
                            args = orjson.loads(args) if args.strip() else {}
                        except orjson.JSONDecodeError:
                            self.ctx.error(
                                line, f"history item {k}: tool call arguments are not JSON; kept as text", args
                            )
                            args = {"raw": args}
                elif action is not None:
                    args = {key: v for key, v in action.items() if key != "kind"}
                else:
                    args = {}
                rid = ev.get("llm_response_id") if isinstance(ev.get("llm_response_id"), str) else None
                eid = ev.get("id")
                tid = rid or f"e{eid if eid is not None else k}"
                b.assistant(
                    tid,
                    self._new_text(texts, tid, text_of(ev.get("thought")), _reasoning(ev)),
                    ts,
                    line,
                    model=model,
                    usage=usage,
                )
                tcid = ev.get("tool_call_id") if isinstance(ev.get("tool_call_id"), str) else (tc or {}).get("id")
                cid = (
                    tcid
                    if isinstance(tcid, str) and tcid and not b.has_pending(tcid)
                    else (f"e{eid}" if eid is not None else f"#{n}")
                )
                n += 1
                b.call(cid, tool, args, ts, line, turn_id=tid)
                waiting.add(cid)
                if eid is not None:
                    by_event[str(eid)] = cid
                if isinstance(tcid, str):
                    by_tool.setdefault(tcid, deque()).append(cid)
            elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
                if kind == "ObservationEvent" and not isinstance(ev.get("observation"), dict):
                    self.ctx.error(line, f"history item {k}: `observation` is not an object", ev)
                    continue
                aid = ev.get("action_id")
                cid = by_event.get(str(aid)) if aid is not None else None
                if cid is None or cid not in waiting:
                    q = by_tool.get(ev.get("tool_call_id")) if isinstance(ev.get("tool_call_id"), str) else None
                    cid = next((c for c in q or () if c in waiting), None)
                if cid is None:
                    if kind != "AgentErrorEvent":  # an agent error outside any call (e.g. an LLM failure)
                        self.ctx.error(line, f"history item {k}: {kind} answers no ActionEvent", ev)
                    continue
                if kind == "ObservationEvent":
                    text, err, ekind = _v1_result(ev["observation"])
                elif kind == "UserRejectObservation":
                    text, err, ekind = str(ev.get("rejection_reason") or ""), True, "rejected"
                else:
                    text, err, ekind = str(ev.get("error") or ""), True, "flag"
                waiting.discard(cid)
                b.result(cid, text, err, ts, ekind if err else None)
            elif not isinstance(kind, str):
                self.ctx.error(line, f"history item {k}: no `kind`", ev)
            else:  # SystemPromptEvent, state updates, condensation, pauses...: no call, no message
                b.see_ts(ts)
        return run_cost

    def _v1_metrics(
        self, ev: dict[str, Any], seen: set[str], run_cost: float | None
    ) -> tuple[str | None, Usage | None]:
        """Model and usage an event carries (``metrics``/``llm_metrics``: model_name, accumulated_cost, the response's
        entry of ``token_usages``), the usage counted once per response id."""
        m = ev.get("metrics") if isinstance(ev.get("metrics"), dict) else ev.get("llm_metrics")
        if not isinstance(m, dict):
            return None, None
        model = m.get("model_name") if isinstance(m.get("model_name"), str) else None
        rid = ev.get("llm_response_id") if isinstance(ev.get("llm_response_id"), str) else None
        if rid is None or rid in seen:
            return model, None
        usage = _metrics_usage(m, rid)
        if usage is not None:
            seen.add(rid)
            if run_cost is not None:
                usage.cost = 0.0  # the run's recorded cost is on the `info` turn
        return model, usage

    @staticmethod
    def _new_text(texts: dict[str, set[str]], tid: str, *parts: str | None) -> str | None:
        seen = texts.setdefault(tid, set())
        new = [p for p in parts if p and p not in seen]
        seen.update(new)
        return "\n".join(new) or None

    def _assistant(
        self,
        b: SessionBuilder,
        ev: dict[str, Any],
        k: int,
        text: str | None,
        ts: Any,
        line: int,
        run_cost: float | None,
        seen: set[str],
    ) -> str:
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


def _model_args(args: dict[str, Any]) -> dict[str, Any]:
    """A V0 action's arguments as the model gave them: without ``NOISE_ARGS`` and a null ``security_risk``."""
    return {k: v for k, v in args.items() if k not in NOISE_ARGS and not (k == "security_risk" and v is None)}


def _reasoning(obj: dict[str, Any]) -> str | None:
    r = obj.get("reasoning_content")
    return r if isinstance(r, str) and r.strip() else None


def _v1_result(obs: dict[str, Any]) -> tuple[str, bool, str | None]:
    """A V1 observation's text (``output``, else ``content`` as text or text parts, else ``message``), whether it
    failed and how: ``error`` set (a flag or the error text, appended when not already shown) or ``is_error``, an
    ``*ErrorObservation``/``AgentError…`` kind, else an exit code other than 0."""
    text = next(
        (text_of(obs[key]) for key in ("output", "content", "message") if obs.get(key) not in (None, "", [])), ""
    )
    error = obs.get("error")
    kind = obs.get("kind") if isinstance(obs.get("kind"), str) else ""
    if isinstance(error, str) and error:
        return (f"{text}\n{error}" if text and error not in text else text or error), True, "flag"
    if (
        error is True
        or obs.get("is_error") is True
        or kind.endswith("ErrorObservation")
        or kind.startswith("AgentError")
    ):
        return text, True, "flag"
    md = obs.get("metadata") if isinstance(obs.get("metadata"), dict) else {}
    code = obs.get("exit_code") if obs.get("exit_code") is not None else md.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return text, True, "exit_code"
    return text, False, None


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
    if obs == "run_ipython" and _REJECTED_EDIT.match(text):
        return True, "text"
    return False, None


# The agent skills' edit helpers (``edit_file_by_replace`` …, run through IPython) answer a refused edit with one of
# these texts and leave the file as it was: a failed call, though IPython itself ran fine.
_REJECTED_EDIT = re.compile(
    r"\s*\[(?:Your proposed edit has introduced new syntax error|No exact match found|"
    r"Error:|ERROR)"
)


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
            return parse_usage(
                {
                    "prompt_tokens": tu.get("prompt_tokens"),
                    "completion_tokens": tu.get("completion_tokens"),
                    "prompt_tokens_details": {"cached_tokens": tu.get("cache_read_tokens")},
                }
            )
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
