"""SWE-agent trajectories (``<instance>.traj``, one JSON document). docs/formats.md#swe-agent.

Shapes: v0.7 and 1.x files hold ``trajectory`` (steps with thought/action/observation) next to ``history`` (the chat
sent to the model, demonstrations included) and ``info``; demonstration files may hold only ``history`` (1.x
function-calling demos, with OpenAI-style ``tool_calls``, sometimes stored as a Python repr string).

Counting (the rule of ``tests/realdata/tools/transcripts.py``, reproduced exactly): one call per ``trajectory`` step
whose ``action`` is non-empty after stripping, in order (a step without an action is text only, in the trajectory and
in the history alike); the result is the step's ``observation``.

Arguments (``call_args``) rebuild the action the model emitted: the model's own tool call where the file keeps it
(function-calling runs: the ``history`` message of that action, its ``tool_calls`` name and JSON arguments, values and
types as sent); else the action string read the way SWE-agent wrote it: ``str_replace_editor <command> <path>
[--flag value]...`` (``shlex`` tokens, one token per flag, ``--view_range`` as its list of integers,
``--insert_line`` as an integer; a flag followed by several unquoted tokens keeps them as a list; quoting that does
not parse keeps the whole action as ``raw``); ``submit``/``exit_*`` with their argument text (``args``); anything else
``bash`` with the whole action as ``command``, byte for byte (SWE-agent's own commands such as ``open``/``goto``/
``edit 4:4`` included). Commands that act on the open file without naming it (``goto``, ``scroll_up``/
``scroll_down``, ``edit``, ``insert``, ``search_file`` without a file) also carry ``open_file``, from the step's
``state`` (which SWE-agent records after the action; these commands do not change it), so ``goto 72`` in two files
are two objects. tests/test_roundtrip.py checks every call of the real files against its raw action.

SWE-agent records no error flag: an observation is an error when its first 400 characters match ``SWE_ERR_RE``.

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


# Commands that act on the file open in SWE-agent's window without naming it (``tools/windowed*``; 0.x
# ``config/commands``): their object is the open file. ``search_file <term> [<file>]`` only when the file is left out.
WINDOW_COMMANDS = frozenset({"goto", "scroll_up", "scroll_down", "edit", "insert"})
EDITOR = "str_replace_editor"
_INT_FLAGS = frozenset({"insert_line"})
_INT_LIST_FLAGS = frozenset({"view_range"})
_INT = re.compile(r"-?\d+")


def classify(action: str) -> tuple[str, Any]:
    """(tool, args) of a non-empty action string, as SWE-agent's text protocol writes it (``call_args`` without the
    open file). ``bash`` commands keep the action byte for byte."""
    first = action.split(None, 1)[0]
    if first == EDITOR:
        args = editor_args(action)
        return EDITOR, args if args is not None else {"raw": action}
    if first in EXIT_COMMANDS:
        rest = action.strip()[len(first) :].strip()
        return first, ({"args": rest} if rest else {})
    return "bash", {"command": action}


def editor_args(action: str) -> dict[str, Any] | None:
    """``str_replace_editor <command> <path> [--flag value]...`` as SWE-agent 1.x builds it from a tool call
    (``sweagent/tools/parsing.py``: each string value ``shlex.quote``d, so one token; ``view_range`` joined by spaces;
    integers bare). The token after a flag is its value whatever it looks like (a quoted ``--x`` is one); more
    unquoted tokens before the next flag join it as a list. None when the quoting does not parse."""
    try:
        toks = shlex.split(action)
    except ValueError:
        return None
    args: dict[str, Any] = {}
    for name, tok in zip(("command", "path"), toks[1:3]):
        args[name] = tok
    key: str | None = None
    vals: list[str] = []
    extra: list[str] = []

    def close() -> None:
        if key is not None:
            args[key] = _flag_value(key, vals)

    for tok in toks[3:]:
        if tok.startswith("--") and len(tok) > 2 and (key is None or vals):
            close()
            key, vals = tok[2:], []
        elif key is None:
            extra.append(tok)
        else:
            vals.append(tok)
    close()
    if extra:
        args["extra"] = extra
    return args


def _flag_value(key: str, vals: list[str]) -> Any:
    if not vals:
        return None
    if key in _INT_LIST_FLAGS and all(_INT.fullmatch(v) for v in vals):
        return [int(v) for v in vals]
    if len(vals) > 1:
        return vals
    if key in _INT_FLAGS and _INT.fullmatch(vals[0]):
        return int(vals[0])
    return vals[0]


def open_file_of(state: Any) -> str | None:
    """The step's ``state.open_file`` (a JSON string in 0.x, an object in 1.x); None when no file is open."""
    if isinstance(state, str):
        try:
            state = orjson.loads(state)
        except orjson.JSONDecodeError:
            return None
    f = state.get("open_file") if isinstance(state, dict) else None
    return f if isinstance(f, str) and f.strip() and f.strip() != "n/a" else None


def acts_on_open_file(tool: str, args: Any) -> bool:
    """A window command whose object is the open file (``WINDOW_COMMANDS``, ``search_file`` without a file)."""
    if not isinstance(args, dict):
        return False
    if tool == "bash":
        text = args.get("command")
        if not isinstance(text, str) or not text.strip():
            return False
        first = text.split(None, 1)[0]
        if first in WINDOW_COMMANDS:
            return True
        if first != "search_file":
            return False
        try:
            return len(shlex.split(text.split("\n", 1)[0])) <= 2
        except ValueError:
            return False
    if tool in WINDOW_COMMANDS:
        return True
    return tool == "search_file" and not args.get("file")


def call_args(action: str, structured: tuple[str, Any] | None, state: Any) -> tuple[str, Any]:
    """(tool, args) of one trajectory step: the model's own tool call when given, else ``classify``; plus
    ``open_file`` for a command that acts on the open file."""
    tool, args = structured if structured is not None else classify(action)
    if acts_on_open_file(tool, args) and "open_file" not in args:
        f = open_file_of(state)
        if f is not None:
            args = {**args, "open_file": f}
    return tool, args


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
                self._steps(b, traj, hist or [], line)
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

    def _steps(self, b: SessionBuilder, traj: list[Any], hist: list[Any], line: int) -> None:
        calls = _ToolCalls(hist)
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
            if not action or not action.strip():
                continue
            tool, args = call_args(action, calls.take(action), st.get("state"))
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
                    tool, args = classify(h["action"])
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


class _ToolCalls:
    """The model's own tool calls in a function-calling run's ``history``: one per non-demonstration assistant message
    that made exactly one call, in order, each with the action string SWE-agent built from it. ``take(action)``
    hands out the next one whose action is that step's, looking a few messages ahead (the history holds the same
    actions in the same order; a step it lacks, such as the last one, gets None and is read from its action
    string)."""

    LOOKAHEAD = 3

    def __init__(self, hist: list[Any]) -> None:
        self._calls: list[tuple[str, tuple[str, Any]]] = []
        for h in hist:
            if not isinstance(h, dict) or h.get("role") != "assistant" or _demo(h):
                continue
            action, tcs = h.get("action"), _loose(h.get("tool_calls"))
            if not isinstance(action, str) or not action.strip() or not isinstance(tcs, list) or len(tcs) != 1:
                continue
            tc = tcs[0]
            fn = tc.get("function") if isinstance(tc, dict) and isinstance(tc.get("function"), dict) else tc
            if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"]:
                self._calls.append((action.strip(), (fn["name"], parse_arguments(fn.get("arguments")))))
        self._next = 0

    def take(self, action: str) -> tuple[str, Any] | None:
        want = action.strip()
        for j in range(self._next, min(self._next + self.LOOKAHEAD, len(self._calls))):
            if self._calls[j][0] == want:
                self._next = j + 1
                return self._calls[j][1]
        return None


def _demo(h: dict[str, Any]) -> bool:
    v = h.get("is_demo")
    return v is True or (isinstance(v, str) and v.lower() == "true")
