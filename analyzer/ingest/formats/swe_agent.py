"""SWE-agent trajectories (``<instance>.traj``, one JSON document). docs/formats.md#swe-agent.

Shapes: v0.7 and 1.x files hold ``trajectory`` (steps with thought/action/observation) next to ``history`` (the chat
sent to the model, demonstrations included) and ``info``; demonstration files may hold only ``history`` (1.x
function-calling demos, with OpenAI-style ``tool_calls``, sometimes stored as a Python repr string).

Counting (the rule of ``tests/realdata/tools/transcripts.py``, reproduced exactly): one call per ``trajectory`` step
whose ``action`` is non-empty after stripping, in order; the result is the step's ``observation``. The tool is
``str_replace_editor`` (arguments parsed from the command line), ``submit``/``exit_*`` (no arguments), else ``bash``
with the whole action as ``command`` (SWE-agent's own commands such as ``open``/``edit 4:4`` included). SWE-agent
records no error flag: an observation is an error when its first 400 characters match ``SWE_ERR_RE``.

Usage exists only per run (``info.model_stats``): it is written on one extra assistant turn ``info`` that also
carries the outcome (``exit_status`` and the size of the ``submission``) as its text; ``instance_cost`` is the
session's recorded cost. Demonstrations record zeros: no usage then.
"""

from __future__ import annotations

import ast
import re
import shlex
from typing import Any

import orjson

from analyzer.ingest.base import FileContext, parse_arguments, run_session_id, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder

FORMAT = "swe_agent"
ALIASES = ("swe-agent", "sweagent", "swe")
SNIFF_RANK = 37

SWE_ERR_RE = re.compile(
    r"^(ERROR|Error:|No replacement was performed|Invalid|usage:|Traceback|"
    r"The path .* does not exist|bash: .*(command not found|No such file))",
    re.M,
)
EXIT_COMMANDS = ("submit", "exit_forfeit", "exit_cost", "exit_context", "exit_error", "exit_format")
_STEP_KEYS = ("action", "observation", "thought", "response")


def sniff_document(doc: Any) -> bool:
    if not isinstance(doc, dict) or "messages" in doc:
        return False
    traj = doc.get("trajectory")
    if isinstance(traj, list):
        steps = [s for s in traj[:8] if isinstance(s, dict)]
        if not steps:
            return not traj and ("info" in doc or "history" in doc)
        return any(any(k in s for k in _STEP_KEYS) for s in steps)
    hist = doc.get("history")
    if isinstance(hist, list) and hist:
        items = [h for h in hist[:8] if isinstance(h, dict)]
        # OpenHands `history` items are events (action/observation, no role); SWE-agent's are chat messages.
        return bool(items) and all("role" in h and "observation" not in h for h in items)
    return False


def classify(action: str) -> tuple[str, Any]:
    """(tool, args) of a stripped, non-empty action string."""
    first = action.split(None, 1)[0]
    if first == "str_replace_editor":
        try:
            toks = shlex.split(action)
        except ValueError:
            toks = action.split()
        args: dict[str, Any] = {"command": toks[1] if len(toks) > 1 else "", "path": toks[2] if len(toks) > 2 else ""}
        rest = toks[3:]
        j = 0
        while j < len(rest):
            if rest[j].startswith("--") and j + 1 < len(rest):
                key = rest[j][2:]
                vals = []
                j += 1
                while j < len(rest) and not rest[j].startswith("--"):
                    vals.append(rest[j])
                    j += 1
                args[key] = " ".join(vals)
            else:
                j += 1
        return "str_replace_editor", args
    if first in EXIT_COMMANDS:
        return first, {}
    return "bash", {"command": action}


def is_error_text(observation: str) -> bool:
    return bool(SWE_ERR_RE.search(observation[:400]))


def _loose(value: Any) -> Any:
    """A value SWE-agent demos sometimes store as the Python repr of a list (``"[{'function': …}]"``)."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("[", "{"):
            try:
                return orjson.loads(s)
            except orjson.JSONDecodeError:
                try:
                    return ast.literal_eval(s)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return value
    return value


def _model(doc: dict[str, Any]) -> str | None:
    rc = _loose(doc.get("replay_config"))
    try:
        name = rc["agent"]["model"]["name"]
    except (TypeError, KeyError):
        return None
    return name if isinstance(name, str) and name else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value >= 0 else None
    return None


def run_usage(ctx: FileContext, stats: Any, where: str) -> Usage | None:
    """``info.model_stats`` as one Usage with the recorded cost; None when absent or all zero (demonstrations)."""
    if stats is None:
        return None
    if not isinstance(stats, dict):
        ctx.error(1, f"{where} is not an object", stats)
        return None
    vals: dict[str, float | None] = {}
    for key in ("tokens_sent", "tokens_received", "instance_cost", "api_calls"):
        if key in stats and stats[key] is not None:
            vals[key] = _number(stats[key])
            if vals[key] is None:
                ctx.error(1, f"{where}.{key} is not a non-negative number", {key: stats[key]})
    sent, recv, cost = vals.get("tokens_sent"), vals.get("tokens_received"), vals.get("instance_cost")
    if not any((sent, recv, cost)):
        return None
    return Usage(input=int(sent or 0), output=int(recv or 0), cost=cost)


def outcome_text(info: dict[str, Any]) -> str | None:
    status = info.get("exit_status")
    sub = info.get("submission")
    parts = []
    if status is not None:
        parts.append(f"exit_status: {status}")
    if isinstance(sub, str) and sub.strip():
        parts.append(f"submission: {len(sub)} chars")
    return "; ".join(parts) or None


def add_run_info(ctx: FileContext, b: SessionBuilder, info: dict[str, Any], line: int, model: str | None) -> None:
    """The run's ``info`` (``model_stats`` usage and cost, exit status, submission) as one closing assistant entry,
    when it holds any of them; shared by SWE-agent and mini-swe-agent, which write the same ``info``."""
    usage = run_usage(ctx, info.get("model_stats"), "info.model_stats")
    text = outcome_text(info)
    if usage is not None or text is not None:
        b.assistant("info", text, None, line, model=model, usage=usage)


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.sessions = 0

    def feed(self, doc: Any, line: int) -> None:
        if not isinstance(doc, dict):
            self.ctx.error(line, "not a SWE-agent trajectory object", doc)
            return
        info = self.ctx.optional_object(line, doc, "info")
        version = info.get("swe_agent_version")
        b = self.ctx.builder(
            FORMAT,
            run_session_id(self.ctx.path),
            agent_version=str(version) if isinstance(version, (str, int, float)) else None,
        )
        try:
            traj = doc.get("trajectory")
            hist = doc.get("history")
            if hist is not None and not isinstance(hist, list):
                self.ctx.error(line, "`history` is not a list", hist)
                hist = None
            if traj is not None and not isinstance(traj, list):
                self.ctx.error(line, "`trajectory` is not a list", traj)
                traj = None
            if traj:
                self._prompt(b, hist or [], line)
                self._steps(b, traj, line)
            elif hist:
                self._history(b, hist, line)
            model = _model(doc)
            add_run_info(self.ctx, b, info, line, model)
        finally:
            b.finish()
            self.sessions += 1

    def _prompt(self, b: SessionBuilder, hist: list[Any], line: int) -> None:
        """The task: the first user message of the history that is not a demonstration."""
        for h in hist:
            if isinstance(h, dict) and h.get("role") == "user" and not _demo(h):
                b.user_prompt(text_of(h.get("content")), None, line)
                return

    def _steps(self, b: SessionBuilder, traj: list[Any], line: int) -> None:
        for k, st in enumerate(traj):
            if not isinstance(st, dict):
                self.ctx.error(line, f"trajectory step {k} is not an object", st)
                continue
            thought = st.get("thought")
            if not isinstance(thought, str) or not thought:
                thought = st.get("response") if isinstance(st.get("response"), str) else None
            tid = b.assistant(f"s{k}", thought or None, None, line)
            action = st.get("action")
            if action is not None and not isinstance(action, str):
                self.ctx.error(line, f"trajectory step {k}: `action` is not a string", st)
                continue
            act = (action or "").strip()
            if not act:
                continue
            tool, args = classify(act)
            obs = st.get("observation")
            if obs is not None and not isinstance(obs, str):
                self.ctx.error(line, f"trajectory step {k}: `observation` is not a string; kept as text", obs)
                obs = text_of(obs) or orjson.dumps(obs, option=orjson.OPT_NON_STR_KEYS).decode()
            obs = obs or ""
            cid = f"s{k}"
            b.call(cid, tool, args, None, line, turn_id=tid)
            err = is_error_text(obs)
            b.result(cid, obs, err, None, "text" if err else None)

    def _history(self, b: SessionBuilder, hist: list[Any], line: int) -> None:
        """A history-only file (function-calling demonstrations): chat messages, with tool calls and results."""
        pending: list[str] = []
        started = False
        for k, h in enumerate(hist):
            if not isinstance(h, dict):
                self.ctx.error(line, f"history item {k} is not an object", h)
                continue
            if _demo(h):
                continue
            role = h.get("role")
            content = text_of(h.get("content"))
            if role == "system":
                continue
            if role == "assistant":
                started = True
                thought = h.get("thought") if isinstance(h.get("thought"), str) else content
                tid = b.assistant(f"h{k}", thought or None, None, line)
                tcs = _loose(h.get("tool_calls"))
                if isinstance(tcs, list) and tcs:
                    for j, tc in enumerate(tcs):
                        if not isinstance(tc, dict):
                            self.ctx.error(line, f"history item {k}: a tool call that is not an object", tc)
                            continue
                        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
                        cid = str(tc.get("id") or f"h{k}.{j}")
                        b.call(
                            cid,
                            str(fn.get("name") or "?"),
                            parse_arguments(fn.get("arguments")),
                            None,
                            line,
                            turn_id=tid,
                        )
                        pending.append(cid)
                elif isinstance(h.get("action"), str) and h["action"].strip():
                    tool, args = classify(h["action"].strip())
                    cid = f"h{k}"
                    b.call(cid, tool, args, None, line, turn_id=tid)
                    pending.append(cid)
            elif role in ("tool", "user"):
                if not started:
                    b.user_prompt(content, None, line)
                    continue
                if not pending:
                    continue  # an observation answering no call (a format-error notice): not a new prompt
                ids = _loose(h.get("tool_call_ids"))
                cids = [str(i) for i in ids if str(i) in pending] if isinstance(ids, list) else []
                for cid in cids or [pending[0]]:
                    pending.remove(cid)
                    err = is_error_text(content)
                    b.result(cid, content, err, None, "text" if err else None)

    def close(self) -> int:
        return self.sessions


def _demo(h: dict[str, Any]) -> bool:
    v = h.get("is_demo")
    return v is True or (isinstance(v, str) and v.lower() == "true")
