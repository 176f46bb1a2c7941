"""The Codex CLI and Gemini CLI hooks: each hook event's JSON in, the session's guard fed, the agent's protocol out.

The guard and its state are the Claude Code hook's (``claude_code.State``, ``Policy.guard()``), so the hook decides as
``loopscope replay --policy P`` does on the calls the agent's hooks let it see. What differs is the protocol
(``agents`` maps live tool names and arguments onto the transcript's, and reads results):

==============  =======================================  ============================================
                Codex CLI (0.124+)                       Gemini CLI (v0.26+)
==============  =======================================  ============================================
a call          ``PreToolUse``: ``on_call``              ``BeforeTool``: ``on_call``
its result      ``PostToolUse``: ``on_result`` (by       ``AfterTool``: ``on_result`` (no call id: the
                ``tool_use_id``; no exit code)           oldest pending call with that name and input)
a user prompt   ``UserPromptSubmit``: counters reset     ``BeforeAgent``: counters reset
deny            ``permissionDecision: "deny"``           ``{"decision": "deny", "reason": ...}``
warn            ``systemMessage`` (the user) now, and    ``systemMessage`` (the user) now, and AfterTool
                PostToolUse ``additionalContext`` (the   ``additionalContext`` (the model) after the call
                model) after the call
==============  =======================================  ============================================

Neither agent lets a hook speak to the model before a call in the versions pinned (Codex rejects PreToolUse
``additionalContext`` before ~0.129 and the hook's whole answer is then dropped; Gemini ignores it), so a warning
reaches the model with the call's result. Only schema fields are printed (Codex rejects unknown output fields).

Messages: neither payload names the model response a call belongs to. A call joins the current message while that
message's calls await results and no result has come in since its last call (a parallel batch: Gemini runs a batch's
BeforeTool hooks before any of its calls, Codex starts parallel calls at once); otherwise it starts a new message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyzer.detect.keys import canonical_json
from analyzer.guards.base import HALT, WARN, Message, Verdict
from analyzer.guards.policies import Policy
from analyzer.hook.agents import CODEX, GEMINI, codex_result, gemini_result, stored_call
from analyzer.hook.claude_code import (
    PENDING_KEPT,
    SUFFIX,
    State,
    _end_message,
    guard_call,
    record_result,
    signature,
)

EVENTS = {
    CODEX: {"PreToolUse": "call", "PostToolUse": "result", "UserPromptSubmit": "user"},
    GEMINI: {"BeforeTool": "call", "AfterTool": "result", "BeforeAgent": "user"},
}
POST_EVENT = {CODEX: "PostToolUse", GEMINI: "AfterTool"}


@dataclass
class LiveState(State):
    """``claude_code.State`` plus what pairing results and delivering warnings after the call need."""

    agent: str = ""
    inputs: dict[str, str] = field(default_factory=dict)  # call id -> (tool, live input): calls awaiting results
    notes: dict[str, str] = field(default_factory=dict)  # call id -> the warning to deliver with its result
    batch_open: bool = False  # no result has come in since the current message's last call


def new_state(policy: Policy, agent: str) -> LiveState:
    return LiveState(signature(policy), policy.guard(), agent=agent)


def handle(agent: str, payload: dict[str, Any], st: LiveState, policy: Policy) -> tuple[dict[str, Any] | None, Any]:
    """Apply one hook event; return (the JSON to print or None, a denial to log or None)."""
    kind = EVENTS[agent].get(payload.get("hook_event_name"))  # type: ignore[arg-type]
    if kind == "call":
        return _call(agent, payload, st, policy)
    if kind == "result":
        return _result(agent, payload, st), None
    if kind == "user":
        _end_message(st)
        st.guard.on_user()
        st.user_turn += 1
        st.pending.clear()
        st.inputs.clear()
        st.notes.clear()
        st.batch_open = False
    return None, None


def _call(agent: str, payload: dict[str, Any], st: LiveState, policy: Policy) -> tuple[dict[str, Any] | None, Any]:
    live_tool = payload.get("original_request_name") or payload.get("tool_name")
    if not isinstance(live_tool, str) or not live_tool:
        raise ValueError(f"{payload.get('hook_event_name')} without a tool_name")
    live_input = payload.get("tool_input")
    tool, args = stored_call(agent, live_tool, live_input)
    tid = payload.get("tool_use_id") if agent == CODEX else None
    tid = tid if isinstance(tid, str) and tid else f"call-{st.n}"
    verdicts: list[Verdict] = []
    joins = st.msg_obj is not None and st.batch_open and any(c.call_id in st.inputs for c in st.msg_obj.calls)
    if not joins:
        _end_message(st)
        st.turn += 1
        st.msg = f"m{st.turn}"
        st.msg_obj = Message(st.turn, st.msg, st.user_turn, None)
        v = st.guard.on_message(st.msg_obj)
        if v is not None:
            verdicts.append(v)
    st.batch_open = True
    call, v, top = guard_call(st, tid, tool, args, verdicts)
    if top is not None and top.level >= HALT:
        st.denied += 1
        reason = f"loopscope ({policy.name}): {top.reason}; {SUFFIX}"
        if agent == CODEX:  # Codex shows the model "Command blocked by PreToolUse hook: <reason>. Command: ..."
            out = {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        else:  # Gemini: "Tool execution blocked: <reason>"
            out = {"decision": "deny", "reason": reason + "."}
        return out, {"tool": live_tool, "reason": top.reason, "call": call.args[:200]}
    st.inputs[tid] = canonical_json([live_tool, live_input])  # the call runs: its result event will come
    if v is None or not v.blocked:  # a guard that blocked the call (its own model) never sees its result
        st.pending[tid] = call
    while len(st.inputs) > PENDING_KEPT:
        old = next(iter(st.inputs))
        del st.inputs[old]
        st.pending.pop(old, None)
        st.notes.pop(old, None)
    if top is not None and top.level >= WARN:
        st.warned += 1
        text = (
            f"loopscope ({policy.name}) warning: {top.reason}. If this is not making progress, {SUFFIX}; repeating "
            "it will be blocked."
        )
        st.notes[tid] = text
        return {"systemMessage": text}, None
    return None, None


def _result(agent: str, payload: dict[str, Any], st: LiveState) -> dict[str, Any] | None:
    st.batch_open = False
    tid = _pair(agent, payload, st)
    if tid is None:
        return None
    del st.inputs[tid]
    note = st.notes.pop(tid, None)
    call = st.pending.pop(tid, None)
    v = None
    if call is not None:
        if agent == CODEX:
            text, is_error = codex_result(call.tool, payload.get("tool_response"))
        else:
            text, is_error = gemini_result(payload.get("tool_response"))
        record_result(call, text, is_error)
        v = st.guard.on_result(call)
    if v is not None:
        note = (note + "\n" if note else "") + f"loopscope: {v.reason}" + (f"; {SUFFIX}." if v.level >= HALT else "")
    if note is None:
        return None
    return {"hookSpecificOutput": {"hookEventName": POST_EVENT[agent], "additionalContext": note}}


def _pair(agent: str, payload: dict[str, Any], st: LiveState) -> str | None:
    """The pending call a result belongs to: by ``tool_use_id`` (Codex), else (Gemini has no id) the oldest pending
    call with the same name and input, else the oldest with the same name (the input can change in place while the
    call runs, e.g. a user's edit of a proposed change)."""
    if agent == CODEX:
        tid = payload.get("tool_use_id")
        return tid if isinstance(tid, str) and tid in st.inputs else None
    live_tool = payload.get("original_request_name") or payload.get("tool_name")
    want = canonical_json([live_tool, payload.get("tool_input")])
    same_name = None
    for tid, seen in st.inputs.items():
        if seen == want:
            return tid
        if same_name is None and seen.startswith(canonical_json([live_tool])[:-1] + ","):
            same_name = tid
    return same_name
