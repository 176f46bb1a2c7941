"""The hook's light entry point (the ``loopscope-hook`` script): ``loopscope-hook claude-code|codex|gemini-cli
[--policy P] [--settings FILE] [--set NAME=VALUE ...]`` reads one hook event's JSON on stdin and prints the hook's
answer in that agent's protocol (``claude_code``; ``live`` for Codex and Gemini CLI).

It runs before every tool call, so it imports only the guard engines, and it fails open: a crash, a bad payload, a
locked or unreadable state or a missing transcript never blocks the agent (one line on stderr, exit 0, no output;
for Codex and Gemini the failure also goes to the hook's log, with each denial, which ``loopscope hook status``
summarises).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

AGENTS = ("claude-code", "codex", "gemini-cli")
USAGE = "usage: loopscope-hook claude-code|codex|gemini-cli [--policy NAME] [--settings FILE] [--set NAME=VALUE ...]"


def parse_args(argv: list[str]) -> tuple[str, str | None, Path | None, dict[str, str]]:
    if not argv or argv[0] not in AGENTS:
        raise ValueError(USAGE)
    policy: str | None = None
    settings: Path | None = None
    sets: dict[str, str] = {}
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--policy", "-p", "--settings", "--set") and i + 1 < len(argv):
            v = argv[i + 1]
            if a == "--settings":
                settings = Path(v)
            elif a == "--set":
                name, sep, value = v.partition("=")
                if not sep:
                    raise ValueError(f"--set expects NAME=VALUE, got {v!r}")
                sets[name.strip()] = value
            else:
                policy = v
            i += 2
        else:
            raise ValueError(f"unknown argument {a!r}; {USAGE}")
    return argv[0], policy, settings, sets


def run(argv: list[str], raw: bytes) -> dict[str, Any] | None:
    """One hook event: the answer to print (None: nothing)."""

    from analyzer.hook.claude_code import handle, new_state, signature
    from analyzer.hook.settings import hook_policy
    from analyzer.hook.state import locked, state_path

    agent, policy_name, settings, sets = parse_args(argv)
    if agent != "claude-code":
        return _run_live(agent, policy_name, settings, sets, raw)
    payload, sid = _event(raw)
    if payload.get("hook_event_name") not in ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit"):
        return None
    policy = hook_policy(policy_name, settings, sets)
    agent = payload.get("agent_id")
    with locked(state_path(sid, agent if isinstance(agent, str) and agent else None)) as box:
        if box.note:
            _warn(box.note)
        st = box.value
        if st is None or getattr(st, "policy", None) != signature(policy):
            st = box.value = new_state(policy)
        return handle(payload, st, policy)


def _event(raw: bytes) -> tuple[dict[str, Any], str]:
    """An agent's hook event and its session id; ValueError when the input is not one (every agent sends JSON with a
    ``session_id``)."""
    import orjson

    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"the hook's input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise ValueError("the hook's input is not a JSON object")
    sid = payload.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise ValueError("the hook's input has no session_id")
    return payload, sid


def _run_live(
    agent: str, policy_name: str | None, settings: Path | None, sets: dict[str, str], raw: bytes
) -> dict[str, Any] | None:
    """One Codex or Gemini CLI event (``live``)."""

    from analyzer.hook import log
    from analyzer.hook.claude_code import signature
    from analyzer.hook.live import EVENTS, LiveState, handle, new_state
    from analyzer.hook.settings import hook_policy
    from analyzer.hook.state import locked, state_path

    payload, sid = _event(raw)
    if payload.get("hook_event_name") not in EVENTS[agent]:
        return None
    policy = hook_policy(policy_name, settings, sets, agent=agent)
    sub = payload.get("agent_id")  # Codex 0.171+: a subagent thread keeps its own counters
    with locked(state_path(f"{agent}-{sid}", sub if isinstance(sub, str) and sub else None)) as box:
        if box.note:
            _warn(box.note)
            log.append("error", agent, session=sid, error=box.note)
        st = box.value
        if not isinstance(st, LiveState) or st.policy != signature(policy) or st.agent != agent:
            st = box.value = new_state(policy, agent)
        out, denial = handle(agent, payload, st, policy)
    if denial is not None:
        log.append("deny", agent, session=sid, **denial)
    return out


def _warn(text: str) -> None:
    try:
        sys.stderr.write(f"loopscope-hook: {text}\n")
    except Exception:
        pass


def main(argv: list[str] | None = None) -> int:
    """Run one event and always exit 0: on any failure the call is allowed and one line goes to stderr."""
    args = sys.argv[1:] if argv is None else argv
    if argv is None:  # the hook's own process: a short life with no cycles worth collecting (~3% of its time)
        import gc

        gc.disable()
    try:
        raw = sys.stdin.buffer.read()
        out = run(args, raw)
        if out is not None:
            import orjson

            sys.stdout.buffer.write(orjson.dumps(out) + b"\n")
            sys.stdout.flush()
    except BaseException as exc:  # fail open, whatever happened
        msg = str(exc).splitlines()[0] if str(exc) else ""
        _warn(f"{type(exc).__name__}: {msg} (call allowed)")
        if args and args[0] in AGENTS[1:]:
            try:
                from analyzer.hook import log

                log.append("error", args[0], error=f"{type(exc).__name__}: {msg}")
            except BaseException:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
