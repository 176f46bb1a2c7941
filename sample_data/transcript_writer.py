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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
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
    fmt: str  # pi | claude_code | codex | openai_messages
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
        self.t = start.astimezone(timezone.utc) if start.tzinfo else start.replace(tzinfo=timezone.utc)

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
        self.cum = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0,
                    "total_tokens": 0}

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
        last = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
                "reasoning_output_tokens": reasoning, "total_tokens": inp + out}
        for k, v in last.items():
            self.cum[k] += v
        return last


def price(model: str, inp: int, out: int, cr: int, cw: int) -> dict[str, float]:
    p = PRICES.get(model, (3.0, 15.0, 0.3, 3.75))
    c = {"input": inp * p[0] / 1e6, "output": out * p[1] / 1e6, "cacheRead": cr * p[2] / 1e6,
         "cacheWrite": cw * p[3] / 1e6}
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

PI_EDIT_ERROR = ("Could not find the exact text in {path}. The old text must match exactly including all whitespace "
                 "and newlines.")
CLAUDE_REJECT = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
                 "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
                 "tell you how to proceed.")


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
        text = (PI_EDIT_ERROR.format(path=a["path"]) if c.code else
                f"Successfully replaced text in {a['path']}. Changed {len(a['old'])} characters to "
                f"{len(a['new'])} characters.")
        return "edit", {"path": a["path"], "oldText": a["old"], "newText": a["new"]}, text
    if c.op == "write":
        return "write", {"path": a["path"], "content": a["content"]}, \
            f"Successfully wrote {len(a['content'].encode())} bytes to {a['path']}"
    if c.op == "grep":
        out = c.out
        if c.code:
            out = (out + "\n\nCommand exited with code 1").lstrip("\n")
        return "bash", {"command": f"rg -n \"{a['pattern']}\" {a.get('path', '.')}"}, out
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
            return "Read", {"file_path": path}, "<tool_use_error>File does not exist.</tool_use_error>", \
                "Error: File does not exist."
        n = c.out.count("\n") + 1
        return "Read", {"file_path": path}, _numbered(c.out), \
            {"type": "text", "file": {"filePath": path, "content": c.out, "numLines": n, "startLine": 1,
                                      "totalLines": n}}
    if c.op == "edit":
        path = _abs(cwd, a["path"])
        args = {"file_path": path, "old_string": a["old"], "new_string": a["new"]}
        if c.code:
            err = f"String to replace not found in file.\nString: {a['old']}"
            return "Edit", args, f"<tool_use_error>{err}</tool_use_error>", f"Error: {err}"
        new_lines = a["new"].split("\n")
        text = (f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited "
                f"file:\n{_numbered(a['new'], a.get('line', 1))}")
        patch = [{"oldStart": a.get("line", 1), "oldLines": a["old"].count("\n") + 1, "newStart": a.get("line", 1),
                  "newLines": len(new_lines),
                  "lines": [f"-{x}" for x in a["old"].split("\n")] + [f"+{x}" for x in new_lines]}]
        return "Edit", args, text, {"filePath": path, "oldString": a["old"], "newString": a["new"],
                                    "originalFile": a.get("original", ""), "structuredPatch": patch,
                                    "userModified": False, "replaceAll": False}
    if c.op == "write":
        path = _abs(cwd, a["path"])
        return "Write", {"file_path": path, "content": a["content"]}, f"File created successfully at: {path}", \
            {"type": "create", "filePath": path, "content": a["content"], "structuredPatch": []}
    if c.op == "grep":
        args = {"pattern": a["pattern"]}
        if "path" in a:
            args["path"] = a["path"]
        files = [x for x in c.out.split("\n") if x]
        text = f"Found {len(files)} file{'s' if len(files) != 1 else ''}\n" + "\n".join(files) if files \
            else "No files found"
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
            out = {"output": f"apply_patch verification failed: Failed to find expected lines in {a['path']}:\n"
                             f"{a.get('old', '')}", "metadata": {"exit_code": 1, "duration_seconds": 0.0}}
        else:
            kind = "A" if c.op == "write" else "M"
            out = {"output": f"Success. Updated the following files:\n{kind} {a['path']}\n",
                   "metadata": {"exit_code": 0, "duration_seconds": 0.0}}
        return "custom_tool_call", "apply_patch", patch, json.dumps(out, separators=(",", ":")), ""
    if c.op == "tool":
        return "function_call", a["name"], json.dumps(a["arguments"], separators=(",", ":")), c.out, ""
    if c.op == "sh":
        cmd = a["cmd"]
    elif c.op == "read":
        cmd = a.get("codex_cmd") or f"sed -n '1,200p' {a['path']}"
    elif c.op == "grep":
        cmd = f"rg -n \"{a['pattern']}\" {a.get('path', '.')}"
    else:
        raise ValueError(f"Codex cannot render op {c.op}")
    out = c.out
    if s.variant == "shell":
        args = {"command": ["bash", "-lc", cmd], "workdir": s.cwd, "timeout_ms": 120000}
        text = json.dumps({"output": out, "metadata": {"exit_code": c.code, "duration_seconds": round(c.secs, 1)}},
                          separators=(",", ":"))
        return "function_call", "shell", json.dumps(args, separators=(",", ":")), text, ""
    args = {"cmd": cmd, "workdir": s.cwd}
    if "yield" in a:
        args["yield_time_ms"] = a["yield"]
    text = (f"Chunk ID: {ids.hexs(6)}\nWall time: {c.secs:.4f} seconds\nProcess exited with code {c.code}\n"
            f"Original token count: {est_tokens(out)}\nOutput:\n{out}")
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
        return "apply_edit", {"path": a["path"], "find": a["old"], "replace": a["new"]}, \
            (f"Error: `find` text not found in {a['path']}" if c.code else f"Applied edit to {a['path']}")
    if c.op == "write":
        return "write_file", {"path": a["path"], "content": a["content"]}, \
            f"Wrote {len(a['content'].encode())} bytes to {a['path']}"
    if c.op == "grep":
        return "search_code", {"query": a["pattern"], "path": a.get("path", ".")}, c.out or "No matches."
    if c.op == "tool":
        return a["name"], a["arguments"], c.out
    raise ValueError(f"OpenAI messages cannot render op {c.op}")


# --------------------------------------------------------------------------------------------------------------------
# Renderers
# --------------------------------------------------------------------------------------------------------------------

def render(s: Session, rec: Recorder | None = None, subs: list[tuple[Session, Recorder | None]] | None = None
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
    raise ValueError(s.fmt)


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
        yield entry("message", message={"role": "user", "content": [{"type": "text", "text": turn.prompt}],
                                         "timestamp": clk.ms()})
        meter.add(turn.prompt)
        for step in turn.steps:
            clk.tick(step.secs)
            content: list[dict[str, Any]] = []
            if step.thinking:
                content.append({"type": "thinking", "thinking": step.thinking,
                                "thinkingSignature": "" if openai else ids.b62(88)})
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
                    content.append({"type": "toolCall", "id": chid, "name": cname, "arguments": cargs,
                                    "parentToolCallId": cid})
                    flat.append((ch, chid, cname, cargs, cout, cid))
            out_text = step.text + "".join(json.dumps(f[3]) for f in flat)
            if openai:
                u = meter.openai_response(out_text, step.thinking)
                inp, out, cr, cw = u["input_tokens"] - u["cached_input_tokens"], u["output_tokens"], \
                    u["cached_input_tokens"], 0
            else:
                inp, out, cr, cw = meter.response(out_text, step.thinking)
            if step.aborted:
                out = min(out, 12)
            usage = {"input": inp, "output": out, "cacheRead": cr, "cacheWrite": cw, "totalTokens": inp + out + cr + cw,
                     "cost": price(s.model, inp, out, cr, cw)}
            stop = "aborted" if step.aborted else ("toolUse" if step.calls else "stop")
            msg: dict[str, Any] = {"role": "assistant", "content": content, "api": api, "provider": provider,
                                   "model": s.model, "usage": usage, "stopReason": stop, "timestamp": clk.ms()}
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
                        rec.call(call_id=cid, tool=name, args=args, result=None, is_error=None, user_turn=ut,
                                 parent_id=par, step=step, call=c, tokens=usage["totalTokens"])
                continue
            results: list[bytes] = []
            # nested calls finish before the script that made them
            order = sorted(range(len(flat)), key=lambda i: (flat[i][5] is None, i))
            for i in order:
                c, cid, name, args, out_s, par = flat[i]
                clk.tick(c.secs)
                res: dict[str, Any] = {"role": "toolResult", "toolCallId": cid, "toolName": name,
                                       "content": [{"type": "text", "text": out_s}], "isError": bool(c.code),
                                       "timestamp": clk.ms()}
                if name == "edit" and not c.code:
                    res["details"] = {"diff": "\n".join([f"-{x}" for x in args["oldText"].split("\n")] +
                                                        [f"+{x}" for x in args["newText"].split("\n")])}
                elif name == "bash":
                    res["details"] = {}
                results.append(entry("message", message=res))
                meter.add(out_s)
            yield from results
            if rec is not None:
                for c, cid, name, args, out_s, par in flat:
                    rec.call(call_id=cid, tool=name, args=args, result=out_s, is_error=bool(c.code), user_turn=ut,
                             parent_id=par, step=step, call=c, tokens=usage["totalTokens"])


def render_claude(s: Session, rec: Recorder | None, subs: list[tuple[Session, Recorder | None]]) -> Iterator[bytes]:
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(15800 if not s.agent_id else 9200, ids.rng)
    side = bool(s.agent_id)
    session_id = s.parent.sid if (side and s.parent) else s.sid
    base: dict[str, Any] = {"parentUuid": None, "isSidechain": side, "userType": "external", "cwd": s.cwd,
                            "sessionId": session_id, "version": s.version or "2.0.76", "gitBranch": s.branch}
    if side:
        base["agentId"] = s.agent_id
    new_layout = (s.version or "2.0.76") >= "2.1"
    prev: str | None = None

    def line(kind: str, message: Any, uuid: str | None = None, **extra: Any) -> tuple[str, bytes]:
        nonlocal prev
        u = uuid or ids.uuid()
        d = {**base, "parentUuid": prev, **extra.pop("_env", {}), "type": kind, "message": message, "uuid": u,
             "timestamp": clk.iso(), **extra}
        prev = u
        return u, dumps(d)

    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else min(turn.wait, 2.5))
        turn_start = clk.t
        if rec is not None:
            rec.user_turns += 1
        user_uuid = ids.uuid()
        if not side:
            yield dumps({"type": "file-history-snapshot", "messageId": user_uuid,
                         "snapshot": {"messageId": user_uuid, "trackedFileBackups": {}, "timestamp": clk.iso()},
                         "isSnapshotUpdate": False})
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
            for c, tid, name, args, _, _ in natives:
                blocks.append({"type": "tool_use", "id": tid, "name": name, "input": args})
            out_text = step.text + "".join(json.dumps(n[3]) for n in natives)
            inp, out, cr, cw = meter.response(out_text, step.thinking)
            full = {"input_tokens": inp, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr,
                    "cache_creation": {"ephemeral_5m_input_tokens": cw, "ephemeral_1h_input_tokens": 0},
                    "output_tokens": out, "service_tier": "standard"}
            tool_line: dict[str, str] = {}
            # Claude Code writes every content block of one response as its own line; usage grows to the last one.
            for i, block in enumerate(blocks):
                last = i == len(blocks) - 1
                usage = full if last else {**full, "output_tokens": min(out, 1 + i)}
                message = {"model": s.model, "id": msg_id, "type": "message", "role": "assistant", "content": [block],
                           "stop_reason": ("tool_use" if natives else "end_turn") if last else None,
                           "stop_sequence": None, "usage": usage}
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
                    result["content"] = [{"type": "text", "text": c.out},
                                         {"type": "text", "text": f"agentId: {sub.agent_id} (for resuming to continue "
                                                                  f"this agent's work if needed)"}]
                    tur = {"status": "completed", "prompt": args["prompt"], "agentId": sub.agent_id,
                           "content": [{"type": "text", "text": c.out}], "totalDurationMs": int(c.secs * 1000),
                           "totalTokens": 41000 + len(c.out), "totalToolUseCount": sum(len(st.calls) for t in
                                                                                      sub.turns for st in t.steps)}
                env = {"_env": {"parentUuid": tool_line[tid]}} if tid in tool_line else {}
                extra: dict[str, Any] = {"toolUseResult": tur}
                if new_layout:
                    extra["sourceToolAssistantUUID"] = tool_line.get(tid)
                _, b = line("user", {"role": "user", "content": [result]}, **env, **extra)
                yield b
                meter.add(content if isinstance(content, str) else c.out)
                if rec is not None:
                    rec.call(call_id=tid, tool=name, args=args, result=content if isinstance(content, str) else c.out,
                             is_error=bool(c.code or c.rejected), user_turn=ut, parent_id=None, step=step, call=c,
                             tokens=total)
                if c.rejected:
                    interrupted = True
            if interrupted:
                _, b = line("user", {"role": "user", "content": [{"type": "text",
                                                                  "text": "[Request interrupted by user for tool use]"}]})
                yield b
                break
        if new_layout and not side and not interrupted:
            u = ids.uuid()
            yield dumps({**base, "parentUuid": prev, "type": "system", "subtype": "turn_duration",
                         "durationMs": int((clk.t - turn_start).total_seconds() * 1000), "isMeta": False,
                         "timestamp": clk.iso(), "uuid": u})
            prev = u


def render_codex(s: Session, rec: Recorder | None) -> Iterator[bytes]:
    ids, clk = Ids(s.seed), Clock(s.start)
    meter = Meter(9400, ids.rng)

    def item(kind: str, payload: dict[str, Any]) -> bytes:
        return dumps({"timestamp": clk.iso(), "type": kind, "payload": payload})

    repo = s.cwd.rstrip("/").rsplit("/", 1)[-1]
    if rec is not None:
        rec.first_ts = clk.iso()
    yield item("session_meta", {
        "id": s.sid, "timestamp": clk.iso(), "cwd": s.cwd, "originator": "codex_cli_rs",
        "cli_version": s.version or "0.58.0", "instructions": None, "source": "cli", "model_provider": "openai",
        "git": {"commit_hash": ids.hexs(40), "branch": s.branch, "repository_url": f"git@github.com:dana/{repo}.git"}})
    env = (f"<environment_context>\n  <cwd>{s.cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
           f"  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
           f"  <shell>bash</shell>\n</environment_context>")
    yield item("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]})
    meter.add(env)
    limits_used = 3.0
    for ut, turn in enumerate(s.turns):
        clk.tick(turn.wait if ut else min(turn.wait, 2.5))
        turn_id = ids.uuid()
        if rec is not None:
            rec.user_turns += 1
        yield item("event_msg", {"type": "task_started", "turn_id": turn_id, "model_context_window": 272000})
        yield item("turn_context", {"turn_id": turn_id, "cwd": s.cwd, "approval_policy": "on-request",
                                    "sandbox_policy": {"type": "workspace-write", "network_access": False,
                                                       "exclude_tmpdir_env_var": False, "exclude_slash_tmp": False},
                                    "model": s.model, "effort": "medium", "summary": "auto"})
        yield item("response_item", {"type": "message", "role": "user",
                                     "content": [{"type": "input_text", "text": turn.prompt}]})
        yield item("event_msg", {"type": "user_message", "message": turn.prompt, "images": []})
        meter.add(turn.prompt)
        last_text = ""
        for step in turn.steps:
            clk.tick(step.secs)
            if step.thinking:
                yield item("response_item", {"type": "reasoning",
                                             "summary": [{"type": "summary_text", "text": step.thinking}],
                                             "content": None, "encrypted_content": "gAAAAB" + ids.b62(160)})
                yield item("event_msg", {"type": "agent_reasoning", "text": step.thinking})
            if step.text:
                last_text = step.text
                yield item("event_msg", {"type": "agent_message", "message": step.text})
                yield item("response_item", {"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": step.text}]})
            natives = []
            for c in step.calls:
                kind, name, args, out, _ = codex_tool(c, s, ids)
                cid = f"call_{ids.b62(24)}"
                natives.append((c, cid, kind, name, args, out))
                if kind == "custom_tool_call":
                    yield item("response_item", {"type": kind, "status": "completed", "call_id": cid, "name": name,
                                                 "input": args})
                else:
                    yield item("response_item", {"type": kind, "name": name, "arguments": args, "call_id": cid})
            last = meter.openai_response(step.text + "".join(n[4] for n in natives), step.thinking)
            limits_used = min(99.0, limits_used + last["total_tokens"] / 400000)
            yield item("event_msg", {"type": "token_count", "info": {
                "total_token_usage": dict(meter.cum), "last_token_usage": last, "model_context_window": 272000},
                "rate_limits": {"primary": {"used_percent": round(limits_used, 1), "window_minutes": 300,
                                            "resets_in_seconds": 9000},
                                "secondary": {"used_percent": round(limits_used / 6, 1), "window_minutes": 10080,
                                              "resets_in_seconds": 431000}}})
            if rec is not None:
                rec.tokens += last["total_tokens"]
                if step.text:
                    rec.texts.append(TextRec(ut, step.text, step))
            for c, cid, kind, name, args, out in natives:
                clk.tick(c.secs)
                if kind == "custom_tool_call":
                    yield item("event_msg", {"type": "patch_apply_end", "call_id": cid, "stdout": json.loads(out)[
                        "output"] if not c.code else "", "stderr": json.loads(out)["output"] if c.code else "",
                        "success": not c.code})
                    yield item("response_item", {"type": "custom_tool_call_output", "call_id": cid, "output": out})
                else:
                    yield item("response_item", {"type": "function_call_output", "call_id": cid, "output": out})
                meter.add(out)
                if rec is not None:
                    shown = args if kind == "custom_tool_call" else json.loads(args)
                    rec.call(call_id=cid, tool=name, args=shown, result=out, is_error=bool(c.code), user_turn=ut,
                             parent_id=None, step=step, call=c, tokens=last["total_tokens"])
        yield item("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": last_text})


def render_openai(s: Session, rec: Recorder | None) -> bytes:
    ids = Ids(s.seed)
    if rec is not None:
        rec.first_ts = Clock(s.start).iso()
    messages: list[dict[str, Any]] = [{"role": "system", "content": s.title or
                                       "You are a coding assistant. Use the tools to inspect and change the repository."}]
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
                msg["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}
                                     for _, cid, name, args, _ in natives]
            messages.append(msg)
            if rec is not None and step.text:
                rec.texts.append(TextRec(ut, step.text, step))
            for c, cid, name, args, out in natives:
                messages.append({"role": "tool", "tool_call_id": cid, "name": name, "content": out})
                if rec is not None:
                    rec.call(call_id=cid, tool=name, args=args, result=out, is_error=None, user_turn=ut,
                             parent_id=None, step=step, call=c, tokens=0)
    tools = []
    for name in used:
        desc, params = OPENAI_TOOLS.get(name, (f"{name} tool", {}))
        tools.append({"type": "function", "function": {
            "name": name, "description": desc,
            "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in params.items()},
                           "required": list(params)}}})
    return dumps({"id": s.sid, "model": s.model, "created_at": Clock(s.start).iso(), "messages": messages,
                  "tools": tools, "metadata": {"project": s.cwd, "source": "agent-eval"}})
