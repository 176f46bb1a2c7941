"""Builders shared by the policy and replay tests: a session's events written as Python values, and a pi-format
transcript for end-to-end runs through the store. (No tests here.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import write_jsonl

from analyzer.detect.keys import call_key, canonical_json, ordered_json, result_key, shallow_sorted_json
from analyzer.guards import LEVELS, Call, Message, UserPrompt
from analyzer.guards.policies import PRESETS, Policy
from analyzer.guards.replay import Session, simulate


@dataclass
class C:
    """A tool call and its result. ``result=None`` = the call never got one."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    result: str | None = "ok"
    error: bool = False
    parent: str | None = None


@dataclass
class T:
    """An assistant message: its text and the calls it issued."""

    text: str | None = None
    calls: list[C] = field(default_factory=list)
    tokens: int = 0


U = "U"  # a user prompt


# The hand-built sessions replay and calibration tests share: a failing test run repeated, a poll whose status
# changes, a read -> edit -> test cycle that keeps failing.
PYTEST = C("bash", {"command": "pytest tests/test_api.py"}, result="FAILED test_login - AssertionError", error=True)
STATUS = ["queued", "in_progress (1/4)", "in_progress (2/4)", "in_progress (3/4)", "in_progress (4/4)", "completed"]
CYCLE = [
    C("read", {"path": "src/app.py"}, result="def login(): ..."),
    C("edit", {"path": "src/app.py", "old": "x", "new": "y"}, result="old text not found", error=True),
    C("bash", {"command": "pytest"}, result="1 failed", error=True),
]


def build(events: list[Any], session_id: str = "s") -> Session:
    """Events: ``U``, ``T(...)``, or a bare ``C(...)`` (a message issuing just that call)."""
    steps: list[Any] = []
    calls: list[Call] = []
    turn_ids: list[str] = []
    turn_user: list[int] = []
    tokens: list[int] = []
    user_turn = -1
    for ev in events:
        if isinstance(ev, C):
            ev = T(None, [ev])
        pos = len(turn_ids)
        if ev == U:
            user_turn += 1
            steps.append(UserPrompt(pos, user_turn))
            turn_ids.append(f"u{pos}")
            turn_user.append(user_turn)
            tokens.append(0)
            continue
        ut = max(user_turn, 0)
        msg = Message(pos, f"a{pos}", ut, ev.text)
        for c in ev.calls:
            canon = canonical_json(c.args)
            call = Call(
                len(calls),
                len(calls),
                f"c{len(calls)}",
                pos,
                ut,
                c.tool,
                canon,
                call_key(c.tool, canon),
                call_key(c.tool, ordered_json(c.args)),
                call_key(c.tool, shallow_sorted_json(c.args)),
                result_key(c.result, c.error) if c.result is not None else None,
                c.error if c.result is not None else None,
                c.parent,
            )
            calls.append(call)
            msg.calls.append(call)
        steps.append(msg)
        turn_ids.append(msg.turn_id)
        turn_user.append(ut)
        tokens.append(ev.tokens)
    return Session(session_id, steps, calls, turn_ids, turn_user, tokens, [t / 1000 for t in tokens])


def policy(name: str, **settings: Any) -> Policy:
    return PRESETS[name].with_settings(settings) if settings else PRESETS[name]


def verdicts(pol: Policy | str, events: list[Any]) -> list[str]:
    """The level of every call, in order: ok / warn / halt."""
    pol = PRESETS[pol] if isinstance(pol, str) else pol
    sim = simulate(pol.guard(), build(events))
    return [LEVELS[x] for x in sim.levels]


def actions(pol: Policy | str, events: list[Any]) -> list[str]:
    pol = PRESETS[pol] if isinstance(pol, str) else pol
    sim = simulate(pol.guard(), build(events))
    return [a or "ok" for a in sim.actions]


# -- pi-format transcripts for end-to-end tests ----------------------------------------------------------------------
def pi_session(
    path: Path, session_id: str, events: list[Any], tokens_per_message: int = 100, cost_per_message: float = 0.01
) -> Path:
    """Write ``events`` (``U`` prompts carry the text "please continue"; use ("U", text) for another text) as a pi v3
    session where every assistant message has ``tokens_per_message`` input tokens and ``cost_per_message`` dollars."""
    recs: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00Z", "cwd": "/repo"}
    ]
    n = 0
    parent = None

    def rec(message: dict[str, Any]) -> None:
        nonlocal n, parent
        n += 1
        eid = f"{session_id}-e{n}"
        recs.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
                "message": message,
            }
        )
        parent = eid

    calls = 0
    for ev in events:
        if isinstance(ev, C):
            ev = T(None, [ev])
        if ev == U or (isinstance(ev, tuple) and ev[0] == U):
            text = ev[1] if isinstance(ev, tuple) else "please continue"
            rec({"role": "user", "content": text})
            continue
        content: list[dict[str, Any]] = []
        if ev.text:
            content.append({"type": "text", "text": ev.text})
        ids = []
        for c in ev.calls:
            cid = f"{session_id}-c{calls}"
            calls += 1
            ids.append((cid, c))
            content.append({"type": "toolCall", "id": cid, "name": c.tool, "arguments": c.args})
        rec(
            {
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "usage": {
                    "input": tokens_per_message,
                    "output": 0,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "cost": {"total": cost_per_message},
                },
            }
        )
        for cid, c in ids:
            if c.result is not None:
                rec(
                    {
                        "role": "toolResult",
                        "toolCallId": cid,
                        "toolName": c.tool,
                        "content": [{"type": "text", "text": c.result}],
                        "isError": c.error,
                    }
                )
    return write_jsonl(path, recs)
