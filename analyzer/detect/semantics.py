"""What each tool's arguments mean, declared once: which fields are the action and its object, which are commentary
or tuning, how a shell command's object is extracted, and which result lines are noise.

A loop is the *same action on the same object* repeated with the same result (docs/detectors.md, "The definition").
Two calls are the same action when their **action arguments** are equal: the arguments without the fields that
describe the call to a person (commentary: Claude Code's ``description``, rewritten on every call) or say how long or
how much (tuning: timeouts, output limits, wait times, permission escalations), with a shell command reduced to the
command it runs (``shell_action``). ``keys.action_key`` hashes them; ingest stores it as ``calls.action_key``, the
detector core's signals, the judgement and the ``loopscope`` guard (hence the hooks) compare calls by it. The full
canonical key (``calls.call_key``) is untouched: the guards whose replicas loopscope ships compare calls their own way.

A tool this table does not declare keeps every argument (each one is part of the action), as does any field a
declared tool does not name: only what is declared commentary or tuning is ever dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolSemantics:
    """One tool (or a few tools sharing a shape), as the adapters emit it.

    ``action``: the fields that are the action and its object (command, path, pattern, range, URL, the edit's texts;
    listed for the reader and the completeness test: any field not declared below is kept too). ``commentary``: what
    the model says about the call. ``tuning``: how long, how much or with which permissions it runs. ``shell``: the
    fields holding a shell command, reduced by ``shell_action``. ``code``: the fields holding a code-mode cell (a script
    that calls the agent's tools), reduced by ``code_action``. ``patch``: the fields holding a patch (``*** Begin
    Patch`` … ``*** End Patch``), read by ``patch_parts`` as an edit is: its files the object, its old lines the text
    that may drift, its added lines the fix being tried. ``formats``: where the tool comes from."""

    names: tuple[str, ...]
    formats: tuple[str, ...]
    action: tuple[str, ...]
    commentary: tuple[str, ...] = ()
    tuning: tuple[str, ...] = ()
    shell: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    patch: tuple[str, ...] = ()
    note: str = ""

    @property
    def dropped(self) -> frozenset[str]:
        return frozenset(self.commentary) | frozenset(self.tuning)


_CC = ("claude_code",)
_CODEX = ("codex",)
_GEMINI = ("gemini_cli",)
_OH = ("openhands",)
_SWE = ("swe_agent",)
_INSPECT = ("inspect",)

TOOLS: tuple[ToolSemantics, ...] = (
    # -- Claude Code ----------------------------------------------------------------------------------------------
    ToolSemantics(
        ("Bash", "PowerShell", "mcp__acp__Bash"),
        _CC,
        ("command",),
        commentary=("description",),
        tuning=("timeout", "run_in_background", "dangerouslyDisableSandbox"),
        shell=("command",),
        note="`description` is rewritten on every call; running in the background changes how long the agent "
        "waits, not what runs",
    ),
    ToolSemantics(("BashOutput", "mcp__acp__BashOutput"), _CC, ("bash_id", "filter")),
    ToolSemantics(("KillShell", "KillBash", "mcp__acp__KillShell"), _CC, ("shell_id",)),
    ToolSemantics(("TaskOutput",), _CC, ("task_id",), tuning=("block", "timeout")),
    ToolSemantics(("TaskStop",), _CC, ("task_id", "shell_id")),
    ToolSemantics(
        ("Read", "mcp__acp__Read"),
        _CC,
        ("file_path", "offset", "limit", "pages"),
        note="the range is part of the object",
    ),
    ToolSemantics(("Edit", "mcp__acp__Edit"), _CC, ("file_path", "old_string", "new_string", "replace_all")),
    ToolSemantics(("MultiEdit", "mcp__acp__MultiEdit"), _CC, ("file_path", "edits")),
    ToolSemantics(("Write", "mcp__acp__Write"), _CC, ("file_path", "content", "file_content")),
    ToolSemantics(
        ("NotebookEdit",), _CC, ("notebook_path", "cell_id", "cell_number", "new_source", "cell_type", "edit_mode")
    ),
    ToolSemantics(("NotebookRead",), _CC, ("notebook_path", "cell_id")),
    ToolSemantics(
        ("Grep",),
        _CC,
        ("pattern", "path", "file_path", "glob", "type", "output_mode", "-i", "multiline", "offset"),
        tuning=("-n", "-A", "-B", "-C", "context", "head_limit"),
        note="line numbers, context lines and the output limit shape the answer, not the question",
    ),
    ToolSemantics(("Glob",), _CC, ("pattern", "path")),
    ToolSemantics(("LS",), _CC, ("path", "ignore")),
    ToolSemantics(("WebFetch",), _CC, ("url", "prompt"), note="the prompt is the question asked of the page"),
    ToolSemantics(("WebSearch",), _CC, ("query", "allowed_domains", "blocked_domains")),
    ToolSemantics(
        ("Task", "Agent"),
        _CC,
        ("prompt", "subagent_type"),
        commentary=("description",),
        tuning=("model", "run_in_background"),
        note="`description` is the subagent's 3-5 word label",
    ),
    ToolSemantics(("TodoWrite",), _CC, ("todos",)),
    ToolSemantics(("TaskCreate",), _CC, ("subject", "description"), commentary=("activeForm",)),
    ToolSemantics(
        ("TaskUpdate",), _CC, ("taskId", "status", "subject", "description", "owner"), commentary=("activeForm",)
    ),
    ToolSemantics(("TaskGet",), _CC, ("taskId",)),
    ToolSemantics(("TaskList", "EnterPlanMode"), _CC, ()),
    ToolSemantics(("ListMcpResourcesTool",), _CC, ("server",)),
    ToolSemantics(("ReadMcpResourceTool",), _CC, ("server", "uri")),
    ToolSemantics(("ToolSearch",), _CC, ("query",), tuning=("max_results",)),
    ToolSemantics(("AskUserQuestion",), _CC, ("questions",)),
    ToolSemantics(("Skill",), _CC, ("skill", "args")),
    ToolSemantics(("SlashCommand",), _CC, ("command",), note="a slash command, not a shell command"),
    ToolSemantics(("ExitPlanMode",), _CC, ("plan", "planFilePath", "allowedPrompts")),
    # -- Codex --------------------------------------------------------------------------------------------------------
    ToolSemantics(
        ("exec_command",),
        _CODEX,
        ("cmd", "workdir", "shell", "login", "tty"),
        commentary=("justification", "prefix_rule"),
        tuning=("max_output_tokens", "yield_time_ms", "sandbox_permissions", "with_escalated_permissions"),
        shell=("cmd",),
        note="`workdir` is kept: another folder can be another object; a justification and a permission "
        "escalation say why and how it runs, not what",
    ),
    ToolSemantics(
        ("shell", "shell_command"),
        _CODEX,
        ("command", "workdir", "login"),
        commentary=("justification", "prefix_rule"),
        tuning=("timeout_ms", "timeout", "sandbox_permissions", "with_escalated_permissions"),
        shell=("command",),
    ),
    ToolSemantics(
        ("local_shell",),
        _CODEX,
        ("type", "command", "working_directory", "env", "user"),
        tuning=("timeout_ms",),
        shell=("command",),
    ),
    ToolSemantics(
        ("write_stdin",),
        _CODEX,
        ("session_id", "chars"),
        tuning=("yield_time_ms", "max_output_tokens"),
        note="an empty `chars` is a poll of the running process",
    ),
    ToolSemantics(("apply_patch",), _CODEX, ("input", "patch"), patch=("input", "patch")),
    ToolSemantics(("update_plan",), _CODEX, ("plan",), commentary=("explanation",)),
    ToolSemantics(("view_image",), _CODEX, ("path",)),
    ToolSemantics(("web_search",), _CODEX, ("query", "queries", "type")),
    ToolSemantics(("spawn_agent",), _CODEX, ("agent_type", "message", "items")),
    ToolSemantics(("send_input",), _CODEX, ("id", "message", "items", "interrupt")),
    ToolSemantics(
        ("exec",),
        _CODEX,
        ("input",),
        code=("input",),
        note="code mode (Codex 0.145+): a JavaScript cell that calls the tools (`await tools.exec_command({…})`); a "
        "cell of one tool call compares as that call, with the tool's own tuning dropped",
    ),
    ToolSemantics(
        ("wait_agent", "wait"),
        _CODEX,
        ("targets", "ids", "cell_id"),
        tuning=("timeout_ms", "yield_time_ms", "max_tokens"),
        note="`cell_id`: code mode's wait for a cell still running",
    ),
    ToolSemantics(("close_agent",), _CODEX, ("id",)),
    # -- Gemini CLI ---------------------------------------------------------------------------------------------------
    ToolSemantics(
        ("run_shell_command",),
        _GEMINI,
        ("command", "directory", "dir_path"),
        commentary=("description",),
        tuning=("is_background",),
        shell=("command",),
    ),
    ToolSemantics(
        ("read_file",),
        _GEMINI + ("openai_messages",),
        ("absolute_path", "file_path", "path", "offset", "limit", "start_line", "end_line"),
    ),
    ToolSemantics(
        ("read_many_files",),
        _GEMINI,
        ("paths", "include", "exclude", "recursive", "useDefaultExcludes", "file_filtering_options"),
    ),
    ToolSemantics(
        ("replace",),
        _GEMINI,
        ("file_path", "old_string", "new_string", "expected_replacements"),
        commentary=("instruction",),
        note="`instruction` describes the change for the model that repairs a failed edit",
    ),
    ToolSemantics(("write_file",), _GEMINI, ("file_path", "content")),
    ToolSemantics(
        ("glob",),
        _GEMINI + ("opencode",),
        ("pattern", "path", "dir_path", "case_sensitive", "respect_git_ignore", "respect_gemini_ignore"),
    ),
    ToolSemantics(("search_file_content",), _GEMINI, ("pattern", "path", "dir_path", "include")),
    ToolSemantics(
        ("grep_search",),
        _GEMINI,
        (
            "pattern",
            "path",
            "dir_path",
            "include",
            "case_sensitive",
            "fixed_strings",
            "context",
            "after",
            "before",
            "no_ignore",
        ),
        note="the ripgrep search that later versions name `grep_search`",
    ),
    ToolSemantics(("list_directory",), _GEMINI, ("path", "dir_path", "ignore", "file_filtering_options")),
    ToolSemantics(("web_fetch",), _GEMINI, ("prompt",)),
    ToolSemantics(("google_web_search",), _GEMINI, ("query",)),
    ToolSemantics(("save_memory",), _GEMINI, ("fact",)),
    ToolSemantics(("write_todos",), _GEMINI, ("todos",)),
    # -- pi, opencode, mini-swe-agent, SWE-agent, Inspect: the lower-case shell and file tools ---------------------
    ToolSemantics(
        ("bash",),
        ("pi", "opencode", "mini_swe_agent", "swe_agent", "inspect"),
        ("command", "cmd", "workdir", "open_file"),
        commentary=("description",),
        tuning=("timeout",),
        shell=("command", "cmd"),
        note="SWE-agent's own commands (`open`, `goto`, `edit N:M`) arrive as this tool's command, with the file "
        "they act on as `open_file`",
    ),
    ToolSemantics(
        ("read",),
        ("pi", "opencode", "openhands"),
        ("path", "filePath", "offset", "limit", "start", "end", "view_range"),
    ),
    ToolSemantics(
        ("edit",),
        ("pi", "opencode", "openhands", "swe_agent"),
        (
            "path",
            "filePath",
            "oldText",
            "newText",
            "edits",
            "oldString",
            "newString",
            "replaceAll",
            "command",
            "content",
            "start",
            "end",
            "file_text",
            "old_str",
            "new_str",
            "insert_line",
            "search",
            "replace",
            "replace_all",
            "replace-all",
            "open_file",
        ),
        commentary=("security_risk",),
        note="OpenHands' and SWE-agent's `command` here is the editor's sub-command, not a shell command",
    ),
    ToolSemantics(("write",), ("pi", "opencode"), ("path", "filePath", "content")),
    ToolSemantics(
        ("grep",),
        ("pi", "opencode"),
        ("pattern", "path", "glob", "include", "ignoreCase", "literal"),
        tuning=("context", "limit"),
    ),
    ToolSemantics(("find", "ls", "list"), ("pi", "opencode"), ("pattern", "path", "ignore"), tuning=("limit",)),
    ToolSemantics(("codemode",), ("pi",), ("code",)),
    ToolSemantics(("webfetch",), ("opencode",), ("url", "format"), tuning=("timeout",)),
    ToolSemantics(
        ("task",), ("opencode",), ("prompt", "subagent_type"), commentary=("description",), tuning=("model",)
    ),
    ToolSemantics(("todowrite", "todoread"), ("opencode",), ("todos",)),
    ToolSemantics(("patch", "multiedit"), ("opencode",), ("filePath", "edits", "patchText")),
    # -- OpenHands ----------------------------------------------------------------------------------------------------
    ToolSemantics(
        ("execute_bash",),
        _OH,
        ("command", "is_input"),
        commentary=("security_risk",),
        tuning=("timeout",),
        shell=("command",),
        note="`security_risk` is the model's own rating of the call",
    ),
    ToolSemantics(
        ("run",),
        _OH,
        ("command", "is_input", "cwd", "is_static"),
        commentary=("security_risk",),
        tuning=("blocking", "timeout"),
        shell=("command",),
        note="`cwd` is kept: another folder can be another object",
    ),
    ToolSemantics(("run_ipython",), _OH, ("code",), commentary=("security_risk",), tuning=("include_extra",)),
    ToolSemantics(
        ("str_replace_editor", "text_editor"),
        _OH + _SWE + _INSPECT,
        ("command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range", "raw"),
        commentary=("security_risk",),
        note="`command` is the editor's sub-command (`view`, `str_replace`, ...)",
    ),
    ToolSemantics(("browser",), _OH, ("code",), commentary=("security_risk",)),
    ToolSemantics(("browse", "browser_navigate"), _OH, ("url",)),
    ToolSemantics(("browse_interactive",), _OH, ("browser_actions", "browsergym_send_msg_to_user")),
    ToolSemantics(("browser_click",), _OH, ("index",)),
    ToolSemantics(("browser_type",), _OH, ("index", "text")),
    ToolSemantics(("browser_get_state",), _OH, (), tuning=("include_screenshot",)),
    ToolSemantics(("browser_get_content",), _OH, ("extract_links",)),
    ToolSemantics(("browser_go_back",), _OH, ()),
    ToolSemantics(("think",), _OH + _INSPECT, ("thought",)),
    ToolSemantics(("finish",), _OH, ("message", "outputs", "task_completed", "final_thought")),
    ToolSemantics(("chat",), _OH, ("content", "npc_name")),
    ToolSemantics(("invalid_tool_call",), _OH, ()),
    # -- SWE-agent's function-calling tools ------------------------------------------------------------------------
    ToolSemantics(("open",), _SWE, ("path", "line_number")),
    ToolSemantics(("goto",), _SWE, ("line_number", "open_file")),
    ToolSemantics(("scroll_up", "scroll_down"), _SWE, ("open_file",)),
    ToolSemantics(("find_file",), _SWE, ("file_name", "dir")),
    ToolSemantics(("search_dir",), _SWE, ("search_term", "dir")),
    ToolSemantics(("search_file",), _SWE, ("search_term", "file", "open_file")),
    ToolSemantics(("insert",), _SWE, ("line_number", "text", "open_file")),
    ToolSemantics(("create",), _SWE, ("filename",)),
    ToolSemantics(("submit",), _SWE + _INSPECT, ("answer", "args")),
    ToolSemantics(("exit_cost", "exit_forfeit", "exit_context", "exit_error", "exit_format"), _SWE, ("args",)),
    # -- Inspect ------------------------------------------------------------------------------------------------------
    ToolSemantics(("python",), _INSPECT, ("code",)),
    ToolSemantics(("web_browser_go",), _INSPECT, ("url",)),
    ToolSemantics(("web_browser_click",), _INSPECT, ("element_id",)),
    ToolSemantics(("web_browser_type", "web_browser_type_submit"), _INSPECT, ("element_id", "text")),
    ToolSemantics(("web_browser_scroll",), _INSPECT, ("direction",)),
    ToolSemantics(("web_browser_back", "web_browser_forward", "web_browser_refresh"), _INSPECT, ()),
)

# Tools left at the default on purpose (every argument is the action): MCP servers' tools, whose arguments only their
# server knows, and the functions of plain OpenAI-``messages`` datasets, which are each dataset's own.
# (Claude Code's own tools as Zed's ACP bridge serves them, ``mcp__acp__Bash`` and the like, are declared above.)
DEFAULTED = ("mcp__*", "openai_messages: any function")

_BY_NAME: dict[str, ToolSemantics] = {}
for _t in TOOLS:
    for _name in _t.names:
        if _name in _BY_NAME:
            raise ValueError(f"tool {_name!r} declared twice in the semantics table")
        _BY_NAME[_name] = _t


def semantics(tool: str) -> ToolSemantics | None:
    """The declared semantics of ``tool`` (exact name), or None for a tool left at the default."""
    return _BY_NAME.get(tool)


# Field names that are commentary or tuning wherever they appear in the table (the judgement's "what does not change
# the action" reads them).
DROPPED_FIELDS: frozenset[str] = frozenset(f for t in TOOLS for f in t.dropped)


# -- shell commands --------------------------------------------------------------------------------------------------

# ``shlex.split(posix=True)`` as two regular expressions (shlex reads one character at a time in Python). A word is a
# run of pieces between blanks (space, tab, CR, LF): a plain character, a backslash and the character it escapes, a
# single-quoted text (literal), a double-quoted one (where a backslash escapes only a backslash or a double quote).
# What is left between words (an unclosed quote, a trailing backslash) is where shlex raises.
_SHELL_BLANKS = " \t\r\n"
SHELL_WORD = re.compile(r"(?:[^ \t\r\n'\"\\]+|\\.|'[^']*'|\"(?:[^\"\\]|\\.)*\")+", re.S)
_SHELL_PIECE = re.compile(r"([^'\"\\]+)|\\(.)|'([^']*)'|\"((?:[^\"\\]|\\.)*)\"", re.S)
_QUOTED_ESCAPE = re.compile(r'\\([\\"])')


def shell_words(text: str) -> list[str]:
    """``shlex.split(text)``: the same words, or ValueError where shlex raises one."""
    words, end = [], 0
    for m in SHELL_WORD.finditer(text):
        if text[end : m.start()].strip(_SHELL_BLANKS):
            raise ValueError("No closing quotation or no escaped character")
        end = m.end()
        words.append(
            "".join(p[0] or p[1] or p[2] or _QUOTED_ESCAPE.sub(r"\1", p[3]) for p in _SHELL_PIECE.findall(m.group(0)))
        )
    if text[end:].strip(_SHELL_BLANKS):
        raise ValueError("No closing quotation or no escaped character")
    return words


def _raw_words(text: str) -> list[str] | None:
    """The words of a one-line command as written (quotes kept), or None where the shell would not split it."""
    words, end = [], 0
    for m in SHELL_WORD.finditer(text):
        if text[end : m.start()].strip(_SHELL_BLANKS):
            return None
        end = m.end()
        words.append(m.group(0))
    if text[end:].strip(_SHELL_BLANKS):
        return None
    return words


_SHELLS = ("bash", "sh", "zsh")
_SHELL_STARTS = ("ba", "sh", "zs", "/b", "/u")  # how a command that runs a shell begins (``bash``, ``/bin/sh``, ...)
_SHELL_FLAGS = ("-c", "-lc")


def unwrap_shell(command: str) -> str:
    """``bash -lc '…'`` (possibly nested) reduced to the script it runs."""
    cmd = command.strip()
    for _ in range(3):
        head = cmd.split(None, 2)
        if len(head) < 3 or head[0].rsplit("/", 1)[-1] not in _SHELLS or head[1] not in _SHELL_FLAGS:
            break
        try:
            words = shell_words(cmd) if cmd.count("\n") < 50 else cmd.split()[:3]
        except ValueError:
            break
        if len(words) != 3:
            break
        cmd = words[2].strip()
    return cmd


def argv_script(argv: list[Any]) -> str | None:
    """The script of an argv list that runs a shell (``["bash", "-lc", "…"]``), else None."""
    if (
        len(argv) == 3
        and all(isinstance(x, str) for x in argv)
        and argv[0].rsplit("/", 1)[-1] in _SHELLS
        and argv[1] in _SHELL_FLAGS
    ):
        return argv[2]
    return None


# An echo of fixed words (``echo "🔧 Adding the server..."``, ``echo ---``): a label the model writes for the reader, as
# a ``description`` is; it looks at nothing and changes nothing (no variable, substitution or redirect).
_LABEL_ECHO = r"echo(?:\s+-[neE]+)?(?:\s+(?:\"[^\"$`\\]*\"|'[^']*'|[^\s;&|$`'\"\\<>()]+))*\s*"
_LABEL_LINE = re.compile(rf"^\s*{_LABEL_ECHO}$")


def _without_labels(cmd: str) -> str:
    """``cmd`` without the label echoes among its steps (``_LABEL_ECHO``): the lines of a script, the ``&&``/``;``
    steps of a one-line command. A command that is only labels, a script with a heredoc (its lines are a file's
    text), and a step joined by ``||`` or a pipe (a report of how the step before ended, ``_reports_only``) stay."""
    if "\n" in cmd:
        if "<<" in cmd:
            return cmd
        lines = cmd.split("\n")
        kept = [ln for ln in lines if not _LABEL_LINE.match(ln)]
        return "\n".join(kept).strip() if any(ln.strip() for ln in kept) and len(kept) < len(lines) else cmd
    steps = _steps_of(cmd)
    if not steps or len(steps) < 2:
        return cmd
    keep = [
        (op, text)
        for i, (op, _, text) in enumerate(steps)
        if not (
            _LABEL_LINE.match(text)
            and op in ("", "&&", ";")
            and (i + 1 == len(steps) or steps[i + 1][0] in ("&&", ";"))
        )
    ]
    if not keep or len(keep) == len(steps):
        return cmd
    joined = "".join(
        (f" {op} " if op == "&&" else f"{op} ") + text.strip() if j else text.strip()
        for j, (op, text) in enumerate(keep)
    )
    return joined.strip()


# Wrappers that do not change the action (docs/detectors.md, "The definition": the same action "with drifted flags,
# a sleep/timeout wrapper, a | head -n tail, different whitespace"):
_CD = re.compile(r"^cd\s+('[^']*'|\"[^\"]*\"|[^\s;&|]+)\s*(?:&&|;)\s*")
_SLEEP = re.compile(r"^sleep\s+\d+(?:\.\d+)?[smhd]?\s*(?:&&|;|\n)\s*")
_TIMEOUT = re.compile(r"^timeout(?:\s+(?:-[sk]\s+\S+|--?[A-Za-z][\w-]*(?:=\S+)?))*\s+\d+(?:\.\d+)?[smhd]?\s+(?=\S)")
_TAIL = re.compile(r"\s*\|\s*(?:head|tail)(?:\s+(?:-[nc]\s*[+-]?\d+|-\d+|--lines=[+-]?\d+|--bytes=\d+|-q))*\s*$")
# Shell options set before the command (``set -eo pipefail;``): how failures propagate, not what runs.
_SET_OPTIONS = re.compile(r"^set(?:\s+(?:[-+][A-Za-z]*o\s+\w+|[-+][A-Za-z]+))+\s*(?:;|&&)\s*")
# A command's steps (the text between ``&&``, ``||``, ``;`` and newlines; a pipeline is one step) and a step's
# pipeline stages (between ``|``), quoted text kept whole: the ``;`` of an awk program or the ``|`` of a
# ``grep -E "a|b"`` pattern separates nothing. One pass, linear in the length; a lone quote the shell would refuse is
# read as a character. The judgement reads a command's objects with them (``judge._steps``), the action key its tail.
_QUOTED = r"\\.|'[^']*'|\"(?:[^\"\\]|\\.)*\""
SHELL_STEP = re.compile(rf"(?:{_QUOTED}|[^'\"\\&|;\n]|(?<!&)&(?!&)|(?<!\|)\|(?!\|)|['\"\\])+", re.S)
SHELL_STAGE = re.compile(rf"(?:{_QUOTED}|[^'\"\\|]|['\"\\])+", re.S)
# A one-line command's top-level steps, each with the operator before it (``_steps_of``).
_STEP_PART = re.compile(rf"(?P<op>&&|\|\||;)|(?P<text>{SHELL_STEP.pattern})")
_EXIT_STATUS = re.compile(r"exit\s+\$(?:status|\?)$")
# The end of a step whose output goes to a file: `` > F``, `` &> F``, optionally `` 2>&1`` (a ``2>`` or ``>>`` is not
# the whole output, or not only this run's).
_TO_FILE = re.compile(r"\s(?:&>|>)\s*([^\s;&|<>'\"`$]+)(?:\s+2>&1)?\s*$")


def _steps_of(cmd: str) -> list[tuple[str, int, str]] | None:
    """(operator before it, start, text) of each top-level step of a one-line command; None for a script."""
    if "\n" in cmd:
        return None
    out: list[tuple[str, int, str]] = []
    op = ""
    for m in _STEP_PART.finditer(cmd):
        if m.group("op"):
            op = m.group("op")
        else:
            out.append((op, m.start(), m.group("text")))
            op = ""
    return out


def _reports_only(op: str, text: str) -> bool:
    """A step that only reports how the one before it ended: ``|| echo …``, ``|| true``, ``; echo "exit: $?"``."""
    words = _raw_words(text.strip())
    if not words or any(">" in w and w[0] not in "'\"" for w in words):  # writing a file is no report
        return False
    if op == "||":
        return words in (["true"], [":"]) or words[0] == "echo"
    return op in (";", "&&") and words[0] == "echo" and any("$?" in w for w in words)


def _without_report(cmd: str) -> str:
    """``cmd`` without its reporting tail: steps that only report the exit (``_reports_only``), or its output captured
    into a file and printed back (``CMD > F 2>&1; status=$?; cat F; exit $status``): the command run, shown another
    way."""
    steps = _steps_of(cmd)
    if not steps or len(steps) < 2:
        return cmd
    n = len(steps)
    while n > 1 and _reports_only(steps[n - 1][0], steps[n - 1][2]):
        n -= 1
    k = n
    if k > 1 and _EXIT_STATUS.match(steps[k - 1][2].strip()):
        k -= 1
    if k >= 2 and steps[k - 1][2].strip().startswith("cat "):
        shown = steps[k - 1][2].split()
        j = k - 1
        if j > 1 and steps[j - 1][2].strip() == "status=$?":
            j -= 1
        m = _TO_FILE.search(steps[j - 1][2])
        if len(shown) == 2 and m and m.group(1) == shown[1]:
            return cmd[: steps[j - 1][1] + m.start()].strip()
    return cmd[: steps[n][1]].rstrip().removesuffix(steps[n][0]).rstrip() if n < len(steps) else cmd


# A relative path word after ``cd DIR &&`` (``extract.py``, ``src/a.ts``, ``./run.sh``): joined to DIR, it names the
# object the same call without the ``cd`` names.
_RELATIVE = re.compile(r"^(?:\./)?[\w@+-][\w.@+-]*(?:/[\w.@+-]+)*/?$")
_EXT = r"\.[A-Za-z][A-Za-z0-9]{0,5}"  # a file name's extension (``.py``, ``.tsx``), declared once
_EXTENSION = re.compile(_EXT + "$")
_OPERATORS = ("&&", "||", "|", ";")


def _in_folder(folder: str, cmd: str) -> str | None:
    """``cd DIR && CMD`` as the command it runs when CMD names its objects by relative paths: those paths joined to
    DIR (``cd /r && python3 x.py`` is ``python3 /r/x.py``). None where CMD names no path (``cd a && make``: the
    folder is the object), could leave DIR (another ``cd``, ``pushd``, a multi-line script), runs more than one
    step (``cd a && cat x.py && make``: the later steps still run in DIR), or where DIR is not a path (``cd -``,
    ``cd $D``)."""
    base = folder.strip("'\"").rstrip("/")
    if "\n" in cmd or folder in ("-", "") or folder.startswith("$"):
        return None
    steps = _steps_of(cmd)
    words = _raw_words(cmd)
    if not words or not steps or len(steps) > 1 or any(w in ("cd", "pushd", "popd") for w in words):
        return None
    out, joined, program = [], False, True
    for w in words:
        relative = _RELATIVE.match(w) and ("/" in w or _EXTENSION.search(w)) and w not in (".", "..")
        if relative and (not program or w.startswith("./")):  # a program named by its path is an object too
            path = f"{base}/{w.removeprefix('./')}"
            w, joined = (f'"{path}"' if any(c.isspace() for c in path) else path), True
        out.append(w)
        program = w in _OPERATORS
    return " ".join(out) if joined else None


@lru_cache(maxsize=16384)
def shell_action(command: str) -> str:
    """The command a shell call runs, as the action key compares it: surrounding whitespace, a ``bash -lc`` wrapper,
    ``sleep N &&`` and ``timeout N`` prefixes, a trailing ``| head``/``| tail -n N`` and a ``2>&1`` redirect removed,
    and the blanks between the words of a one-line command collapsed to one space (quoted text kept as written). A
    leading ``cd DIR &&`` is kept: the folder can be the object (``cd a && make`` and ``cd b && make`` build
    different things). A multi-line script keeps its lines (its indentation can be the change)."""
    cmd = unwrap_shell(command) if command[:1].isspace() or command.lstrip()[:2] in _SHELL_STARTS else command
    cmd = cmd.strip()
    cd = ""
    if cmd.startswith("cd"):
        m = _CD.match(cmd)
        if m:
            cd, cmd = f"cd {m.group(1)} &&", cmd[m.end() :]
    while cmd.startswith(("sleep", "timeout")):
        m = _SLEEP.match(cmd) or _TIMEOUT.match(cmd)
        if not m or m.end() >= len(cmd):
            break
        cmd = cmd[m.end() :]
    if "echo" in cmd:
        cmd = _without_labels(cmd)
    while "head" in cmd[-40:] or "tail" in cmd[-40:]:  # the cheap test first: most commands end otherwise
        stripped = _TAIL.sub("", cmd)
        if stripped == cmd or not stripped.strip():
            break
        cmd = stripped
    cmd = cmd.strip()
    if cmd.startswith("set"):
        m = _SET_OPTIONS.match(cmd)
        if m and m.end() < len(cmd):
            cmd = cmd[m.end() :]
    if ("echo" in cmd or "cat " in cmd or cmd.endswith(("true", ":"))) and "\n" not in cmd:
        cmd = _without_report(cmd)
    if "\n" not in cmd and ("  " in cmd or "\t" in cmd or "\r" in cmd or "2>" in cmd):
        words = _raw_words(cmd)
        if words is not None:
            kept = [w for w in words if w not in ("2>&1", "2>/dev/null")]
            cmd = " ".join(kept or words)
    if cd:
        resolved = _in_folder(cd[3:-3], cmd)
        return resolved if resolved is not None else f"{cd} {cmd}"
    return cmd


def action_args(tool: str, args: Any) -> Any:
    """The action arguments of a call: ``args`` without the fields its tool declares commentary or tuning, its shell
    command reduced by ``shell_action``. The very object ``args`` when nothing changes (an undeclared tool, a call
    without such fields)."""
    sem = _BY_NAME.get(tool)
    if sem is None or type(args) is not dict:
        return args
    dropped = sem.dropped
    out = {k: v for k, v in args.items() if k not in dropped} if any(k in dropped for k in args) else None
    for f in sem.shell:
        v = args.get(f)
        if isinstance(v, list):
            script = argv_script(v)
            reduced: Any = shell_action(script) if script is not None else v
        elif isinstance(v, str):
            reduced = shell_action(v)
        else:
            continue
        if reduced != v:
            if out is None:
                out = dict(args)
            out[f] = reduced
    for f in sem.code:
        v = args.get(f)
        if isinstance(v, str) and (reduced := code_action(v)) != v:
            if out is None:
                out = dict(args)
            out[f] = reduced
    return args if out is None else out


# A code-mode cell of one tool call, as Codex writes it: ``const r = await tools.exec_command({…});`` then what prints
# the answer (``text(r.output);``, ``text(JSON.stringify(r))``): no other tool call, nothing else awaited.
_ONE_CALL_CELL = re.compile(
    r"\A\s*(?:(?:const|let|var)\s+\w+\s*=\s*)?await\s+tools\.(\w+)\((\{.*\})\)\s*;?(?P<rest>.*)\Z", re.S
)
# Tuning inside a cell's object literals (``"yield_time_ms":10000``), for cells that are not one call.
_CODE_TUNING = re.compile(r',?\s*"?(?:yield_time_ms|max_output_tokens|max_tokens|timeout_ms)"?\s*:\s*\d+')
_JS_KEY = re.compile(r"[A-Za-z_$][\w$]*")


def js_object(literal: str) -> dict[str, Any] | None:
    """A JavaScript object literal of JSON values (keys bare or quoted, strings in double quotes) as a dict; None for
    anything else (single quotes, expressions, a syntax error)."""
    out: list[str] = []
    i, n, expect_key = 0, len(literal), False
    while i < n:
        ch = literal[i]
        if ch == '"':  # a JSON string, copied whole
            j = i + 1
            while j < n and literal[j] != '"':
                j += 2 if literal[j] == "\\" else 1
            out.append(literal[i : j + 1])
            i, expect_key = j + 1, False
            continue
        if ch in "{,":
            expect_key = True
        elif expect_key and not ch.isspace():
            m = _JS_KEY.match(literal, i)
            if m and literal[m.end() :].lstrip()[:1] == ":":
                out.append(f'"{m.group(0)}"')
                i, expect_key = m.end(), False
                continue
            expect_key = False
        out.append(ch)
        i += 1
    try:
        value = json.loads("".join(out))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def code_call(code: str) -> tuple[str, dict[str, Any]] | None:
    """(tool, arguments) of a code-mode cell that makes one tool call, else None."""
    m = _ONE_CALL_CELL.match(code)
    if not m or "tools." in m.group("rest") or "await" in m.group("rest"):
        return None
    args = js_object(m.group(2))
    return (m.group(1), args) if args is not None else None


@lru_cache(maxsize=4096)
def code_action(code: str) -> str:
    """The action of a code-mode cell: a cell that makes one tool call compares as that call (``tool {action
    arguments}``, the tool's own commentary and tuning dropped and its shell command reduced, by this table); any
    other cell as written, without the wait times and output limits in its object literals."""
    call = code_call(code)
    if call is not None:
        tool, args = call
        return f"{tool} {json.dumps(action_args(tool, args), sort_keys=True, ensure_ascii=False)}"
    return _CODE_TUNING.sub("", code)


# -- result noise ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResultNoise:
    """A header line some tools print around a command's output that changes on every run when the output does not
    (a chunk id, a wall time, a process id). Left in, it would make a stuck poll look like progress."""

    name: str  # the line starts with this name, then ``:`` or a space
    tools: tuple[str, ...]
    formats: tuple[str, ...]
    doc: str


RESULT_NOISE: tuple[ResultNoise, ...] = (
    ResultNoise("Chunk ID", ("exec_command", "write_stdin"), _CODEX, "a random id of the output chunk"),
    ResultNoise(
        "Wall time", ("exec_command", "write_stdin", "shell", "shell_command", "exec", "wait"), _CODEX, "seconds it ran"
    ),
    ResultNoise(
        "Process running with session ID",
        ("exec_command", "write_stdin"),
        _CODEX,
        "the id of a process left running (a new one each run)",
    ),
    ResultNoise(
        "Script running with cell ID",
        ("exec",),
        _CODEX,
        "code mode: the id of a cell left running (a new one each run)",
    ),
    ResultNoise("Original token count", ("exec_command", "write_stdin"), _CODEX, "the size of the output"),
    ResultNoise("Total output lines", ("shell", "shell_command"), _CODEX, "the size of the output"),
    ResultNoise("Process Group PGID", ("run_shell_command",), _GEMINI, "the process group of the command"),
    ResultNoise("Background PIDs", ("run_shell_command",), _GEMINI, "the processes it left running"),
)
# Applied to every result whatever its tool: each name is a line only its tools print.
NOISE_LINE_RE = r"(?m)^(?:" + "|".join(re.escape(n.name) for n in RESULT_NOISE) + r")(?::|\s).*$"
# The same envelope as the fields of a JSON object: a code-mode cell that prints its tool's whole answer
# (``text(JSON.stringify(r))``: ``{"chunk_id":"6d900c","wall_time_seconds":0.2,"exit_code":1,…}``).
NOISE_FIELDS: tuple[str, ...] = ("chunk_id", "wall_time_seconds", "original_token_count")
NOISE_FIELD_RE = r'"(?:' + "|".join(NOISE_FIELDS) + r')"\s*:\s*(?:"[^"]*"|[0-9.eE+-]+)\s*,?'
NOISE_MARKERS: tuple[str, ...] = tuple(n.name for n in RESULT_NOISE) + tuple(f'"{f}"' for f in NOISE_FIELDS)


def _how(t: ToolSemantics, cell: Any) -> str:
    """The last column of ``semantics_table``: the fields read as a shell command, a code-mode cell or a patch."""
    if t.code and not t.shell:
        return cell(t.code) + " (a code-mode cell: `code_action`)"
    if t.patch and not t.shell:
        return cell(t.patch) + " (a patch: `patch_parts`)"
    return cell(t.shell)


def semantics_table() -> str:
    """The table as markdown rows (docs/detectors.md holds it between ``<!-- semantics:start -->`` and
    ``<!-- semantics:end -->``; tests/test_semantics.py keeps the two equal)."""

    def cell(fields: tuple[str, ...]) -> str:
        return ", ".join(f"`{f}`" for f in fields) or "–"

    rows = [
        "| tools | formats | action and object | commentary | tuning | shell command, code or patch |",
        "|---|---|---|---|---|---|",
    ]
    for t in TOOLS:
        rows.append(
            f"| {', '.join(f'`{n}`' for n in t.names)} | {', '.join(t.formats)} | {cell(t.action)} | "
            f"{cell(t.commentary)} | {cell(t.tuning)} | "
            f"{_how(t, cell)} |"
        )
    return "\n".join(rows)


# -- polls: a look at a process that may still be running --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PollShape:
    """A call that looks at a process started earlier, to see whether it is done (docs/detectors.md, "Waiting"):
    repeated while the process still runs, it is waiting, not a loop. ``tools``: the tools of the shape; ``args``:
    which calls of them poll (None: every call); ``shell``: the shell command decides instead (a status view, or a
    command after a wait: ``is_poll``); ``doc``: the shape in words."""

    tools: tuple[str, ...]
    formats: tuple[str, ...]
    doc: str
    args: Any = None  # a predicate on the arguments (a dict), or None
    shell: bool = False


def _no_chars(a: dict[str, Any]) -> bool:
    return not a.get("chars")


def _empty_command(a: dict[str, Any]) -> bool:
    return a.get("command") in ("", None) or bool(a.get("is_input")) and not str(a.get("command") or "").strip()


# A shell command that looks at a run's status: the GitHub CLI's run/check views, a rollout's status.
STATUS_COMMAND = re.compile(
    r"^(?:cd\s+\S+\s*&&\s*)?(?:gh\s+(?:run\s+(?:watch|view|list)|pr\s+checks|workflow\s+view)|"
    r"kubectl\s+rollout\s+status|glab\s+ci\s+(?:status|view))\b"
)
# A look at a background task's output: Claude Code writes what a shell started with ``run_in_background`` prints to
# ``<tmp>/claude-<uid>/<project>/tasks/<id>.output`` (newer versions: ``<project>/<session id>/tasks/``) and says so;
# reading that file (``cat``, ``tail``, ``tail -n 20``, ``tail -20``) is ``BashOutput`` by another name. Nothing in it
# yet is a process that has not spoken yet: still running (``call_poll_status``).
TASK_OUTPUT_READ = re.compile(
    r"^(?:cat|tail(?:\s+-(?:[A-Za-z]+|\d+)(?:\s*\d+)?)*)\s+"
    r"['\"]?\S*/claude[^/\s]*/(?:[^/\s]+/)*tasks/[\w.-]+\.output['\"]?$"
)
# A wait before a look: ``sleep N && <command>`` (or ``sleep N; <command>``).
WAIT_PREFIX = re.compile(r"^\s*(?:cd\s+\S+\s*(?:&&|;)\s*)?sleep\s+\d+(?:\.\d+)?[smhd]?\s*(?:&&|;|\n)\s*\S")
# A call that only waits (``sleep 30``, or ``sleep 30 && echo "Wait complete"``: an echo of fixed words looks at
# nothing, ``LABEL_ECHO``): between two polls, part of the wait.
WAIT_ONLY = re.compile(rf"^\s*sleep\s+\d+(?:\.\d+)?[smhd]?\s*(?:(?:&&|;)\s*{_LABEL_ECHO})?$")

POLLS: tuple[PollShape, ...] = (
    PollShape(
        ("BashOutput", "mcp__acp__BashOutput", "TaskOutput"), _CC, "the output and status of a background shell or task"
    ),
    PollShape(
        ("TeamDelete",),
        _CC,
        'deleting an agent team, refused while a teammate still runs ("Cannot cleanup team with 1 active member(s)"): '
        "tried again, it asks whether the teammate has exited",
    ),
    PollShape(("write_stdin",), _CODEX, "empty `chars` to a running session: read what it printed since", _no_chars),
    PollShape(("wait_agent", "wait"), _CODEX, "wait for a spawned agent, or (code mode) for a cell still running"),
    PollShape(
        ("execute_bash", "run"), _OH, "an empty `command`: more output of the command still running", _empty_command
    ),
    PollShape(
        (
            "Bash",
            "mcp__acp__Bash",
            "exec_command",
            "exec",
            "shell",
            "shell_command",
            "run_shell_command",
            "bash",
            "execute_bash",
            "run",
        ),
        ("claude_code", "codex", "gemini_cli", "pi", "opencode", "openhands", "mini_swe_agent", "swe_agent"),
        "a shell command that is a status view (`gh run watch|view|list`, `gh pr checks`, `kubectl rollout status`, "
        "`glab ci status`), a read of a background task's output file (`cat …/tasks/ID.output`), or any command "
        "after a wait (`sleep N && …`)",
        shell=True,
    ),
)
_POLL_BY_TOOL: dict[str, list[PollShape]] = {}
for _p in POLLS:
    for _name in _p.tools:
        _POLL_BY_TOOL.setdefault(_name, []).append(_p)


@dataclass(frozen=True, slots=True)
class PollStatus:
    """What a poll's result says of the process: a status word that means it still runs, or one that means it ended.
    Structured statuses (``<status>running</status>``, ``"status": "in_progress"``, Codex's ``Process running with
    session ID`` / ``Process exited with code``, code mode's ``Script running with cell ID``) decide first; then words
    of a status view."""

    name: str
    pattern: str
    doc: str


# A status value that means "not done yet".
RUNNING_VALUES = frozenset(
    {"running", "pending", "in_progress", "inprogress", "queued", "waiting", "requested", "started", "timeout"}
)
_STRUCTURED = re.compile(
    r"<(?:status|retrieval_status)>\s*([A-Za-z_ -]+?)\s*</(?:status|retrieval_status)>|"
    r"\"status\"\s*:\s*\"([A-Za-z_ -]+)\"|(Process running with session ID|\AScript running with cell ID)|"
    r"(Process exited with code)",
)
_RUNNING_WORDS = re.compile(
    r"\b(?:in[ _]progress|still running|is running|pending|queued|waiting for|not (?:yet )?(?:finished|complete|"
    r"ready)|Refreshing run status|[1-9]\d* active members?)\b",
    re.I,
)
# `gh run view`'s first line: the run's status glyph, then branch, workflow, "·" and the run id ("* main Release ·
# 13877216420"): `*` in progress, `✓` succeeded, `X` failed (the glyphs of gh's run views).
_GH_RUN_LINE = re.compile(r"\A\s*([*✓X])\s+\S.*·\s*\d+", re.M)
# Without a structured status, the words of a status view that say the run is over.
_ENDED_WORDS = re.compile(
    r"\b(?:completed|succeeded|success|failed|failure|cancelled|canceled|finished|exited)\b", re.I
)


POLL_RESULT_CHARS = 4000  # how much of a poll's result its status is read from


def is_poll(tool: str, args: Any, command: str | None) -> bool:
    """Whether a call is a poll as ``POLLS`` declares them (``command``: the shell command it runs, if any)."""
    shapes = _POLL_BY_TOOL.get(tool)
    if not shapes:
        return False
    if not any(s.shell for s in shapes):
        return any(s.args is None or (isinstance(args, dict) and s.args(args)) for s in shapes)
    if any(not s.shell and (s.args is None or (isinstance(args, dict) and s.args(args))) for s in shapes):
        return True
    if command is None:
        return False
    cmd = unwrap_shell(command).strip() if command.lstrip()[:2] in _SHELL_STARTS else command.strip()
    if WAIT_PREFIX.match(cmd):
        return True
    action = shell_action(cmd)
    return bool(STATUS_COMMAND.match(action) or TASK_OUTPUT_READ.match(action))


def _task_output_read(command: str | None) -> bool:
    return command is not None and ".output" in command and bool(TASK_OUTPUT_READ.match(shell_action(command)))


def call_poll_status(command: str | None, result: str | None) -> str | None:
    """``poll_status`` of a poll's result. A read of a background task's output file says ``running`` when it is empty
    (the process has printed nothing yet) and nothing otherwise: what the process printed is its own output, not a
    status (a log that says "3 pending" is not a run in progress)."""
    if result is not None and _task_output_read(command):
        return "running" if not result.strip() else None
    return poll_status(result)


# Words one of which every shell poll's arguments hold (``WAIT_PREFIX``, ``STATUS_COMMAND``, ``TASK_OUTPUT_READ``): a
# bulk read may keep the results of only the calls whose arguments hold one, and still see every poll
# (tests/test_semantics.py checks it).
POLL_WORDS = ("sleep", "gh", "kubectl", "glab", "tasks/")
# The tools a poll can be made with whatever their arguments say (``POLLS`` shapes that are not shell commands), and
# those whose polls are shell commands (which hold one of ``POLL_WORDS``).
POLL_TOOLS = tuple(sorted(t for t, shapes in _POLL_BY_TOOL.items() if any(not p.shell for p in shapes)))
SHELL_POLL_TOOLS = tuple(sorted(t for t, shapes in _POLL_BY_TOOL.items() if any(p.shell for p in shapes)))
SHELL_KEYS = ("command", "cmd", "script")  # where a call's arguments hold the shell command it runs


def shell_command(a: Any) -> str | None:
    """The shell command a call runs, when its arguments (a dict) hold one (``command``/``cmd``/``script``; Codex's
    argv lists ``["bash", "-lc", "…"]`` give their last element). A one-word ``command`` beside a path is an editor's
    sub-command (``str_replace_editor`` ``view``/``str_replace``), not a shell command."""
    if not isinstance(a, dict):
        return None
    code = a.get("input")
    if isinstance(code, str) and "tools." in code:  # a code-mode cell of one call: that call's command
        call = code_call(code)
        return shell_command(call[1]) if call is not None else None
    for k in SHELL_KEYS:
        v = a.get(k)
        if isinstance(v, str):
            if k == "command" and " " not in v.strip() and any(x in a for x in ("path", "file_path", "file")):
                return None
            return v
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return v[-1] if len(v) >= 3 and v[1] in ("-lc", "-c") else " ".join(v)
    return None


def running_poll(tool: str, args: Any, result: str | None) -> bool:
    """A poll (``POLLS``) whose result says the process still runs: waiting, which the live guard lets run on (the
    process, not the agent, decides when it ends). ``args``: the call's arguments as a dict."""
    if tool not in _POLL_BY_TOOL or result is None:
        return False
    command = shell_command(args)
    return is_poll(tool, args, command) and call_poll_status(command, result) == "running"


def is_wait(command: str | None) -> bool:
    """A shell command that only waits (``sleep 30``)."""
    return command is not None and bool(WAIT_ONLY.match(command))


def poll_status(result: str | None) -> str | None:
    """``running`` when a poll's result says the process is not done yet (a structured status among
    ``RUNNING_VALUES``, or, without one, words of a status view: "in progress", "pending", "queued", "still running"),
    ``ended`` when a structured status says it is (completed, failed, exited) or, without one, words of a status view
    do ("completed", "success", "failed", "cancelled"), None when it says neither."""
    if not result:
        return None
    head = result[:POLL_RESULT_CHARS]
    values = []
    for m in _STRUCTURED.finditer(head):
        if m.group(3):
            values.append("running")
        elif m.group(4):
            values.append("ended")
        else:
            v = (m.group(1) or m.group(2) or "").strip().lower().replace(" ", "_").replace("-", "_")
            values.append("running" if v in RUNNING_VALUES else "ended")
    if values:
        return "running" if "running" in values else "ended"
    gh = _GH_RUN_LINE.match(head)
    if gh:
        return "running" if gh.group(1) == "*" else "ended"
    if _RUNNING_WORDS.search(head):
        return "running"
    return "ended" if _ENDED_WORDS.search(head) else None


# -- blind steps: a move whose result only acknowledges it ----------------------------------------------------------

# A step that moves on from wherever the last one left, and whose result only says it was done: a relative ``cd``
# (``cd ..``, ``cd -``, ``cd sub``), whose silence says nothing of where it got, and a computer-use tool's click, key
# press, typing or scroll, answered "Clicked at (500, 414)". Repeated, each goes one step further (``cd ..`` three
# times climbs three folders; three clicks on a "+" add three passengers), so the same acknowledgement again is no
# evidence of "the same result" (docs/detectors.md, The definition); a screenshot or a listing after them is.
BLIND_ACTIONS = frozenset(
    {"left_click", "right_click", "middle_click", "double_click", "triple_click", "key", "type", "scroll"}
)
# The acknowledgement and nothing else but the browser extension's "Tab Context:" block: a result that goes on (a
# screenshot's image line, "Page navigated to …") says where the step got.
_ACKNOWLEDGEMENT = re.compile(
    r"\A\s*+(?:(?:Left-|Right-|Middle-|Double-|Triple-)?[Cc]licked|Pressed|Typed|Scrolled)\b[^\n]*+\s*+"
    r"(?:Tab Context:(?:\n[ \t]*+(?:-|\u2022)[^\n]*+)*+\s*+)?\Z"
)
_RELATIVE_CD = re.compile(
    r"\Acd\s+(?:-|\.\.(?:[/\\]\.\.)*[/\\]?|(?![/~$\"'\\])[\w.@+-]+(?:[/\\][\w.@+-]+)*[/\\]?)\s*\Z"
)


def blind_step(args: Any, body: str | None) -> bool:
    """Whether a call is a blind step (see above): a relative ``cd`` with no output, or a click, key press, typing or
    scroll (``BLIND_ACTIONS``, the ``action`` of a computer-use tool's arguments) answered only by its
    acknowledgement. ``args``: the call's arguments as a dict; ``body``: its result without the harness's envelope
    (a Codex "Exit code: 0 … Output:" header, a ``<returncode>``)."""
    if not isinstance(args, dict):
        return False
    if args.get("action") in BLIND_ACTIONS:
        return body is not None and bool(_ACKNOWLEDGEMENT.match(body))
    command = shell_command(args)
    return command is not None and not (body or "").strip() and bool(_RELATIVE_CD.match(command.strip()))


# -- permission refusals: the same call refused, whatever tool carries it -------------------------------------------

# A harness's refusal of a call for want of permission, as it opens the result: Claude Code's "Permission to use Edit
# has been denied", "Claude requested permissions to write to F, but you haven't granted it yet", "Tool permission
# request failed: Error: Stream closed" (the prompt that asks the user failed: nothing ran), "This command
# requires approval", "sed command requires approval (…)", "Commands that change directories and perform write
# operations require explicit approval". The call never ran, and sending the same change again, through the same
# tool or another (Edit, an MCP ``edit_file``, ``sed -i``, a Python heredoc), meets the same wall until the user
# grants it: one refusal, whatever its words (``keys.result_key`` gives them one key). An error that only mentions
# an approval ("Pull request #12 requires approval from a code owner") is none.
PERMISSION_REFUSAL = re.compile(
    r"\A\s*+(?:Permission to use \S+ has been denied|Claude requested permissions to \w+ |"
    r"Tool permission request failed|"
    r"(?:This |\w+ )?[Cc]ommands?\b[^\n]{0,100}?\brequires? (?:explicit )?approval\b)"
)


def is_refusal(result: str | None) -> bool:
    """Whether an error result is a permission refusal (``PERMISSION_REFUSAL``)."""
    return bool(result) and bool(PERMISSION_REFUSAL.match(result or ""))


# An edit refused because the text it sent is not in the file: Claude Code's Edit ("String to replace not found"),
# Codex's apply_patch (its lines, "Failed to find expected lines", or its ``@@`` anchor, "Failed to find context"),
# OpenHands' editor ("did not appear verbatim"). An answer to the text sent, not the file's state; ``keys.result_key``
# gives every such refusal one key, so a retried edit whose old text barely changes is one candidate.
TEXT_NOT_FOUND = re.compile(
    r"string to replace not found|failed to find (?:expected lines|context)|did not appear verbatim", re.I
)
ERROR_HEAD = 600  # characters of a result where its error is read (the envelope's first lines)


def is_text_not_found(result: str | None) -> bool:
    """Whether a result's head says the text an edit sent is not in the file (``TEXT_NOT_FOUND``)."""
    return bool(result) and bool(TEXT_NOT_FOUND.search((result or "")[:ERROR_HEAD]))


Path = tuple[str, ...]
# A patch's file line, its operation and its file (``*** Update File: src/app.py``): ``named_paths``' files and
# ``patch_parts``' object.
_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$", re.M)
# The paths a command or a program names: quoted (spaces allowed) and ending in a file name with an extension; bare
# with a folder in them (``src/app.ts``, ``C:\\a\\b.md``); or a bare file name that ends a step or follows a
# redirect (``sed -i 's/a/b/' App.tsx``, ``> notes.md``). Prose words with a dot (``e.g.``, ``os.path``) are none.
_QUOTED_PATH = re.compile(rf"""(['"])([^'"\n]*?\w{_EXT})\1""")
_FOLDER_PATH = re.compile(rf"""(?<![\w'"/.\\-])((?:[A-Za-z]:)?[\w.@+~-]*[/\\][\w.@+\\/~-]*\w{_EXT})(?![\w/\\])""")
_LAST_NAME = re.compile(rf"""(?:(?<=>)|(?<=\s))([\w@+-][\w.@+-]*\w{_EXT})[ \t]*(?=$|[;&|\n])""", re.M)
# Where one disk is spelt three ways: ``C:/``, Git Bash's ``/c/``, WSL's ``/mnt/c/``.
_DRIVE = re.compile(r"^(?:/mnt/[A-Za-z]/|/[A-Za-z]/|[A-Za-z]:/)")


def path_parts(text: str) -> Path:
    """A path as its folders and name, its disk and leading ``./`` dropped, either slash."""
    p = _DRIVE.sub("", text.strip().replace("\\", "/"))
    return tuple(c for c in p.split("/") if c not in ("", "."))


def named_paths(text: str) -> frozenset[Path]:
    """The files a shell command, a program or a patch names (``path_parts`` of each): a patch's files, or the paths
    ``_QUOTED_PATH``, ``_FOLDER_PATH`` and ``_LAST_NAME`` find."""
    found = [f for _, f in _PATCH_FILE.findall(text)] if "*** " in text else []
    if not found:
        found = [m.group(2) for m in _QUOTED_PATH.finditer(text)]
        bare = _QUOTED_PATH.sub(" ", text)
        found += _FOLDER_PATH.findall(bare) + _LAST_NAME.findall(bare)
    return frozenset(p for p in map(path_parts, found) if p)


PATCH_BEGIN = "*** Begin Patch"
# The words every call that applies a patch holds in its (canonical JSON) arguments: the tool's own ``input``, or
# Codex's shell running ``apply_patch`` on one (``["apply_patch", "*** Begin Patch…"]``, a heredoc), which Codex
# intercepts and applies as its apply_patch tool. A bulk engine tests them as literals (``applies_patch``).
PATCH_CALL_WORDS = (PATCH_BEGIN, "apply_patch")


# Tools that send the same kind of edit: Claude Code's MultiEdit is a batch of Edits of one file, refused as an Edit
# is ("String to replace not found in file."), and Zed's ACP bridge serves both under other names. An Edit refused,
# then a MultiEdit of the same text refused the same way, is one question asked again (``judge._same_text_not_found``,
# ``rules.failure_key``).
EDIT_FAMILY: dict[str, str] = {"MultiEdit": "Edit", "mcp__acp__Edit": "Edit", "mcp__acp__MultiEdit": "Edit"}


def edit_family(tool: str) -> str:
    """The tool a change is sent with, as its refusals are compared (``EDIT_FAMILY``; any other tool: itself)."""
    return EDIT_FAMILY.get(tool, tool)


def applies_patch(args: str | None) -> bool:
    """Whether a call's arguments (canonical JSON) hold a patch applied with ``apply_patch`` (``PATCH_CALL_WORDS``):
    a change, whatever tool runs it."""
    return args is not None and all(w in args for w in PATCH_CALL_WORDS)


@dataclass(frozen=True, slots=True)
class PatchParts:
    """What a patch is about, as an edit's arguments are: ``files`` the object (each ``*** Update|Add|Delete File:``
    with its operation), ``old`` the lines it expects to find (removed lines, context lines and ``@@`` anchors), the
    text that may drift when a refused patch is sent again. Its added lines are the fix being tried, like an edit's
    ``new_string``: left out."""

    files: frozenset[tuple[str, str]]
    old: str


PATCH_END = "*** End Patch"
PATCH_OLD_CHARS = 8000  # how much of a patch's old text its drift is read from (a patch can be megabytes)


def patch_parts(text: str) -> PatchParts | None:
    """The parts of a Codex-style patch (``*** Begin Patch`` … ``*** End Patch``) found in ``text`` (a tool's
    ``input``, or a shell command ``apply_patch <<'EOF' …`` / ``apply_patch "*** Begin Patch…"``); None without one.
    Its files are all read; its old text up to ``PATCH_OLD_CHARS`` (what may drift is compared on that head, as a
    result is on its head). The caller (``judge.action``) keeps what it made of each call."""
    at = text.find(PATCH_BEGIN)
    if at < 0:
        return None
    end = text.find(PATCH_END, at)
    files: set[tuple[str, str]] = set()
    old: list[str] = []
    size = 0
    for line in text[at : end if end >= 0 else len(text)].splitlines():
        m = _PATCH_FILE.match(line)
        if m:
            files.add((m.group(1).lower(), m.group(2)))
        elif size >= PATCH_OLD_CHARS:
            continue
        elif line.startswith("@@"):
            old.append(line[2:].strip())
            size += len(old[-1]) + 1
        elif line[:1] in ("-", " ") and not line.startswith("*** "):
            old.append(line[1:])
            size += len(old[-1]) + 1
    return PatchParts(frozenset(files), "\n".join(old))


def same_target(a: frozenset[Path], b: frozenset[Path]) -> bool:
    """Whether two calls' files share one: one path the end of the other (a relative ``docs/notes.txt`` after
    ``cd D:/repo`` is ``D:\\repo\\docs\\notes.txt``). Empty paths name nothing."""
    return any(x and y and (x[-len(y) :] == y if len(y) <= len(x) else y[-len(x) :] == x) for x in a for y in b)
