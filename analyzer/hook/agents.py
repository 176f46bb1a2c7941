"""What each agent's hooks show the guard, declared once: the live tool names and arguments an agent's hook payload
carries, mapped onto the names and arguments its transcripts record (so a live call is keyed as the replay keys the
stored call), the results the hooks deliver, and which tools they let the guard see at all.

Pinned from the agents' own source (the README's hook section gives the versions):

- **Codex CLI** 0.124/0.125 (``codex-rs/hooks``; the same payloads in the 0.171 schemas): every shell tool
  (``exec_command``, ``shell``, ``shell_command``, ``local_shell``) reaches the hook as ``Bash {"command": <string>}``
  (an argv is ``shlex``-joined), ``apply_patch`` as ``apply_patch {"command": <patch>}``, MCP tools as they are.
  ``write_stdin`` (the poll of a running command), ``update_plan``, ``view_image``, ``web_search`` and the agent tools
  get no hook in those versions (later builds hook every local function tool, under its own name and arguments).
  PostToolUse carries no exit code, and for ``shell``/``shell_command``/``apply_patch``/MCP it fires only when the
  call succeeded.
- **Gemini CLI** v0.26+ (``packages/core/src/hooks``): every tool call, under the name and arguments its chat file
  records; AfterTool fires for failures too (``tool_response.error``). No call id.

The hook sees a shell command's string only, not which shell tool ran, nor ``workdir``/``yield_time_ms``/
``timeout_ms``: those are dropped from the live key, so calls that differ only in them count as the same live.
"""

from __future__ import annotations

from typing import Any

import orjson

from analyzer.detect.keys import canonical_json

CODEX, GEMINI, CLAUDE = "codex", "gemini-cli", "claude-code"

# live tool name -> (the transcript's tool name, live argument -> transcript argument); anything else: as it is
LIVE_TO_STORED: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    CODEX: {
        "Bash": ("exec_command", {"command": "cmd"}),  # unified exec, the default shell tool on macOS and Linux
        "apply_patch": ("apply_patch", {"command": "input"}),
    },
    GEMINI: {},
    CLAUDE: {},
}

# transcript tool name -> (live name, transcript argument holding what the live payload reports, its live name)
STORED_TO_LIVE: dict[str, dict[str, tuple[str, str, str]]] = {
    CODEX: {
        "exec_command": ("Bash", "cmd", "command"),
        "shell_command": ("Bash", "command", "command"),
        "shell": ("Bash", "command", "command"),  # an argv, joined
        "container.exec": ("Bash", "command", "command"),
        "local_shell": ("Bash", "command", "command"),
        "apply_patch": ("apply_patch", "input", "command"),
    },
}

# Which tools each agent's hooks let the guard see (README: "which tools the hooks see").
SEEN = {
    CLAUDE: "every tool, with its result or failure",
    CODEX: "the shell tools (as Bash), apply_patch and MCP tools (0.124/0.125; later builds: every local function "
    "tool); not write_stdin polls, update_plan, view_image, web_search or the agent tools",
    GEMINI: "every tool call (built-in, MCP, subagent), with its result or error",
}


def stored_call(agent: str, tool: str, tool_input: Any) -> tuple[str, Any]:
    """A live call as its transcript records it: (tool name, arguments)."""
    rule = LIVE_TO_STORED.get(agent, {}).get(tool)
    if rule is None or not isinstance(tool_input, dict):
        return tool, ({} if tool_input is None else tool_input)
    name, rename = rule
    return name, {rename.get(k, k): v for k, v in tool_input.items()}


def live_call(agent: str, tool: str, args: Any) -> tuple[str, Any] | None:
    """What ``agent``'s hooks report for a call its transcript records as ``tool``/``args`` (None: its hooks do not
    see that tool). The inverse of ``stored_call`` on what the hooks keep; tests and the benchmark drive the hook
    with it."""
    if agent == GEMINI or agent == CLAUDE:
        return tool, args
    rule = STORED_TO_LIVE[CODEX].get(tool)
    if rule is None:
        return (tool, args) if tool.startswith("mcp__") else None
    name, field, live_field = rule
    a = args if isinstance(args, dict) else {}
    v = a.get(field)
    if isinstance(v, list):
        import shlex  # tests and the benchmark only: not on the hook's path

        v = shlex.join(str(x) for x in v)
    if not isinstance(v, str):
        v = "" if v is None else str(v)
    return name, {live_field: v}


def codex_result(tool: str, response: Any) -> tuple[str, bool | None]:
    """(text, error flag if known) of a Codex PostToolUse ``tool_response``: a shell's output (no exit code: unknown),
    ``apply_patch``'s JSON string with ``metadata.exit_code``, an MCP ``CallToolResult``."""
    if isinstance(response, str):
        if tool == "apply_patch" and response.lstrip().startswith("{") and '"metadata"' in response:
            try:
                doc = orjson.loads(response)
            except orjson.JSONDecodeError:
                doc = None
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get("exit_code"), int):
                out = doc.get("output")  # type: ignore[union-attr]
                body = out if isinstance(out, str) else ("" if out is None else canonical_json(out))
                return body, meta["exit_code"] != 0
        return response, None
    if isinstance(response, dict) and "content" in response:
        err = response.get("isError")
        return parts_text(response.get("content")), err if isinstance(err, bool) else None
    if response is None:
        return "", None
    return canonical_json(response), None


def gemini_result(response: Any) -> tuple[str, bool]:
    """(text, is_error) of a Gemini AfterTool ``tool_response`` ``{llmContent, returnDisplay, error?}``: the error's
    message when there is one (the chat file records ``response.error``), else ``llmContent``."""
    if not isinstance(response, dict):
        return ("" if response is None else parts_text(response)), False
    err = response.get("error")
    if err not in (None, ""):
        msg = err.get("message") if isinstance(err, dict) else err
        return (msg if isinstance(msg, str) else canonical_json(msg)), True
    return parts_text(response.get("llmContent")), False


def parts_text(value: Any) -> str:
    """Text of a string, or of a list of content parts (``{"text": ...}``), else its JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    if isinstance(value, list):
        return "\n".join(parts_text(v) for v in value)
    return canonical_json(value)
