"""mini-swe-agent trajectories (``<instance>.traj.json``, older ``.traj``; one JSON document).
docs/formats.md#mini-swe-agent.

``{"info": {exit_status, submission, model_stats{instance_cost, api_calls}, mini_version, config}, "messages": [...],
"trajectory_format": "mini-swe-agent-1…", "instance_id"}``.

Counting (the rule of ``tests/realdata/tools/transcripts.py``, reproduced exactly): v1 (text protocol) — every
assistant message with at least one fenced ```` ```bash ```` block is one call, tool ``bash``, command = its first
block; the result is the next user message. A message without a block is text, not a call. v2 — assistant
``tool_calls`` (OpenAI style) are the calls and ``role: tool`` messages their results, matched by ``tool_call_id``.

Errors: ``<returncode>N</returncode>`` with N ≠ 0; where there is no return code, mini-swe-agent's format-error reply
("Please always provide EXACTLY ONE action…", sent when a message had several blocks) and its timeout notice are
errors too (the reference leaves those undecided). Usage: per run only; ``instance_cost`` is the session's recorded
cost, on one extra assistant turn ``info`` whose text is the outcome (``exit_status``, submission size).
"""

from __future__ import annotations

import re
from typing import Any

from analyzer.ingest.base import FileContext, parse_arguments, run_session_id, text_of
from analyzer.ingest.formats.swe_agent import add_run_info
from analyzer.ingest.rows import SessionBuilder

FORMAT = "mini_swe_agent"
ALIASES = ("mini-swe-agent", "mini", "mini-swe", "minisweagent")
SNIFF_RANK = 36  # before SWE-agent and OpenHands: its documents are the most specific

BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.S)
RC_RE = re.compile(r"<returncode>(-?\d+)</returncode>")
FORMAT_ERROR = "Please always provide EXACTLY ONE action"
TIMEOUT_RE = re.compile(r"^The last command <command>.*</command> timed out", re.S)


def sniff_document(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return False
    tf = doc.get("trajectory_format")
    if isinstance(tf, str) and tf.startswith("mini-swe-agent"):
        return True
    info = doc.get("info")
    return isinstance(info, dict) and (
        "mini_version" in info or (isinstance(info.get("model_stats"), dict) and "exit_status" in info)
    )


def result_error(text: str) -> tuple[bool, str | None]:
    """(is_error, error_kind) of an observation."""
    m = RC_RE.search(text)
    if m:
        return (int(m.group(1)) != 0), "exit_code"
    if FORMAT_ERROR in text[:200]:
        return True, "format"
    if TIMEOUT_RE.match(text.lstrip()[:2000]):
        return True, "timeout"
    return False, None


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.sessions = 0

    def feed(self, doc: Any, line: int) -> None:
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            self.ctx.error(line, "not a mini-swe-agent trajectory: no `messages` list", doc)
            return
        info = self.ctx.optional_object(line, doc, "info")
        inst = doc.get("instance_id")
        version = info.get("mini_version")
        b = self.ctx.builder(
            FORMAT,
            run_session_id(self.ctx.path, inst if isinstance(inst, str) and inst else None),
            agent_version=str(version) if isinstance(version, (str, int, float)) else None,
        )
        try:
            model = _model(info)
            self._messages(b, doc["messages"], line, model)
            add_run_info(self.ctx, b, info, line, model)
        finally:
            b.finish()
            self.sessions += 1

    def _messages(self, b: SessionBuilder, msgs: list[Any], line: int, model: str | None) -> None:
        pending: str | None = None  # the v1 call waiting for the next user message
        started = False
        for k, m in enumerate(msgs):
            if not isinstance(m, dict):
                self.ctx.error(line, f"message {k} is not an object", m)
                continue
            role = m.get("role")
            content = m.get("content")
            if role == "assistant":
                started = True
                text = text_of(content)
                tid = b.assistant(f"m{k}", text or None, None, line, model=model)
                tcs = m.get("tool_calls")
                if tcs:
                    pending = None
                    for j, tc in enumerate(tcs if isinstance(tcs, list) else ()):
                        if not isinstance(tc, dict):
                            self.ctx.error(line, f"message {k}: a tool call that is not an object", tc)
                            continue
                        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
                        cid = str(tc.get("id") or f"m{k}.{j}")
                        b.call(
                            cid,
                            str(fn.get("name") or "?"),
                            parse_arguments(fn.get("arguments")),
                            None,
                            line,
                            turn_id=tid,
                        )
                    if not isinstance(tcs, list):
                        self.ctx.error(line, f"message {k}: `tool_calls` is not a list", tcs)
                    continue
                blocks = BASH_BLOCK.findall(content) if isinstance(content, str) else BASH_BLOCK.findall(text)
                if blocks:
                    pending = f"m{k}"
                    b.call(pending, "bash", {"command": blocks[0]}, None, line, turn_id=tid)
                else:
                    pending = None
            elif role == "tool":
                cid = m.get("tool_call_id")
                text = text_of(content)
                if not isinstance(cid, str) or not b.has_pending(cid):
                    self.ctx.error(line, f"message {k}: tool result for a call not in this trajectory ({cid})", m)
                    continue
                err, kind = result_error(text)
                b.result(cid, text, err, None, kind if err else None)
            elif role == "user":
                text = text_of(content)
                if not started:
                    b.user_prompt(text, None, line)
                elif pending is not None:
                    err, kind = result_error(text)
                    b.result(pending, text, err, None, kind if err else None)
                    pending = None
                # else: the environment's reply to a message without an action (a format error): no call, no prompt

    def close(self) -> int:
        return self.sessions


def _model(info: dict[str, Any]) -> str | None:
    cfg = info.get("config")
    model = cfg.get("model") if isinstance(cfg, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None
