"""Render agent sessions, described once in a small format-neutral model, as the JSONL each agent writes.

Why this exists: loopscope's sample data and its benchmark corpus must look like real pi, Claude Code, Codex and
OpenAI-messages transcripts (same records, ids, usage and result shapes), and the sample data must say exactly which
calls form which loop. Describing a session once (``Session`` > ``Turn`` > ``Step`` > ``Call``) and rendering it four
ways gives both: scenarios name their loops by ``Call`` object, and every format gets the same shapes. The renderers
are generators, so a 1 GB session streams to disk without being held in memory.

Every renderer reports what it wrote to an optional ``Recorder``: calls in transcript order (the order loopscope's
``calls.seq`` follows), with the tool name and arguments *as the agent wrote them*, so loop checks run on what an
adapter will read, not on the neutral model.
"""

from __future__ import annotations

import json
import random
import re as _re
import shlex as _shlex
import zipfile as _zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

try:  # orjson is a loopscope dependency; the stdlib fallback keeps this file runnable anywhere
    import orjson

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj) + b"\n"
except ImportError:  # pragma: no cover

    def dumps(obj: Any) -> bytes:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


# --------------------------------------------------------------------------------------------------------------------
# The neutral model
# --------------------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Call:
    """One tool call. ``op`` is neutral (``sh``, ``read``, ``edit``, ``write``, ``grep``, ``task``, ``script``,
    ``tool``); each format maps it to its own tool (pi ``bash``, Claude ``Bash``, Codex ``exec_command`` ...)."""

    op: str
    args: dict[str, Any]
    out: str = ""
    code: int = 0  # exit code / error: non-zero means the call failed
    rejected: bool = False  # the user refused the call (Claude Code permission prompt)
    secs: float = 0.6  # how long the tool ran
    children: list[Call] = field(default_factory=list)  # calls made inside a script (pi codemode)
    sub: Session | None = None  # the subagent a Claude ``Task`` call spawned


@dataclass(eq=False)
class Step:
    """One assistant message, i.e. one API response, with the calls it issued."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    thinking: str = ""
    aborted: bool = False  # the user interrupted: the calls never got results
    secs: float = 4.0  # model latency before the message


@dataclass(eq=False)
class Turn:
    """A user prompt and the assistant steps that answer it."""

    prompt: str
    steps: list[Step]
    wait: float = 40.0  # seconds between the previous activity and the prompt


@dataclass(eq=False)
class Session:
    fmt: str  # pi | claude_code | codex | openai_messages | swe_agent | mini_swe_agent | openhands | inspect |
    #           gemini_cli | opencode
    sid: str
    cwd: str
    start: datetime
    model: str
    turns: Iterable[Turn]
    title: str = ""
    version: str = ""  # agent version (Claude Code, Codex CLI)
    variant: str = ""  # codex: "exec" (unified exec_command) or "shell" (older shell tool)
    branch: str = "main"
    agent_id: str = ""  # Claude subagent id; set on the subagent's own Session
    parent: Session | None = None
    seed: int = 0


# --------------------------------------------------------------------------------------------------------------------
# Ids, clocks, usage
# --------------------------------------------------------------------------------------------------------------------

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_HEX = "0123456789abcdef"


class Ids:
    """Deterministic ids in each agent's own shape."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def b62(self, n: int) -> str:
        r = self.rng.getrandbits
        return "".join(_B62[r(6) % 62] for _ in range(n))

    def hexs(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"


def new_uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"


class Clock:
    """Session time: advances by the scenario's latencies, printed the way the agents print it."""

    def __init__(self, start: datetime) -> None:
        self.t = start.astimezone(UTC) if start.tzinfo else start.replace(tzinfo=UTC)

    def tick(self, secs: float) -> None:
        self.t += timedelta(seconds=secs)

    def iso(self) -> str:
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.t.microsecond // 1000:03d}Z"

    def ms(self) -> int:
        return int(self.t.timestamp() * 1000)


def est_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


PRICES = {  # USD per million tokens (input, output, cache read, cache write); pi writes its own cost
    "claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75),
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "claude-haiku-4-5": (1.0, 5.0, 0.1, 1.25),
    "gpt-5.1-codex": (1.25, 10.0, 0.125, 0.0),
    "gpt-5-codex": (1.25, 10.0, 0.125, 0.0),
}


class Meter:
    """The context window of one session: each response reads what came before from the prompt cache and pays for
    what is new, which is how real usage grows. Past ``COMPACT_AT`` tokens the context is compacted, as the agents
    do, so very long sessions (the benchmarks') keep plausible per-response usage. Deterministic."""

    COMPACT_AT, COMPACT_TO = 180_000, 30_000

    def __init__(self, system_tokens: int, rng: random.Random) -> None:
        self.ctx = 0
        self.new = system_tokens
        self.rng = rng
        self.cum = {
            "input_tokens": 0,
            "cached_input_tokens": 0,
            "output_tokens": 0,
            "reasoning_output_tokens": 0,
            "total_tokens": 0,
        }

    def add(self, text: str) -> None:
        self.new += est_tokens(text)

    def response(self, out_text: str, thinking: str = "") -> tuple[int, int, int, int]:
        """(uncached input, output, cache read, cache write) of the next response, Anthropic style."""
        out = est_tokens(out_text) + est_tokens(thinking) + self.rng.randint(8, 40)
        cache_read, cache_write, inp = self.ctx, self.new, self.rng.randint(1, 9)
        self.ctx += self.new + out
        if self.ctx > self.COMPACT_AT:
            self.ctx = self.COMPACT_TO
        self.new = 0
        return inp, out, cache_read, cache_write

    def openai_response(self, out_text: str, thinking: str = "") -> dict[str, int]:
        """``last_token_usage`` of the next response, OpenAI style (input includes cached input)."""
        reasoning = est_tokens(thinking) * 3 + self.rng.randint(0, 64)
        out = est_tokens(out_text) + reasoning + self.rng.randint(4, 24)
        cached = (self.ctx // 128) * 128
        inp = self.ctx + self.new
        self.ctx = inp + out if inp + out <= self.COMPACT_AT else self.COMPACT_TO
        self.new = 0
        last = {
            "input_tokens": inp,
            "cached_input_tokens": cached,
            "output_tokens": out,
            "reasoning_output_tokens": reasoning,
            "total_tokens": inp + out,
        }
        for k, v in last.items():
            self.cum[k] += v
        return last


def price(model: str, inp: int, out: int, cr: int, cw: int) -> dict[str, float]:
    p = PRICES.get(model, (3.0, 15.0, 0.3, 3.75))
    c = {
        "input": inp * p[0] / 1e6,
        "output": out * p[1] / 1e6,
        "cacheRead": cr * p[2] / 1e6,
        "cacheWrite": cw * p[3] / 1e6,
    }
    c["total"] = c["input"] + c["output"] + c["cacheRead"] + c["cacheWrite"]
    return {k: round(v, 8) for k, v in c.items()}


# --------------------------------------------------------------------------------------------------------------------
# What the renderers report
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class CallRec:
    seq: int
    call_id: str
    tool: str
    args: Any  # as written by the agent (Codex custom tools: the raw input string)
    result: str | None
    is_error: bool | None
    user_turn: int
    parent_id: str | None
    step: Step
    call: Call
    tokens: int  # total tokens of the API response that issued the call


@dataclass
class TextRec:
    user_turn: int
    text: str
    step: Step


@dataclass
class Recorder:
    """What one rendered session holds, in transcript order."""

    session_id: str = ""
    calls: list[CallRec] = field(default_factory=list)
    texts: list[TextRec] = field(default_factory=list)
    user_turns: int = 0
    tokens: int = 0
    first_ts: str = ""  # the first timestamp written for the session

    def call(self, **kw: Any) -> None:
        self.calls.append(CallRec(seq=len(self.calls), **kw))


# --------------------------------------------------------------------------------------------------------------------
# Neutral ops -> each agent's tools
# --------------------------------------------------------------------------------------------------------------------

PI_EDIT_ERROR = (
    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
)
CLAUDE_REJECT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed."
)


def _abs(cwd: str, path: str) -> str:
    return path if path.startswith("/") else f"{cwd.rstrip('/')}/{path}"


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(text.split("\n"), start))


def pi_tool(c: Call) -> tuple[str, dict[str, Any], str]:
    """(tool, arguments, result text) as pi writes them."""
    a = c.args
    if c.op == "sh":
        args = {"command": a["cmd"]}
        if "timeout" in a:
            args["timeout"] = a["timeout"]
        out = a.get("pi_out", c.out)
        if c.code:
            out = (out.rstrip("\n") + f"\n\nCommand exited with code {c.code}").lstrip("\n")
        return "bash", args, out
    if c.op == "read":
        args = {"path": a["path"]}
        if "offset" in a:
            args.update(offset=a["offset"], limit=a.get("limit", 200))
        return "read", args, (f"ENOENT: no such file or directory, access '{a['path']}'" if c.code else c.out)
    if c.op == "edit":
        text = (
            PI_EDIT_ERROR.format(path=a["path"])
            if c.code
            else f"Successfully replaced text in {a['path']}. Changed {len(a['old'])} characters to "
            f"{len(a['new'])} characters."
        )
        return "edit", {"path": a["path"], "oldText": a["old"], "newText": a["new"]}, text
    if c.op == "write":
        return (
            "write",
            {"path": a["path"], "content": a["content"]},
            f"Successfully wrote {len(a['content'].encode())} bytes to {a['path']}",
        )
    if c.op == "grep":
        out = c.out
        if c.code:
            out = (out + "\n\nCommand exited with code 1").lstrip("\n")
        return "bash", {"command": f'rg -n "{a["pattern"]}" {a.get("path", ".")}'}, out
    if c.op == "script":
        return "codemode", {"code": a["code"]}, c.out
    if c.op == "tool":
        return a["name"], a["arguments"], c.out
    raise ValueError(f"pi cannot render op {c.op}")


def claude_tool(c: Call, cwd: str) -> tuple[str, dict[str, Any], str, Any]:
    """(tool, input, tool_result content, toolUseResult) as Claude Code writes them."""
    a = c.args
    if c.rejected:
        name, args, _, _ = claude_tool(Call(c.op, c.args, c.out), cwd)
        return name, args, CLAUDE_REJECT, "User rejected tool use"
    if c.op == "sh":
        args = {"command": a["cmd"], "description": a.get("desc", "Run command")}
        if "timeout" in a:
            args["timeout"] = a["timeout"] * 1000
        if c.code:
            return "Bash", args, c.out, f"Error: {c.out}"
        return "Bash", args, c.out, {"stdout": c.out, "stderr": "", "interrupted": False, "isImage": False}
    if c.op == "read":
        path = _abs(cwd, a["path"])
        if c.code:
            return (
                "Read",
                {"file_path": path},
                "<tool_use_error>File does not exist.</tool_use_error>",
                "Error: File does not exist.",
            )
        n = c.out.count("\n") + 1
        return (
            "Read",
            {"file_path": path},
            _numbered(c.out),
            {
                "type": "text",
                "file": {"filePath": path, "content": c.out, "numLines": n, "startLine": 1, "totalLines": n},
            },
        )
    if c.op == "edit":
        path = _abs(cwd, a["path"])
        args = {"file_path": path, "old_string": a["old"], "new_string": a["new"]}
        if c.code:
            err = f"String to replace not found in file.\nString: {a['old']}"
            return "Edit", args, f"<tool_use_error>{err}</tool_use_error>", f"Error: {err}"
        new_lines = a["new"].split("\n")
        text = (
            f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited "
            f"file:\n{_numbered(a['new'], a.get('line', 1))}"
        )
        patch = [
            {
                "oldStart": a.get("line", 1),
                "oldLines": a["old"].count("\n") + 1,
                "newStart": a.get("line", 1),
                "newLines": len(new_lines),
                "lines": [f"-{x}" for x in a["old"].split("\n")] + [f"+{x}" for x in new_lines],
            }
        ]
        return (
            "Edit",
            args,
            text,
            {
                "filePath": path,
                "oldString": a["old"],
                "newString": a["new"],
                "originalFile": a.get("original", ""),
                "structuredPatch": patch,
                "userModified": False,
                "replaceAll": False,
            },
        )
    if c.op == "write":
        path = _abs(cwd, a["path"])
        return (
            "Write",
            {"file_path": path, "content": a["content"]},
            f"File created successfully at: {path}",
            {"type": "create", "filePath": path, "content": a["content"], "structuredPatch": []},
        )
    if c.op == "grep":
        args = {"pattern": a["pattern"]}
        if "path" in a:
            args["path"] = a["path"]
        files = [x for x in c.out.split("\n") if x]
        text = (
            f"Found {len(files)} file{'s' if len(files) != 1 else ''}\n" + "\n".join(files)
            if files
            else "No files found"
        )
        return "Grep", args, text, {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)}
    if c.op == "task":
        args = {"description": a["description"], "prompt": a["prompt"], "subagent_type": a["subagent_type"]}
        return "Task", args, c.out, None  # content and toolUseResult are filled in by the renderer (agent id)
    if c.op == "tool":
        return a["name"], a["arguments"], c.out, c.out
    raise ValueError(f"Claude Code cannot render op {c.op}")


def _patch_text(c: Call) -> str:
    a = c.args
    if c.op == "write":
        body = "\n".join("+" + x for x in a["content"].split("\n"))
        return f"*** Begin Patch\n*** Add File: {a['path']}\n{body}\n*** End Patch"
    old = "\n".join("-" + x for x in a["old"].split("\n"))
    new = "\n".join("+" + x for x in a["new"].split("\n"))
    ctx = f"@@ {a['anchor']}\n" if a.get("anchor") else "@@\n"
    return f"*** Begin Patch\n*** Update File: {a['path']}\n{ctx}{old}\n{new}\n*** End Patch"


def codex_tool(c: Call, s: Session, ids: Ids) -> tuple[str, str, Any, str, str]:
    """(record type, tool, arguments as written, output string, is_error marker) as Codex writes them.
    ``arguments`` is the JSON string of a function_call, or the free-text input of a custom_tool_call."""
    a = c.args
    if c.op in ("edit", "write"):
        patch = _patch_text(c)
        if c.code:
            out = {
                "output": f"apply_patch verification failed: Failed to find expected lines in {a['path']}:\n"
                f"{a.get('old', '')}",
                "metadata": {"exit_code": 1, "duration_seconds": 0.0},
            }
        else:
            kind = "A" if c.op == "write" else "M"
            out = {
                "output": f"Success. Updated the following files:\n{kind} {a['path']}\n",
                "metadata": {"exit_code": 0, "duration_seconds": 0.0},
            }
        return "custom_tool_call", "apply_patch", patch, json.dumps(out, separators=(",", ":")), ""
    if c.op == "tool":
        return "function_call", a["name"], json.dumps(a["arguments"], separators=(",", ":")), c.out, ""
    if c.op == "sh":
        cmd = a["cmd"]
    elif c.op == "read":
        cmd = a.get("codex_cmd") or f"sed -n '1,200p' {a['path']}"
    elif c.op == "grep":
        cmd = f'rg -n "{a["pattern"]}" {a.get("path", ".")}'
    else:
        raise ValueError(f"Codex cannot render op {c.op}")
    out = c.out
    if s.variant == "shell":
        args = {"command": ["bash", "-lc", cmd], "workdir": s.cwd, "timeout_ms": 120000}
        text = json.dumps(
            {"output": out, "metadata": {"exit_code": c.code, "duration_seconds": round(c.secs, 1)}},
            separators=(",", ":"),
        )
        return "function_call", "shell", json.dumps(args, separators=(",", ":")), text, ""
    args = {"cmd": cmd, "workdir": s.cwd}
    if "yield" in a:
        args["yield_time_ms"] = a["yield"]
    text = (
        f"Chunk ID: {ids.hexs(6)}\nWall time: {c.secs:.4f} seconds\nProcess exited with code {c.code}\n"
        f"Original token count: {est_tokens(out)}\nOutput:\n{out}"
    )
    return "function_call", "exec_command", json.dumps(args, separators=(",", ":")), text, ""


OPENAI_TOOLS = {
    "run_shell": ("Run a shell command in the repository and return its output.", {"command": "string"}),
    "read_file": ("Read a file from the repository.", {"path": "string"}),
    "apply_edit": ("Replace an exact snippet in a file.", {"path": "string", "find": "string", "replace": "string"}),
    "write_file": ("Create or overwrite a file.", {"path": "string", "content": "string"}),
    "search_code": ("Search the repository for a regular expression.", {"query": "string", "path": "string"}),
}


def openai_tool(c: Call) -> tuple[str, dict[str, Any], str]:
    a = c.args
    if c.op == "sh":
        return "run_shell", {"command": a["cmd"]}, c.out + (f"\n(exit code {c.code})" if c.code else "")
    if c.op == "read":
        return "read_file", {"path": a["path"]}, (f"Error: file not found: {a['path']}" if c.code else c.out)
    if c.op == "edit":
        return (
            "apply_edit",
            {"path": a["path"], "find": a["old"], "replace": a["new"]},
            (f"Error: `find` text not found in {a['path']}" if c.code else f"Applied edit to {a['path']}"),
        )
    if c.op == "write":
        return (
            "write_file",
            {"path": a["path"], "content": a["content"]},
            f"Wrote {len(a['content'].encode())} bytes to {a['path']}",
        )
    if c.op == "grep":
        return "search_code", {"query": a["pattern"], "path": a.get("path", ".")}, c.out or "No matches."
    if c.op == "tool":
        return a["name"], a["arguments"], c.out
    raise ValueError(f"OpenAI messages cannot render op {c.op}")


# --------------------------------------------------------------------------------------------------------------------
# Renderers
# --------------------------------------------------------------------------------------------------------------------


def render(
    s: Session, rec: Recorder | None = None, subs: list[tuple[Session, Recorder | None]] | None = None
) -> Iterator[bytes]:
    """The JSONL lines of ``s``. Claude subagent sessions met on the way are appended to ``subs`` (render them
    to their own files)."""
    if rec is not None:
        rec.session_id = s.sid if s.fmt != "claude_code" or not s.agent_id else f"agent-{s.agent_id}"
    if s.fmt == "pi":
        return render_pi(s, rec)
    if s.fmt == "claude_code":
        return render_claude(s, rec, subs if subs is not None else [])
    if s.fmt == "codex":
        return render_codex(s, rec)
    if s.fmt == "openai_messages":
        return iter([render_openai(s, rec)])
    if s.fmt == "swe_agent":
        return render_swe_agent(s, rec)
    if s.fmt == "mini_swe_agent":
        return render_mini_swe_agent(s, rec)
    if s.fmt == "openhands":
        return render_openhands(s, rec)
    if s.fmt == "gemini_cli":
        return render_gemini(s, rec)
    raise ValueError(f"{s.fmt}: render it with its own function (render_inspect_sample, render_opencode)")


def render_pi(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(2400, ids.rng)
    openai = s.model.startswith("gpt")
    provider, api = ("openai", "openai-responses") if openai else ("anthropic", "anthropic-messages")
    parent: str | None = None

    def entry(kind: str, **kw: Any) -> bytes:
        nonlocal parent
        eid = ids.hexs(8)
        line = dumps({"type": kind, "id": eid, "parentId": parent, "timestamp": clk.iso(), **kw})
        parent = eid
        return line

    if rec is not None:
        rec.first_ts = clk.iso()
    yield dumps({"type": "session", "version": 3, "id": s.sid, "timestamp": clk.iso(), "cwd": s.cwd})
    clk.tick(0.004)
    yield entry("model_change", provider=provider, modelId=s.model)
    yield entry("thinking_level_change", thinkingLevel="medium" if not openai else "high")
    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else min(turn.wait, 2.5))
        if rec is not None:
            rec.user_turns += 1
        yield entry(
            "message",
            message={"role": "user", "content": [{"type": "text", "text": turn.prompt}], "timestamp": clk.ms()},
        )
        meter.add(turn.prompt)
        for step in turn.steps:
            clk.tick(step.secs)
            content: list[dict[str, Any]] = []
            if step.thinking:
                content.append(
                    {"type": "thinking", "thinking": step.thinking, "thinkingSignature": "" if openai else ids.b62(88)}
                )
            if step.text:
                content.append({"type": "text", "text": step.text})
            flat: list[tuple[Call, str, str, dict[str, Any], str, str | None]] = []
            for c in step.calls:
                cid = f"call_{ids.b62(24)}" if openai else f"toolu_01{ids.b62(22)}"
                name, args, out = pi_tool(c)
                content.append({"type": "toolCall", "id": cid, "name": name, "arguments": args})
                flat.append((c, cid, name, args, out, None))
                for ch in c.children:
                    chid = f"{cid}_n{len(flat)}"
                    cname, cargs, cout = pi_tool(ch)
                    content.append(
                        {"type": "toolCall", "id": chid, "name": cname, "arguments": cargs, "parentToolCallId": cid}
                    )
                    flat.append((ch, chid, cname, cargs, cout, cid))
            out_text = step.text + "".join(json.dumps(f[3]) for f in flat)
            if openai:
                u = meter.openai_response(out_text, step.thinking)
                inp, out, cr, cw = (
                    u["input_tokens"] - u["cached_input_tokens"],
                    u["output_tokens"],
                    u["cached_input_tokens"],
                    0,
                )
            else:
                inp, out, cr, cw = meter.response(out_text, step.thinking)
            if step.aborted:
                out = min(out, 12)
            usage = {
                "input": inp,
                "output": out,
                "cacheRead": cr,
                "cacheWrite": cw,
                "totalTokens": inp + out + cr + cw,
                "cost": price(s.model, inp, out, cr, cw),
            }
            stop = "aborted" if step.aborted else ("toolUse" if step.calls else "stop")
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": content,
                "api": api,
                "provider": provider,
                "model": s.model,
                "usage": usage,
                "stopReason": stop,
                "timestamp": clk.ms(),
            }
            if step.aborted:
                msg["errorMessage"] = "Request was aborted."
            yield entry("message", message=msg)
            if rec is not None:
                rec.tokens += usage["totalTokens"]
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
            if step.aborted:
                for c, cid, name, args, _, par in flat:
                    if rec is not None:
                        rec.call(
                            call_id=cid,
                            tool=name,
                            args=args,
                            result=None,
                            is_error=None,
                            user_turn=ut,
                            parent_id=par,
                            step=step,
                            call=c,
                            tokens=usage["totalTokens"],
                        )
                continue
            results: list[bytes] = []
            # nested calls finish before the script that made them
            order = sorted(range(len(flat)), key=lambda i: (flat[i][5] is None, i))
            for i in order:
                c, cid, name, args, out_s, par = flat[i]
                clk.tick(c.secs)
                res: dict[str, Any] = {
                    "role": "toolResult",
                    "toolCallId": cid,
                    "toolName": name,
                    "content": [{"type": "text", "text": out_s}],
                    "isError": bool(c.code),
                    "timestamp": clk.ms(),
                }
                if name == "edit" and not c.code:
                    res["details"] = {
                        "diff": "\n".join(
                            [f"-{x}" for x in args["oldText"].split("\n")]
                            + [f"+{x}" for x in args["newText"].split("\n")]
                        )
                    }
                elif name == "bash":
                    res["details"] = {}
                results.append(entry("message", message=res))
                meter.add(out_s)
            yield from results
            if rec is not None:
                for c, cid, name, args, out_s, par in flat:
                    rec.call(
                        call_id=cid,
                        tool=name,
                        args=args,
                        result=out_s,
                        is_error=bool(c.code),
                        user_turn=ut,
                        parent_id=par,
                        step=step,
                        call=c,
                        tokens=usage["totalTokens"],
                    )


def render_claude(s: Session, rec: Recorder | None, subs: list[tuple[Session, Recorder | None]]) -> Iterator[bytes]:
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(15800 if not s.agent_id else 9200, ids.rng)
    side = bool(s.agent_id)
    session_id = s.parent.sid if (side and s.parent) else s.sid
    base: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": side,
        "userType": "external",
        "cwd": s.cwd,
        "sessionId": session_id,
        "version": s.version or "2.0.76",
        "gitBranch": s.branch,
    }
    if side:
        base["agentId"] = s.agent_id
    new_layout = (s.version or "2.0.76") >= "2.1"
    prev: str | None = None

    def line(kind: str, message: Any, uuid: str | None = None, **extra: Any) -> tuple[str, bytes]:
        nonlocal prev
        u = uuid or ids.uuid()
        d = {
            **base,
            "parentUuid": prev,
            **extra.pop("_env", {}),
            "type": kind,
            "message": message,
            "uuid": u,
            "timestamp": clk.iso(),
            **extra,
        }
        prev = u
        return u, dumps(d)

    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else min(turn.wait, 2.5))
        turn_start = clk.t
        if rec is not None:
            rec.user_turns += 1
        user_uuid = ids.uuid()
        if not side:
            yield dumps(
                {
                    "type": "file-history-snapshot",
                    "messageId": user_uuid,
                    "snapshot": {"messageId": user_uuid, "trackedFileBackups": {}, "timestamp": clk.iso()},
                    "isSnapshotUpdate": False,
                }
            )
        _, b = line("user", {"role": "user", "content": turn.prompt}, uuid=user_uuid)
        if rec is not None and not rec.first_ts:
            rec.first_ts = clk.iso()
        yield b
        meter.add(turn.prompt)
        interrupted = False
        for step in turn.steps:
            clk.tick(step.secs)
            msg_id, req_id = f"msg_01{ids.b62(22)}", f"req_011C{ids.b62(18)}"
            natives = []
            for c in step.calls:
                name, args, content, tur = claude_tool(c, s.cwd)
                natives.append((c, f"toolu_01{ids.b62(22)}", name, args, content, tur))
            blocks: list[dict[str, Any]] = []
            if step.thinking:
                blocks.append({"type": "thinking", "thinking": step.thinking, "signature": ids.b62(120)})
            if step.text:
                blocks.append({"type": "text", "text": step.text})
            for _c, tid, name, args, _, _ in natives:
                blocks.append({"type": "tool_use", "id": tid, "name": name, "input": args})
            out_text = step.text + "".join(json.dumps(n[3]) for n in natives)
            inp, out, cr, cw = meter.response(out_text, step.thinking)
            full = {
                "input_tokens": inp,
                "cache_creation_input_tokens": cw,
                "cache_read_input_tokens": cr,
                "cache_creation": {"ephemeral_5m_input_tokens": cw, "ephemeral_1h_input_tokens": 0},
                "output_tokens": out,
                "service_tier": "standard",
            }
            tool_line: dict[str, str] = {}
            # Claude Code writes every content block of one response as its own line; usage grows to the last one.
            for i, block in enumerate(blocks):
                last = i == len(blocks) - 1
                usage = full if last else {**full, "output_tokens": min(out, 1 + i)}
                message = {
                    "model": s.model,
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "content": [block],
                    "stop_reason": ("tool_use" if natives else "end_turn") if last else None,
                    "stop_sequence": None,
                    "usage": usage,
                }
                u, b = line("assistant", message, requestId=req_id)
                if block["type"] == "tool_use":
                    tool_line[block["id"]] = u
                clk.tick(0.05)
                yield b
            total = inp + out + cr + cw
            if rec is not None:
                rec.tokens += total
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
            for c, tid, name, args, content, tur in natives:
                clk.tick(c.secs)
                result: dict[str, Any] = {"tool_use_id": tid, "type": "tool_result", "content": content}
                if c.code or c.rejected:
                    result["is_error"] = True
                if c.op == "task" and c.sub is not None:
                    sub = c.sub
                    sub.agent_id = sub.agent_id or ids.hexs(7)
                    sub.parent = s
                    sub_rec = Recorder() if rec is not None else None
                    subs.append((sub, sub_rec))
                    result["content"] = [
                        {"type": "text", "text": c.out},
                        {
                            "type": "text",
                            "text": f"agentId: {sub.agent_id} (for resuming to continue this agent's work if needed)",
                        },
                    ]
                    tur = {
                        "status": "completed",
                        "prompt": args["prompt"],
                        "agentId": sub.agent_id,
                        "content": [{"type": "text", "text": c.out}],
                        "totalDurationMs": int(c.secs * 1000),
                        "totalTokens": 41000 + len(c.out),
                        "totalToolUseCount": sum(len(st.calls) for t in sub.turns for st in t.steps),
                    }
                env = {"_env": {"parentUuid": tool_line[tid]}} if tid in tool_line else {}
                extra: dict[str, Any] = {"toolUseResult": tur}
                if new_layout:
                    extra["sourceToolAssistantUUID"] = tool_line.get(tid)
                _, b = line("user", {"role": "user", "content": [result]}, **env, **extra)
                yield b
                meter.add(content if isinstance(content, str) else c.out)
                if rec is not None:
                    rec.call(
                        call_id=tid,
                        tool=name,
                        args=args,
                        result=content if isinstance(content, str) else c.out,
                        is_error=bool(c.code or c.rejected),
                        user_turn=ut,
                        parent_id=None,
                        step=step,
                        call=c,
                        tokens=total,
                    )
                if c.rejected:
                    interrupted = True
            if interrupted:
                _, b = line(
                    "user",
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}],
                    },
                )
                yield b
                break
        if new_layout and not side and not interrupted:
            u = ids.uuid()
            yield dumps(
                {
                    **base,
                    "parentUuid": prev,
                    "type": "system",
                    "subtype": "turn_duration",
                    "durationMs": int((clk.t - turn_start).total_seconds() * 1000),
                    "isMeta": False,
                    "timestamp": clk.iso(),
                    "uuid": u,
                }
            )
            prev = u


def render_codex(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(9400, ids.rng)

    def item(kind: str, payload: dict[str, Any]) -> bytes:
        return dumps({"timestamp": clk.iso(), "type": kind, "payload": payload})

    repo = s.cwd.rstrip("/").rsplit("/", 1)[-1]
    if rec is not None:
        rec.first_ts = clk.iso()
    yield item(
        "session_meta",
        {
            "id": s.sid,
            "timestamp": clk.iso(),
            "cwd": s.cwd,
            "originator": "codex_cli_rs",
            "cli_version": s.version or "0.58.0",
            "instructions": None,
            "source": "cli",
            "model_provider": "openai",
            "git": {
                "commit_hash": ids.hexs(40),
                "branch": s.branch,
                "repository_url": f"git@github.com:dana/{repo}.git",
            },
        },
    )
    env = (
        f"<environment_context>\n  <cwd>{s.cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
        f"  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
        f"  <shell>bash</shell>\n</environment_context>"
    )
    yield item("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]})
    meter.add(env)
    limits_used = 3.0
    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else min(turn.wait, 2.5))
        turn_id = ids.uuid()
        if rec is not None:
            rec.user_turns += 1
        yield item("event_msg", {"type": "task_started", "turn_id": turn_id, "model_context_window": 272000})
        yield item(
            "turn_context",
            {
                "turn_id": turn_id,
                "cwd": s.cwd,
                "approval_policy": "on-request",
                "sandbox_policy": {
                    "type": "workspace-write",
                    "network_access": False,
                    "exclude_tmpdir_env_var": False,
                    "exclude_slash_tmp": False,
                },
                "model": s.model,
                "effort": "medium",
                "summary": "auto",
            },
        )
        yield item(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": turn.prompt}]},
        )
        yield item("event_msg", {"type": "user_message", "message": turn.prompt, "images": []})
        meter.add(turn.prompt)
        last_text = ""
        for step in turn.steps:
            clk.tick(step.secs)
            if step.thinking:
                yield item(
                    "response_item",
                    {
                        "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": step.thinking}],
                        "content": None,
                        "encrypted_content": "gAAAAB" + ids.b62(160),
                    },
                )
                yield item("event_msg", {"type": "agent_reasoning", "text": step.thinking})
            if step.text:
                last_text = step.text
                yield item("event_msg", {"type": "agent_message", "message": step.text})
                yield item(
                    "response_item",
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": step.text}]},
                )
            natives = []
            for c in step.calls:
                kind, name, args, out, _ = codex_tool(c, s, ids)
                cid = f"call_{ids.b62(24)}"
                natives.append((c, cid, kind, name, args, out))
                if kind == "custom_tool_call":
                    yield item(
                        "response_item",
                        {"type": kind, "status": "completed", "call_id": cid, "name": name, "input": args},
                    )
                else:
                    yield item("response_item", {"type": kind, "name": name, "arguments": args, "call_id": cid})
            last = meter.openai_response(step.text + "".join(n[4] for n in natives), step.thinking)
            limits_used = min(99.0, limits_used + last["total_tokens"] / 400000)
            yield item(
                "event_msg",
                {
                    "type": "token_count",
                    "info": {
                        "total_token_usage": dict(meter.cum),
                        "last_token_usage": last,
                        "model_context_window": 272000,
                    },
                    "rate_limits": {
                        "primary": {
                            "used_percent": round(limits_used, 1),
                            "window_minutes": 300,
                            "resets_in_seconds": 9000,
                        },
                        "secondary": {
                            "used_percent": round(limits_used / 6, 1),
                            "window_minutes": 10080,
                            "resets_in_seconds": 431000,
                        },
                    },
                },
            )
            if rec is not None:
                rec.tokens += last["total_tokens"]
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
            for c, cid, kind, name, args, out in natives:
                clk.tick(c.secs)
                if kind == "custom_tool_call":
                    yield item(
                        "event_msg",
                        {
                            "type": "patch_apply_end",
                            "call_id": cid,
                            "stdout": json.loads(out)["output"] if not c.code else "",
                            "stderr": json.loads(out)["output"] if c.code else "",
                            "success": not c.code,
                        },
                    )
                    yield item("response_item", {"type": "custom_tool_call_output", "call_id": cid, "output": out})
                else:
                    yield item("response_item", {"type": "function_call_output", "call_id": cid, "output": out})
                meter.add(out)
                if rec is not None:
                    shown = args if kind == "custom_tool_call" else json.loads(args)
                    rec.call(
                        call_id=cid,
                        tool=name,
                        args=shown,
                        result=out,
                        is_error=bool(c.code),
                        user_turn=ut,
                        parent_id=None,
                        step=step,
                        call=c,
                        tokens=last["total_tokens"],
                    )
        yield item("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": last_text})


def render_openai(s: Session, rec: Recorder | None) -> bytes:
    ids = Ids(s.seed)
    if rec is not None:
        rec.first_ts = Clock(s.start).iso()
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": s.title or "You are a coding assistant. Use the tools to inspect and change the repository.",
        }
    ]
    used: dict[str, None] = {}
    for ut, turn in enumerate(s.turns):
        if rec is not None:
            rec.user_turns += 1
        messages.append({"role": "user", "content": turn.prompt})
        for step in turn.steps:
            natives = []
            for c in step.calls:
                name, args, out = openai_tool(c)
                used[name] = None
                natives.append((c, f"call_{ids.b62(24)}", name, args, out))
            msg: dict[str, Any] = {"role": "assistant", "content": step.text or None}
            if natives:
                msg["tool_calls"] = [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                    for _, cid, name, args, _ in natives
                ]
            messages.append(msg)
            if rec is not None and step.text:
                rec.texts.append(TextRec(ut, step.text, step))
            for c, cid, name, args, out in natives:
                messages.append({"role": "tool", "tool_call_id": cid, "name": name, "content": out})
                if rec is not None:
                    rec.call(
                        call_id=cid,
                        tool=name,
                        args=args,
                        result=out,
                        is_error=None,
                        user_turn=ut,
                        parent_id=None,
                        step=step,
                        call=c,
                        tokens=0,
                    )
    tools = []
    for name in used:
        desc, params = OPENAI_TOOLS.get(name, (f"{name} tool", {}))
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": desc,
                    "parameters": {
                        "type": "object",
                        "properties": {k: {"type": v} for k, v in params.items()},
                        "required": list(params),
                    },
                },
            }
        )
    return dumps(
        {
            "id": s.sid,
            "model": s.model,
            "created_at": Clock(s.start).iso(),
            "messages": messages,
            "tools": tools,
            "metadata": {"project": s.cwd, "source": "agent-eval"},
        }
    )


# --------------------------------------------------------------------------------------------------------------------
# The benchmark / harness formats: SWE-agent, mini-swe-agent, OpenHands, Inspect, Gemini CLI, opencode
# --------------------------------------------------------------------------------------------------------------------
# One call per step (API response) in these renderers, as those agents mostly do. Each reports to the Recorder the
# tool and arguments exactly as its loopscope adapter reads them (``analyzer/ingest/formats/<format>.py``), so the
# loop checks run on what a scan sees. None of them records usage per call in SWE-agent and mini-swe-agent (run
# totals only): the calls' tokens are 0 there.

SWE_ERR_RE = _re.compile(
    r"^(ERROR|Error:|No replacement was performed|Invalid|usage:|Traceback|"
    r"The path .* does not exist|bash: .*(command not found|No such file))",
    _re.M,
)
SWE_EXIT = ("submit", "exit_forfeit", "exit_cost", "exit_context", "exit_error", "exit_format")
OH_NOISE = frozenset(
    {
        "thought",
        "impl_source",
        "translated_ipython_code",
        "confirmation_state",
        "security_risk",
        "is_confirmed",
        "kernel_init_code",
        "hidden",
        "wait_for_response",
        "image_urls",
        "images_urls",
        "keep_prompt",
    }
)


def _one_call(step: Step, fmt: str) -> Call | None:
    if len(step.calls) > 1:
        raise ValueError(f"{fmt} renders one call per step")
    if step.aborted:
        raise ValueError(f"{fmt} has no aborted steps")
    return step.calls[0] if step.calls else None


def _tab_numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(text.split("\n"), start))


def _iso_us(clk: Clock) -> str:
    return clk.t.strftime("%Y-%m-%dT%H:%M:%S.%f")


def _iso_tz(clk: Clock) -> str:
    return clk.t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"


# -- SWE-agent -----------------------------------------------------------------------------------------------------


def swe_action(c: Call, cwd: str) -> tuple[str, str, dict[str, Any], str]:
    """(action line, tool, args as the adapter parses them, observation)."""
    a = c.args
    if c.op == "sh":
        return a["cmd"], "bash", {"command": a["cmd"]}, c.out
    if c.op == "read":
        path = _abs(cwd, a["path"])
        obs = (
            f"The path {path} does not exist. Please provide a valid path."
            if c.code
            else f"Here's the result of running `cat -n` on {path}:\n{_tab_numbered(c.out)}"
        )
        return f"str_replace_editor view {path}", "str_replace_editor", {"command": "view", "path": path}, obs
    if c.op == "edit":
        path = _abs(cwd, a["path"])
        line = (
            f"str_replace_editor str_replace {path} --old_str {_shlex.quote(a['old'])} "
            f"--new_str {_shlex.quote(a['new'])}"
        )
        args = {"command": "str_replace", "path": path, "old_str": a["old"], "new_str": a["new"]}
        obs = (
            f"No replacement was performed, old_str `{a['old']}` did not appear verbatim in {path}."
            if c.code
            else f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
            f"{_tab_numbered(a['new'], a.get('line', 1))}\nReview the changes and make sure they are as expected. "
            "Edit the file again if necessary."
        )
        return line, "str_replace_editor", args, obs
    if c.op == "tool" and a["name"] in SWE_EXIT:
        arg = a["arguments"].get("flag")
        return a["name"] + (f" {_shlex.quote(arg)}" if arg else ""), a["name"], {}, c.out
    raise ValueError(f"SWE-agent cannot render op {c.op}")


def render_swe_agent(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    """A SWE-agent / EnIGMA ``.traj``: ``trajectory`` steps, the ``history`` sent to the model, ``info``."""
    clk = Clock(s.start)
    meter = Meter(6100, Ids(s.seed).rng)
    cwd = s.cwd
    turns = list(s.turns)
    if len(turns) != 1:
        raise ValueError("a SWE-agent run has one task")
    system = (
        s.title
        or "SETTING: You are an autonomous programmer, and you're working directly in the command line "
        "with a special interface."
    )
    history: list[dict[str, Any]] = [
        {"role": "system", "content": system, "agent": "primary", "message_type": "system_prompt"},
        {"role": "user", "content": turns[0].prompt, "agent": "primary", "message_type": "observation"},
    ]
    meter.add(system + turns[0].prompt)
    if rec is not None:
        rec.user_turns = 1
        rec.first_ts = clk.iso()
    traj: list[dict[str, Any]] = []
    sent = received = calls = 0
    open_file = "n/a"
    for step in turns[0].steps:
        clk.tick(step.secs)
        c = _one_call(step, "SWE-agent")
        if c is None:
            continue  # SWE-agent's steps always act; the closing summary lives in `info`
        action, tool, args, obs = swe_action(c, cwd)
        response = f"{step.text}\n\n```\n{action}\n```" if step.text else f"```\n{action}\n```"
        u = meter.openai_response(response)
        sent += u["input_tokens"]
        received += u["output_tokens"]
        calls += 1
        clk.tick(c.secs)
        if tool == "str_replace_editor":
            open_file = args["path"]
        traj.append(
            {
                "action": action + "\n",
                "observation": obs,
                "response": response,
                "state": json.dumps({"open_file": open_file, "working_dir": cwd}),
                "thought": step.text,
                "execution_time": round(c.secs, 3),
            }
        )
        history.append(
            {
                "role": "assistant",
                "content": response,
                "thought": step.text,
                "action": action + "\n",
                "agent": "primary",
                "message_type": "action",
            }
        )
        history.append({"role": "user", "content": obs, "agent": "primary", "message_type": "observation"})
        meter.add(obs)
        if rec is not None:
            rec.call(
                call_id=f"s{len(traj) - 1}",
                tool=tool,
                args=args,
                result=obs,
                is_error=bool(SWE_ERR_RE.search(obs[:400])),
                user_turn=0,
                parent_id=None,
                step=step,
                call=c,
                tokens=0,
            )
            if step.text:
                rec.texts.append(TextRec(0, step.text, step))
    last = traj[-1]["action"].split(None, 1)[0] if traj else ""
    status = "submitted" if last == "submit" else (last or "exit_error")
    cost = round(sent * 2.5 / 1e6 + received * 10.0 / 1e6, 5)
    info = {
        "swe_agent_version": s.version or "0.7.0",
        "exit_status": status,
        "submission": s.branch if status == "submitted" else None,
        "model_stats": {
            "total_cost": cost,
            "instance_cost": cost,
            "tokens_sent": sent,
            "tokens_received": received,
            "api_calls": calls,
        },
    }
    replay = {"agent": {"model": {"name": s.model, "per_instance_cost_limit": 3.0, "temperature": 0.0}}}
    doc = {
        "environment": "swe_main",
        "trajectory": traj,
        "history": history,
        "info": info,
        "replay_config": json.dumps(replay),
    }
    yield (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


# -- mini-swe-agent ------------------------------------------------------------------------------------------------

MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def render_mini_swe_agent(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    """A mini-swe-agent v1 ``*.traj.json``: text protocol (THOUGHT + one ```bash block), ``<returncode>`` replies."""
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(1900, ids.rng)
    turns = list(s.turns)
    if len(turns) != 1:
        raise ValueError("a mini-swe-agent run has one task")
    system = (
        "You are a helpful assistant that can interact multiple times with a computer shell to solve programming "
        "tasks.\nYour response must contain exactly ONE bash code block with ONE command (or commands connected "
        "with && or ||).\n\nInclude a THOUGHT section before your command where you explain your reasoning "
        "process."
    )
    task = (
        f"<pr_description>\nConsider the following PR description:\n{turns[0].prompt}\n</pr_description>\n\n"
        "<instructions>\n# Task Instructions\n\nYou're a software engineer interacting continuously with a "
        "computer by submitting commands.\nWhen you are done, submit with `echo "
        "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached`.\n</instructions>"
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    meter.add(system + task)
    if rec is not None:
        rec.user_turns = 1
        rec.first_ts = clk.iso()
    cost, calls, submission = 0.0, 0, ""
    for step in turns[0].steps:
        clk.tick(step.secs)
        c = _one_call(step, "mini-swe-agent")
        if c is None:
            continue
        if c.op != "sh":
            raise ValueError("mini-swe-agent only runs bash")
        cmd = c.args["cmd"]
        content = f"THOUGHT: {step.text}\n\n```bash\n{cmd}\n```"
        u = meter.openai_response(content)
        cost += u["input_tokens"] * 1.25 / 1e6 + u["output_tokens"] * 10.0 / 1e6
        calls += 1
        created = int(clk.t.timestamp())
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "extra": {
                    "response": {
                        "id": f"chatcmpl-{ids.b62(29)}",
                        "object": "chat.completion",
                        "created": created,
                        "model": s.model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": {
                            "prompt_tokens": u["input_tokens"],
                            "completion_tokens": u["output_tokens"],
                            "total_tokens": u["total_tokens"],
                            "prompt_tokens_details": {"cached_tokens": u["cached_input_tokens"]},
                        },
                    }
                },
            }
        )
        clk.tick(c.secs)
        if cmd == MINI_SUBMIT:
            obs = submission = c.out
        else:
            obs = (
                f"<returncode>{c.code}</returncode>\n<output>\n{c.out}\n</output>"
                if c.out
                else f"<returncode>{c.code}</returncode>\n<output>\n</output>"
            )
        messages.append({"role": "user", "content": obs})
        meter.add(obs)
        if rec is not None:
            rec.call(
                call_id=f"m{len(messages) - 2}",
                tool="bash",
                args={"command": cmd},
                result=obs,
                is_error=bool(c.code) and cmd != MINI_SUBMIT,
                user_turn=0,
                parent_id=None,
                step=step,
                call=c,
                tokens=0,
            )
            rec.texts.append(TextRec(0, content, step))
    info = {
        "exit_status": "Submitted" if submission else "LimitsExceeded",
        "submission": submission,
        "model_stats": {"instance_cost": round(cost, 6), "api_calls": calls},
        "mini_version": s.version or "1.15.0",
        "config": {
            "agent": {"step_limit": 250, "cost_limit": 3.0},
            "model": {"model_name": s.model, "model_kwargs": {"temperature": 0.0}},
            "environment": {"cwd": s.cwd, "timeout": 60, "executable": "docker"},
            "agent_type": "minisweagent.run.extra.swebench.ProgressTrackingAgent",
        },
    }
    doc = {"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1", "instance_id": s.sid}
    yield (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


# -- OpenHands -----------------------------------------------------------------------------------------------------


def oh_action(c: Call, cwd: str) -> tuple[str, str, dict[str, Any], str, str, dict[str, Any], str]:
    """(action, function name, args, tool-call arguments JSON, observation text, observation extras, message)."""
    a = c.args
    if c.op == "sh":
        args = {
            "command": a["cmd"],
            "is_input": False,
            "thought": "",
            "blocking": False,
            "is_static": False,
            "cwd": None,
            "hidden": False,
            "confirmation_state": "confirmed",
            "security_risk": -1,
        }
        extras = {
            "command": a["cmd"],
            "metadata": {
                "exit_code": c.code,
                "pid": -1,
                "username": "openhands",
                "hostname": "runtime-7c2f9d",
                "working_dir": cwd,
                "py_interpreter_path": "/openhands/poetry/openhands-ai-5O4_aCHf-py3.12/bin/python",
                "prefix": "",
                "suffix": f"\n[The command completed with exit code {c.code}.]",
            },
            "hidden": False,
        }
        return (
            "run",
            "execute_bash",
            args,
            json.dumps({"command": a["cmd"]}),
            c.out,
            extras,
            f"Running command: {a['cmd']}",
        )
    path = _abs(cwd, a.get("path", ""))
    if c.op == "read":
        args = {"path": path, "start": 0, "end": -1, "thought": "", "impl_source": "oh_aci", "view_range": None}
        text = (
            f"ERROR:\nInvalid `path` parameter: {path}. The path {path} does not exist. Please provide a valid path."
            if c.code
            else f"Here's the result of running `cat -n` on {path}:\n{_tab_numbered(c.out)}\n"
        )
        return (
            "read",
            "str_replace_editor",
            args,
            json.dumps({"command": "view", "path": path}),
            text,
            {"path": path, "impl_source": "oh_aci"},
            f"Reading file: {path}",
        )
    if c.op == "edit":
        args = {
            "path": path,
            "command": "str_replace",
            "file_text": None,
            "old_str": a["old"],
            "new_str": a["new"],
            "insert_line": None,
            "content": "",
            "start": 1,
            "end": -1,
            "thought": "",
            "impl_source": "oh_aci",
        }
        call_args = json.dumps({"command": "str_replace", "path": path, "old_str": a["old"], "new_str": a["new"]})
        if c.code:
            text = f"ERROR:\nNo replacement was performed, old_str `{a['old']}` did not appear verbatim in {path}."
            extras = {
                "path": path,
                "prev_exist": False,
                "old_content": None,
                "new_content": None,
                "impl_source": "oh_aci",
                "diff": "",
                "_diff_cache": None,
            }
        else:
            text = (
                f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of "
                f"{path}:\n{_tab_numbered(a['new'], a.get('line', 1))}\nReview the changes and make sure they "
                "are as expected. Edit the file again if necessary."
            )
            diff = "\n".join(
                [f"--- {path}", f"+++ {path}", "@@"]
                + [f"-{x}" for x in a["old"].split("\n")]
                + [f"+{x}" for x in a["new"].split("\n")]
            )
            extras = {
                "path": path,
                "prev_exist": False,
                "old_content": a["old"],
                "new_content": a["new"],
                "impl_source": "oh_aci",
                "diff": diff,
                "_diff_cache": None,
            }
        return "edit", "str_replace_editor", args, call_args, text, extras, f"Editing file: {path}"
    raise ValueError(f"OpenHands cannot render op {c.op}")


def render_openhands(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    """A saved OpenHands V0 trajectory: one JSON array of events (``save_trajectory_path``)."""
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(7400, ids.rng)
    events: list[dict[str, Any]] = []

    def ev(**kw: Any) -> dict[str, Any]:
        e = {"id": len(events), "timestamp": _iso_us(clk), **kw}
        events.append(e)
        return e

    if rec is not None:
        rec.first_ts = clk.iso()
    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else 0.0)
        if rec is not None:
            rec.user_turns += 1
        ev(
            source="user",
            message=turn.prompt,
            action="message",
            args={"content": turn.prompt, "image_urls": None, "wait_for_response": False},
        )
        meter.add(turn.prompt)
        for step in turn.steps:
            clk.tick(step.secs)
            c = _one_call(step, "OpenHands")
            u = meter.openai_response(step.text + (json.dumps(c.args) if c else ""))
            usage = {
                "completion_tokens": u["output_tokens"],
                "prompt_tokens": u["input_tokens"],
                "total_tokens": u["total_tokens"],
                "completion_tokens_details": None,
                "prompt_tokens_details": {"audio_tokens": None, "cached_tokens": u["cached_input_tokens"]},
            }
            if c is None:
                ev(
                    source="agent",
                    message=step.text,
                    action="message",
                    args={"content": step.text, "image_urls": None, "wait_for_response": True},
                )
                if rec is not None and step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
                continue
            action, fn, args, call_args, text, extras, message = oh_action(c, s.cwd)
            args["thought"] = step.text
            tcid = f"toolu_01{ids.b62(22)}"
            tcm = {
                "function_name": fn,
                "tool_call_id": tcid,
                "model_response": {
                    "id": f"chatcmpl-{ids.uuid()}",
                    "created": int(clk.t.timestamp()),
                    "model": s.model,
                    "object": "chat.completion",
                    "system_fingerprint": None,
                    "choices": [
                        {
                            "finish_reason": "tool_calls",
                            "index": 0,
                            "message": {
                                "content": step.text,
                                "role": "assistant",
                                "tool_calls": [
                                    {
                                        "index": 1,
                                        "function": {"arguments": call_args, "name": fn},
                                        "id": tcid,
                                        "type": "function",
                                    }
                                ],
                                "function_call": None,
                            },
                        }
                    ],
                    "usage": usage,
                },
                "total_calls_in_response": 1,
            }
            act = ev(source="agent", message=message, action=action, tool_call_metadata=tcm, args=args)
            clk.tick(c.secs)
            obs: dict[str, Any] = {
                "source": "agent",
                "message": message,
                "cause": act["id"],
                "observation": action,
                "tool_call_metadata": tcm,
                "content": text,
                "extras": extras,
            }
            if action == "run":
                obs["success"] = c.code == 0
            ev(**obs)
            meter.add(text)
            if rec is not None:
                rec.call(
                    call_id=f"e{act['id']}",
                    tool=action,
                    args={k: v for k, v in args.items() if k not in OH_NOISE},
                    result=text,
                    is_error=bool(c.code),
                    user_turn=ut,
                    parent_id=None,
                    step=step,
                    call=c,
                    tokens=u["total_tokens"],
                )
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
    yield (json.dumps(events, indent=2, ensure_ascii=False) + "\n").encode()


# -- Inspect -------------------------------------------------------------------------------------------------------

_B57 = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _shortuuid(ids: Ids) -> str:
    return "".join(_B57[ids.rng.getrandbits(6) % 57] for _ in range(22))


def inspect_tool(c: Call) -> tuple[str, dict[str, Any], str]:
    if c.op == "sh":
        return "bash", {"cmd": c.args["cmd"]}, c.out
    if c.op == "tool":
        return c.args["name"], c.args["arguments"], c.out
    raise ValueError(f"Inspect cannot render op {c.op}")


def render_inspect_sample(s: Session, rec: Recorder | None, sample_id: str, epoch: int = 1) -> dict[str, Any]:
    """One sample of an Inspect eval log (``samples/<id>_epoch_<n>.json`` of a ``.eval``): final ``messages``, the
    ``model`` and ``tool`` events, ``model_usage``. ``s.sid`` is the sample's uuid (the session id)."""
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(1300, ids.rng)
    turns = list(s.turns)
    started = _iso_tz(clk)
    system = s.title or "You are a helpful assistant attempting to submit the correct answer."
    messages: list[dict[str, Any]] = [
        {"id": _shortuuid(ids), "content": system, "source": "input", "role": "system"},
        {"id": _shortuuid(ids), "content": turns[0].prompt, "source": "input", "role": "user"},
    ]
    meter.add(system + turns[0].prompt)
    events: list[dict[str, Any]] = [
        {
            "timestamp": started,
            "working_start": 0.0,
            "event": "sample_init",
            "sample": {"input": turns[0].prompt, "id": sample_id, "target": ""},
            "state": {},
        }
    ]
    t0 = clk.t
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "input_tokens_cache_read": 0}
    if rec is not None:
        rec.user_turns = 1
        rec.first_ts = clk.iso()
    answer = ""
    for step in turns[0].steps:
        clk.tick(step.secs)
        c = _one_call(step, "Inspect")
        mid = _shortuuid(ids)
        msg: dict[str, Any] = {
            "id": mid,
            "content": step.text,
            "source": "generate",
            "role": "assistant",
            "model": s.model,
        }
        native = None
        if c is not None:
            name, args, out = inspect_tool(c)
            tcid = f"call_{ids.b62(24)}"
            tc: dict[str, Any] = {"id": tcid, "function": name, "arguments": args}
            if name == "bash":
                tc["view"] = {"title": "bash", "format": "markdown", "content": f"```bash\n{args['cmd']}\n```\n"}
            msg["tool_calls"] = [{**tc, "type": "function"}]
            native = (c, tcid, name, args, out)
        else:
            answer = step.text
        u = meter.openai_response(step.text + (json.dumps(native[3]) if native else ""))
        usage = {
            "input_tokens": u["input_tokens"] - u["cached_input_tokens"],
            "output_tokens": u["output_tokens"],
            "total_tokens": u["total_tokens"],
            "input_tokens_cache_read": u["cached_input_tokens"],
            "reasoning_tokens": 0,
        }
        for k in total:
            total[k] += usage[k]
        events.append(
            {
                "timestamp": _iso_tz(clk),
                "working_start": round((clk.t - t0).total_seconds(), 3),
                "event": "model",
                "model": f"openai/{s.model}",
                "input": [],
                "tools": [],
                "tool_choice": "auto",
                "config": {},
                "output": {
                    "model": s.model,
                    "choices": [{"message": msg, "stop_reason": "tool_calls" if native else "stop"}],
                    "usage": usage,
                    "time": round(step.secs, 3),
                },
            }
        )
        messages.append(msg)
        if rec is not None and step.text:
            rec.texts.append(TextRec(0, step.text, step))
        if native is None:
            continue
        c, tcid, name, args, out = native
        start = _iso_tz(clk)
        ws = round((clk.t - t0).total_seconds(), 3)
        clk.tick(c.secs)
        events.append(
            {
                "timestamp": start,
                "working_start": ws,
                "event": "tool",
                "type": "function",
                "id": tcid,
                "function": name,
                "arguments": args,
                "result": out,
                "truncated": None,
                "error": None,
                "events": [],
                "completed": _iso_tz(clk),
                "working_time": round(c.secs, 3),
            }
        )
        messages.append(
            {
                "id": _shortuuid(ids),
                "content": out,
                "role": "tool",
                "tool_call_id": tcid,
                "function": name,
                "error": None,
            }
        )
        meter.add(out)
        if rec is not None:
            rec.call(
                call_id=tcid,
                tool=name,
                args=args,
                result=out,
                is_error=False,
                user_turn=0,
                parent_id=None,
                step=step,
                call=c,
                tokens=u["total_tokens"],
            )
    secs = round((clk.t - t0).total_seconds(), 3)
    return {
        "id": sample_id,
        "epoch": epoch,
        "input": turns[0].prompt,
        "target": s.branch,
        "messages": messages,
        "output": {
            "model": s.model,
            "choices": [{"message": messages[-1], "stop_reason": "stop"}],
            "usage": usage,
            "time": round(turns[0].steps[-1].secs, 3),
        },
        "scores": {
            "includes": {
                "value": "C" if s.branch and s.branch in answer else "I",
                "answer": answer,
                "explanation": answer,
            }
        },
        "metadata": {},
        "store": {},
        "events": events,
        "model_usage": {f"openai/{s.model}": total},
        "started_at": started,
        "completed_at": _iso_tz(clk),
        "total_time": secs,
        "working_time": secs,
        "uuid": s.sid,
        "error_retries": [],
        "attachments": {},
    }


def inspect_eval_zip(
    task: str, run_seed: int, created: datetime, samples: list[tuple[Session, dict[str, Any]]]
) -> bytes:
    """A ``.eval`` log: ``header.json``, ``samples/<id>_epoch_<n>.json``, ``summaries.json``, ``reductions.json`` and
    ``_journal/start.json``, deflated (not zstd) with fixed member times, so the bytes are reproducible."""
    import io

    ids = Ids(run_seed)
    model = f"openai/{samples[0][0].model}"
    spec = {
        "eval_id": _shortuuid(ids),
        "run_id": _shortuuid(ids),
        "created": created.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        "task": task,
        "task_id": _shortuuid(ids),
        "task_version": 0,
        "task_file": f"{task}.py",
        "task_attribs": {},
        "task_args": {},
        "dataset": {
            "name": task,
            "location": f"{task}.jsonl",
            "samples": len(samples),
            "sample_ids": [sd["id"] for _, sd in samples],
            "shuffled": False,
        },
        "model": model,
        "model_generate_config": {},
        "model_args": {},
        "config": {
            "epochs": 1,
            "epochs_reducer": ["mean"],
            "fail_on_error": True,
            "sandbox_cleanup": True,
            "log_samples": True,
            "log_images": True,
            "score_display": True,
        },
        "packages": {"inspect_ai": "0.3.137"},
        "scorers": [
            {
                "name": "includes",
                "options": {},
                "metrics": [{"name": "inspect_ai/accuracy", "options": {}}],
                "metadata": {},
            }
        ],
    }
    plan = {
        "name": "plan",
        "steps": [
            {
                "solver": "basic_agent",
                "params": {"tools": [{"type": "tool", "name": "bash", "params": {"timeout": 180}}]},
            }
        ],
        "config": {},
    }
    correct = sum(sd["scores"]["includes"]["value"] == "C" for _, sd in samples)
    usage: dict[str, int] = {}
    for _, sd in samples:
        for k, v in sd["model_usage"][model].items():
            usage[k] = usage.get(k, 0) + v
    header = {
        "version": 2,
        "status": "success",
        "eval": spec,
        "plan": plan,
        "results": {
            "total_samples": len(samples),
            "completed_samples": len(samples),
            "scores": [
                {
                    "name": "includes",
                    "scorer": "includes",
                    "params": {},
                    "metrics": {"accuracy": {"name": "accuracy", "value": correct / len(samples), "params": {}}},
                }
            ],
        },
        "stats": {
            "started_at": samples[0][1]["started_at"],
            "completed_at": samples[-1][1]["completed_at"],
            "model_usage": {model: usage},
        },
    }
    summaries = [
        {
            "id": sd["id"],
            "epoch": sd["epoch"],
            "input": sd["input"],
            "target": sd["target"],
            "scores": sd["scores"],
            "model_usage": sd["model_usage"],
            "uuid": sd["uuid"],
            "retries": 0,
            "completed": True,
        }
        for _, sd in samples
    ]
    members = [("_journal/start.json", {"version": 2, "eval": spec, "plan": plan})]
    members += [(f"samples/{sd['id']}_epoch_{sd['epoch']}.json", sd) for _, sd in samples]
    members += [
        (
            "reductions.json",
            [
                {
                    "scorer": "includes",
                    "samples": [
                        {"value": 1.0 if sd["scores"]["includes"]["value"] == "C" else 0.0, "sample_id": sd["id"]}
                        for _, sd in samples
                    ],
                }
            ],
        ),
        ("summaries.json", summaries),
        ("header.json", header),
    ]
    buf = io.BytesIO()
    stamp = created.timetuple()[:6]
    with _zipfile.ZipFile(buf, "w") as z:
        for name, value in members:
            info = _zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = _zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return buf.getvalue()


# -- Gemini CLI ----------------------------------------------------------------------------------------------------


def gemini_tool(c: Call, cwd: str) -> tuple[str, dict[str, Any], str, str, str]:
    """(tool, args, output as the model sees it, display name, description)."""
    a = c.args
    if c.op == "sh":
        out = (
            f"Command: {a['cmd']}\nDirectory: (root)\nOutput: {c.out or '(empty)'}\nError: (none)\n"
            f"Exit Code: {c.code if c.code else '(none)'}\nSignal: (none)\nBackground PIDs: (none)\n"
            f"Process Group PGID: {a.get('pgid', 48211)}"
        )
        return (
            "run_shell_command",
            {"command": a["cmd"], "description": a.get("desc", "Run command")},
            out,
            "Shell",
            f"{a['cmd']} [in {cwd}] ({a.get('desc', 'Run command')})",
        )
    if c.op == "read":
        path = _abs(cwd, a["path"])
        return "read_file", {"absolute_path": path}, c.out, "ReadFile", a["path"]
    if c.op == "edit":
        path = _abs(cwd, a["path"])
        out = (
            f"Failed to edit, 0 occurrences found for old_string in {path}. No edits made."
            if c.code
            else f"Successfully modified file: {path} (1 replacements)."
        )
        return "replace", {"file_path": path, "old_string": a["old"], "new_string": a["new"]}, out, "Edit", a["path"]
    if c.op == "write":
        path = _abs(cwd, a["path"])
        return (
            "write_file",
            {"file_path": path, "content": a["content"]},
            f"Successfully created and wrote to new file: {path}.",
            "WriteFile",
            f"Writing to {a['path']}",
        )
    if c.op == "grep":
        out = c.out or f'No matches found for pattern "{a["pattern"]}" in path "{a.get("path", ".")}".'
        return (
            "search_file_content",
            {"pattern": a["pattern"], "path": a.get("path", ".")},
            out,
            "SearchText",
            f"'{a['pattern']}' within {a.get('path', '.')}",
        )
    raise ValueError(f"Gemini CLI cannot render op {c.op}")


def render_gemini(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    """A Gemini CLI chat ``session-<start>-<sid8>.json`` (a ConversationRecord, rewritten whole by the CLI)."""
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(8900, ids.rng)
    start = clk.iso()
    messages: list[dict[str, Any]] = []
    if rec is not None:
        rec.first_ts = start
    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else 0.0)
        if rec is not None:
            rec.user_turns += 1
        messages.append({"id": ids.uuid(), "timestamp": clk.iso(), "type": "user", "content": turn.prompt})
        meter.add(turn.prompt)
        for step in turn.steps:
            clk.tick(step.secs)
            c = _one_call(step, "Gemini CLI")
            native = gemini_tool(c, s.cwd) if c is not None else None
            u = meter.openai_response(step.text + (json.dumps(native[1]) if native else ""), step.thinking)
            tokens = {
                "input": u["input_tokens"],
                "output": u["output_tokens"] - u["reasoning_output_tokens"],
                "cached": u["cached_input_tokens"],
                "thoughts": u["reasoning_output_tokens"],
                "tool": 0,
                "total": u["total_tokens"],
            }
            msg: dict[str, Any] = {"id": ids.uuid(), "timestamp": clk.iso(), "type": "gemini", "content": step.text}
            if step.thinking:
                subject, _, desc = step.thinking.partition(": ")
                msg["thoughts"] = [{"subject": subject, "description": desc, "timestamp": clk.iso()}]
            msg["tokens"] = tokens
            msg["model"] = s.model
            if native is not None and c is not None:
                name, args, out, display, desc = native
                tcid = f"{name}-{clk.ms()}-{ids.hexs(13)}"
                clk.tick(c.secs)
                failed = c.code and c.op != "sh"
                resp = {"error": out} if failed else {"output": out}
                msg["toolCalls"] = [
                    {
                        "id": tcid,
                        "name": name,
                        "args": args,
                        "result": [{"functionResponse": {"id": tcid, "name": name, "response": resp}}],
                        "status": "error" if failed else "success",
                        "timestamp": clk.iso(),
                        "resultDisplay": out if name != "read_file" else "",
                        "displayName": display,
                        "description": desc,
                        "renderOutputAsMarkdown": name != "run_shell_command",
                    }
                ]
                meter.add(out)
                if rec is not None:
                    rec.call(
                        call_id=tcid,
                        tool=name,
                        args=args,
                        result=out,
                        is_error=bool(failed),
                        user_turn=ut,
                        parent_id=None,
                        step=step,
                        call=c,
                        tokens=u["total_tokens"],
                    )
            messages.append(msg)
            if rec is not None:
                rec.tokens += u["total_tokens"]
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
    import hashlib

    doc = {
        "sessionId": s.sid,
        "projectHash": hashlib.sha256(s.cwd.encode()).hexdigest(),
        "startTime": start,
        "lastUpdated": clk.iso(),
        "messages": messages,
    }
    yield (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def gemini_path(s: Session) -> str:
    import hashlib

    stamp = s.start.strftime("%Y-%m-%dT%H-%M")
    return f"gemini/{hashlib.sha256(s.cwd.encode()).hexdigest()}/chats/session-{stamp}-{s.sid[:8]}.json"


# -- opencode ------------------------------------------------------------------------------------------------------


class OcIds:
    """opencode ids: a prefix, 12 hex digits of time (ms * 0x1000 + a counter, so ids ascend with time) and 14
    random base-62 characters."""

    def __init__(self, ids: Ids) -> None:
        self.ids, self.last, self.n = ids, 0, 0

    def __call__(self, prefix: str, ms: int) -> str:
        self.n = self.n + 1 if ms == self.last else 0
        self.last = ms
        return f"{prefix}_{(ms * 0x1000 + self.n) & 0xFFFFFFFFFFFF:012x}{self.ids.b62(14)}"


def opencode_tool(c: Call, cwd: str) -> tuple[str, dict[str, Any], str, str, dict[str, Any]]:
    """(tool, input, output (or error text), title, metadata)."""
    a = c.args
    if c.op == "sh":
        return (
            "bash",
            {"command": a["cmd"], "description": a.get("desc", "Run command")},
            c.out,
            a.get("desc", "Run command"),
            {"output": c.out, "exit": c.code, "description": a.get("desc", "")},
        )
    if c.op == "read":
        path = _abs(cwd, a["path"])
        lines = a.get("content", c.out).split("\n") if not c.code else []
        body = "\n".join(f"{i:05d}| {x}" for i, x in enumerate(lines, 1))
        out = (
            f"Error: File not found: {path}"
            if c.code
            else f"<file>\n{body}\n\n(End of file - total {len(lines)} lines)\n</file>"
        )
        return "read", {"filePath": path}, out, a["path"], {"preview": "\n".join(lines[:20])}
    if c.op == "edit":
        path = _abs(cwd, a["path"])
        out = "Error: oldString not found in content" if c.code else ""
        diff = (
            f"Index: {path}\n===================================================================\n--- {path}\n"
            f"+++ {path}\n@@\n"
            + "\n".join([f"-{x}" for x in a["old"].split("\n")] + [f"+{x}" for x in a["new"].split("\n")])
            + "\n"
        )
        return (
            "edit",
            {"filePath": path, "oldString": a["old"], "newString": a["new"]},
            out,
            a["path"],
            {"diagnostics": {}, "diff": diff},
        )
    if c.op == "grep":
        files = [x for x in c.out.split("\n") if x]
        out = f"Found {len(files)} matches\n" + "\n".join(files) if files else "No files found"
        args = {"pattern": a["pattern"]}
        if "path" in a:
            args["path"] = a["path"]
        return "grep", args, out, a["pattern"], {"matches": len(files), "truncated": False}
    raise ValueError(f"opencode cannot render op {c.op}")


def render_opencode(s: Session, rec: Recorder | None) -> dict[str, bytes]:
    """The legacy storage tree of one session, as ``{path under storage/: bytes}``: ``session/<projectID>/<ses>.json``,
    ``message/<ses>/<msg>.json`` and ``part/<msg>/<prt>.json``; each file pretty-printed like opencode writes it."""
    import hashlib

    ids, clk = Ids(s.seed), Clock(s.start)
    oc = OcIds(ids)
    meter = Meter(10200, ids.rng)
    project = hashlib.sha1(s.cwd.encode()).hexdigest()
    sid = s.sid
    created = clk.ms()
    files: dict[str, bytes] = {}

    def put(path: str, obj: dict[str, Any]) -> None:
        files[path] = json.dumps(obj, indent=2, ensure_ascii=False).encode()

    if rec is not None:
        rec.first_ts = clk.iso()
    title = s.title or "New session"
    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else 1.2)
        if rec is not None:
            rec.user_turns += 1
        uid = oc("msg", clk.ms())
        put(
            f"message/{sid}/{uid}.json",
            {"id": uid, "role": "user", "sessionID": sid, "time": {"created": clk.ms()}, "summary": {"diffs": []}},
        )
        pid = oc("prt", clk.ms())
        put(
            f"part/{uid}/{pid}.json",
            {"id": pid, "sessionID": sid, "messageID": uid, "type": "text", "text": turn.prompt},
        )
        meter.add(turn.prompt)
        for step in turn.steps:
            clk.tick(0.3)
            mid = oc("msg", clk.ms())
            t_start = clk.ms()
            parts: list[dict[str, Any]] = []

            def part(kind: str, mid: str = mid, parts: list[dict[str, Any]] = parts, **kw: Any) -> dict[str, Any]:
                p = {"id": oc("prt", clk.ms()), "sessionID": sid, "messageID": mid, "type": kind, **kw}
                parts.append(p)
                return p

            snap = ids.hexs(40)
            part("step-start", snapshot=snap)
            clk.tick(step.secs)
            c = _one_call(step, "opencode")
            native = opencode_tool(c, s.cwd) if c is not None else None
            if step.text:
                part("text", text=step.text, time={"start": clk.ms(), "end": clk.ms()})
            u = meter.response(step.text + (json.dumps(native[1]) if native else ""), step.thinking)
            inp, out, cr, cw = u
            cost = price(s.model, inp, out, cr, cw)["total"]
            if native is not None and c is not None:
                name, args, text, ptitle, meta = native
                t0 = clk.ms()
                clk.tick(c.secs)
                failed = bool(c.code) and c.op != "sh"
                state: dict[str, Any] = (
                    {"status": "error", "input": args, "error": text, "time": {"start": t0, "end": clk.ms()}}
                    if failed
                    else {
                        "status": "completed",
                        "input": args,
                        "output": text,
                        "title": ptitle,
                        "metadata": meta,
                        "time": {"start": t0, "end": clk.ms()},
                    }
                )
                cid = f"toolu_01{ids.b62(22)}"
                part("tool", callID=cid, tool=name, state=state)
                meter.add(text)
                if rec is not None:
                    rec.call(
                        call_id=cid,
                        tool=name,
                        args=args,
                        result=text,
                        is_error=failed,
                        user_turn=ut,
                        parent_id=None,
                        step=step,
                        call=c,
                        tokens=inp + out + cr + cw,
                    )
            tokens = {"input": inp, "output": out, "reasoning": 0, "cache": {"read": cr, "write": cw}}
            part(
                "step-finish",
                reason="tool-calls" if c is not None else "stop",
                snapshot=ids.hexs(40),
                cost=cost,
                tokens=tokens,
            )
            put(
                f"message/{sid}/{mid}.json",
                {
                    "id": mid,
                    "role": "assistant",
                    "sessionID": sid,
                    "time": {"created": t_start, "completed": clk.ms()},
                    "parentID": uid,
                    "modelID": s.model,
                    "providerID": "anthropic",
                    "mode": "build",
                    "path": {"cwd": s.cwd, "root": s.cwd},
                    "cost": cost,
                    "tokens": tokens,
                    "system": [],
                },
            )
            for p in parts:
                put(f"part/{mid}/{p['id']}.json", p)
            if rec is not None:
                rec.tokens += inp + out + cr + cw
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
    put(
        f"session/{project}/{sid}.json",
        {
            "id": sid,
            "version": s.version or "0.15.8",
            "projectID": project,
            "directory": s.cwd,
            "title": title,
            "time": {"created": created, "updated": clk.ms()},
        },
    )
    return files
