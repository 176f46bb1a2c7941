"""The Claude Code hook: each hook event's JSON in, the session's guard fed, the hook protocol's JSON out.

Events (https://code.claude.com/docs/en/hooks):

- ``PreToolUse``: the call is fed to the guard (``on_call``; a new assistant message first ends the previous one,
  ``on_step_end``, and starts its own, ``on_message``, with the message's text read from ``transcript_path``). No
  verdict: no output (the call goes through Claude Code's own permission flow). A warning: the call runs and the
  reason reaches the model as ``hookSpecificOutput.additionalContext``. A halt: ``permissionDecision: "deny"`` with
  the reason as ``permissionDecisionReason``, which the model reads.
- ``PostToolUse`` / ``PostToolUseFailure``: the result (``tool_response``, or the failure's ``error``) completes the
  call (``on_result``), so result-aware rules work live. A verdict there reaches the model as additional context (a
  halt as ``decision: "block"`` with its reason).
- ``UserPromptSubmit``: a user prompt resets the counters (``on_user``), as the offline scan does.

The guard is exactly the replay's (``Policy.guard()``), so the hook decides as ``loopscope replay --policy P`` does
on the same events (tests/test_hook.py replays real transcripts through it). Keys are the store's (``detect.keys``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from analyzer.detect.keys import call_key, canonical_json, ordered_json, result_key, shallow_sorted_json
from analyzer.detect.semantics import POLL_RESULT_CHARS, POLL_TOOLS, SHELL_POLL_TOOLS, running_poll
from analyzer.guards.base import HALT, WARN, Call, Guard, Message, Verdict
from analyzer.guards.policies import Policy

VERSION = 2  # 2: the loopscope guard compares calls by their action key (a state of v1 starts afresh)
TAIL_START = 1 << 20  # a transcript first seen longer than this is read from its last MiB only
TEXT_CAP = 20_000  # characters of one message's text kept for the text rules
MESSAGES_KEPT = 4
TOOL_IDS_KEPT = 256
PENDING_KEPT = 64
SUFFIX = "change approach or ask the user"
ARGS_LIMIT = 100_000  # characters of arguments a guard reads, as the replay loads them (guards.replay.ARGS_LIMIT)


@dataclass
class State:
    """Everything the hook keeps between two events of one session (pickled, small: the guard's bounded state plus
    a few counters and the transcript's read position)."""

    policy: str  # the policy's name and settings: a change of policy starts a fresh guard
    guard: Guard
    user_turn: int = 0
    turn: int = -1
    n: int = 0  # calls seen
    msg: str | None = None  # the current assistant message's id
    msg_obj: Message | None = None
    pending: dict[str, Call] = field(default_factory=dict)  # tool_use_id -> call that ran, awaiting its result
    offset: int = 0  # bytes of the transcript read so far
    transcript: str | None = None
    texts: dict[str, str] = field(default_factory=dict)  # message id -> its text so far (last few messages)
    tool_msg: dict[str, str] = field(default_factory=dict)  # tool_use_id -> message id, read from the transcript
    denied: int = 0
    warned: int = 0


def signature(policy: Policy) -> str:
    return f"v{VERSION}:{policy.engine}:{policy.settings!r}"


def new_state(policy: Policy) -> State:
    return State(signature(policy), policy.guard())


def handle(payload: dict[str, Any], st: State, policy: Policy) -> dict[str, Any] | None:
    """Apply one hook event to the session's state; return the JSON to print (None: print nothing)."""
    event = payload.get("hook_event_name")
    if event == "PreToolUse":
        return _pre(payload, st, policy)
    if event in ("PostToolUse", "PostToolUseFailure"):
        return _post(payload, st, event)
    if event == "UserPromptSubmit":
        _end_message(st)
        st.guard.on_user()
        st.user_turn += 1
        st.pending.clear()
        return None
    return None


# -- events -----------------------------------------------------------------------------------------------------------
def make_call(st: State, tid: str, tool: str, args: Any) -> Call:
    """The guard's call, keyed exactly as the store keys the transcript's call (``detect.keys``)."""
    canon = canonical_json(args)
    return Call(
        st.n,
        st.n,
        tid,
        st.turn,
        st.user_turn,
        tool,
        canon[:ARGS_LIMIT],
        call_key(tool, canon),
        call_key(tool, ordered_json(args)),
        call_key(tool, shallow_sorted_json(args)),
        None,
        None,
        None,
    )


def guard_call(
    st: State, tid: str, tool: str, args: Any, verdicts: list[Verdict]
) -> tuple[Call, Verdict | None, Verdict | None]:
    """Put a live call before the guard, in its message: the call, the guard's verdict on it, and the strongest of
    ``verdicts`` (those of its message so far) and that one. Every agent's hook decides from these."""
    call = make_call(st, tid, tool, args)
    st.n += 1
    if st.msg_obj is not None:
        st.msg_obj.calls.append(call)
    v = st.guard.on_call(call)
    if v is not None:
        verdicts.append(v)
    return call, v, max(verdicts, key=lambda x: x.level, default=None)


def record_result(call: Call, text: str, is_error: bool) -> None:
    """A live result on the guard's call, as the store records the transcript's: its key, its error flag, and whether
    it is a poll of a process that still runs (read from the same first characters the store keeps)."""
    call.result_key = result_key(text, is_error)
    call.is_error = is_error
    if call.tool in POLL_TOOLS or call.tool in SHELL_POLL_TOOLS:
        try:
            args = orjson.loads(call.args)
        except orjson.JSONDecodeError:
            args = None
        call.waiting = running_poll(call.tool, args, text[:POLL_RESULT_CHARS])


def _pre(payload: dict[str, Any], st: State, policy: Policy) -> dict[str, Any] | None:
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise ValueError("PreToolUse without a tool_name")
    args = payload.get("tool_input")
    if args is None:
        args = {}
    tid = payload.get("tool_use_id")
    tid = tid if isinstance(tid, str) and tid else f"call-{st.n}"
    _read_transcript(st, payload)
    mid = st.tool_msg.pop(tid, None)
    if mid is None:  # not in the transcript (unreadable, or not written yet): calls awaiting results share a message
        mid = st.msg if st.msg is not None and st.pending else f"call:{tid}"
    verdicts: list[Verdict] = []
    if mid != st.msg:
        _end_message(st)
        st.turn += 1
        st.msg = mid
        st.msg_obj = Message(st.turn, mid, st.user_turn, st.texts.get(mid) or None)
        v = st.guard.on_message(st.msg_obj)
        if v is not None:
            verdicts.append(v)
    call, v, top = guard_call(st, tid, tool, args, verdicts)
    if top is not None and top.level >= HALT:
        st.denied += 1
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": f"loopscope ({policy.name}): {top.reason}; {SUFFIX}.",
            }
        }
    if v is None or not v.blocked:
        st.pending[tid] = call
        if len(st.pending) > PENDING_KEPT:
            del st.pending[next(iter(st.pending))]
    if top is not None and top.level >= WARN:
        st.warned += 1
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "additionalContext": f"loopscope ({policy.name}) warning: {top.reason}. If this is not making "
                f"progress, {SUFFIX}; repeating it will be blocked.",
            }
        }
    return None


def _post(payload: dict[str, Any], st: State, event: str) -> dict[str, Any] | None:
    tid = payload.get("tool_use_id")
    call = st.pending.pop(tid, None) if isinstance(tid, str) else None
    if call is None:
        return None
    if event == "PostToolUseFailure":
        err = payload.get("error")
        text, is_error = (err if isinstance(err, str) else _text(err)), True
    else:
        text, is_error = _text(payload.get("tool_response")), False
    record_result(call, text, is_error)
    v = st.guard.on_result(call)
    if v is None:
        return None
    out: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": event, "additionalContext": f"loopscope: {v.reason}"}
    }
    if v.level >= HALT:
        out["decision"] = "block"
        out["reason"] = f"loopscope: {v.reason}; {SUFFIX}."
    return out


def _end_message(st: State) -> None:
    if st.msg_obj is not None:
        st.guard.on_step_end(st.msg_obj)
    st.msg, st.msg_obj = None, None


def _text(resp: Any) -> str:
    """A tool response as the text the result key hashes: a string as is, a shell's stdout and stderr, else JSON."""
    if resp is None:
        return ""
    if isinstance(resp, str):
        return resp
    if isinstance(resp, dict) and ("stdout" in resp or "stderr" in resp):
        out, err = resp.get("stdout") or "", resp.get("stderr") or ""
        return f"{out}\n{err}" if out and err else str(out or err)
    return canonical_json(resp)


# -- the transcript ----------------------------------------------------------------------------------------------------
def _read_transcript(st: State, payload: dict[str, Any]) -> None:
    """Read the lines appended since the last call: assistant text per message, and which message each tool use is
    in. Never raises (an unreadable transcript only loses the text rules and message boundaries)."""
    path = payload.get("agent_transcript_path") or payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        return
    partial = False
    try:
        with open(os.path.expanduser(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if path != st.transcript or size < st.offset:
                st.transcript, st.offset = path, 0
                if size > TAIL_START:
                    st.offset, partial = size - TAIL_START, True
            if size <= st.offset:
                return
            f.seek(st.offset)
            data = f.read(size - st.offset)
    except OSError:
        return
    end = data.rfind(b"\n")
    if end < 0:
        return
    start = data.find(b"\n") + 1 if partial else 0  # a tail read starts mid-line
    st.offset += end + 1
    for line in data[start:end].split(b"\n"):
        if b'"assistant"' not in line:
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        if not isinstance(msg, dict) or rec.get("type") != "assistant":
            continue
        mid = msg.get("id")
        content = msg.get("content")
        if not isinstance(mid, str) or not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text" and isinstance(b.get("text"), str):
                prev = st.texts.pop(mid, "")
                st.texts[mid] = ((prev + "\n" + b["text"]) if prev else b["text"])[-TEXT_CAP:]
                while len(st.texts) > MESSAGES_KEPT:
                    del st.texts[next(iter(st.texts))]
            elif b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                st.tool_msg[b["id"]] = mid
                while len(st.tool_msg) > TOOL_IDS_KEPT:
                    del st.tool_msg[next(iter(st.tool_msg))]
