"""What a careful engineer would call a loop: the judgement the findings rules apply to every candidate episode.

The signals find repetition; repetition is not yet a loop. A loop is the *same action on the same object* (a file, a
search pattern, a URL, a command's target) repeated with the same result or error and no fix in between, or
degenerate text: one sentence or block emitted again and again. This module decides, for a candidate episode the
signals found, whether it is one, whether it was stuck, and says why in one line. It is pure Python over a few fields
of each call (tool, canonical arguments, the head of the result, the error flag), so the streaming reference
(``detect/stream/episodes.py``) and the vectorised scan (``detect/vector/episodes.py``) call the same code and give the
same findings. The stored signals and each guard's replay keep their own notion of failure: only findings classify.

What is *not* a loop, by rule:
- different commands that fail: debugging, not retrying (a failure run is split where the object changes);
- an answer that is not an error: "no match" from grep/rg/find-style searches, a non-zero exit of ``test``, ``diff``,
  ``cmp``, ``git diff --quiet``;
- failures that are not the agent's retries: parallel-batch cascades ("Sibling tool call errored", "Cancelled:
  parallel tool call") and input-validation errors;
- calls on different objects that share boilerplate (``sed -n '1,200p' a.py`` / ``b.py``, ``bash -lc``, ``workdir``);
- a repeat after a successful change of state (an edit, a ``sed -i``, a write): it tests the change;
- plan/todo updates whose content changes, paging through a file (offsets are part of the object);
- documents with repeated structure (fenced code, tables, list and heading markup) and placeholder results ("File
  unchanged since last read": never same-result evidence).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from analyzer.detect.keys import action_json, jaccard, normalize_result
from analyzer.detect.rules import (
    MIN_FORMAT_REFUSALS,
    MIN_REPEATS,
    MIN_SENTENCE,
    MIN_SHORT_REPEATS,
    MIN_TEXT_WORDS,
    SAME_REPLY,
    SIMILARITY,
    WINDOW,
    is_mutating,
)
from analyzer.detect.semantics import (
    ERROR_HEAD,
    PATCH_BEGIN,
    SHELL_STAGE,
    SHELL_STEP,
    TEXT_NOT_FOUND,
    PatchParts,
    action_args,
    blind_step,
    call_poll_status,
    edit_family,
    is_poll,
    is_refusal,
    is_text_not_found,
    is_wait,
    named_paths,
    patch_parts,
    path_parts,
    same_target,
    semantics,
    shell_command,
    shell_words,
)

# The judgement reads the same few calls again and again (every link, gap and round of a candidate compares them):
# its pure functions of a result or a call are memoised, bounded by this many entries (results are heads of at most
# ``rules.RESULT_HEAD`` characters).
_RESULTS = 4096
_COMMANDS = 16384  # argument texts and commands (``action`` keeps its own, larger cache)


@dataclass(frozen=True, slots=True)
class CallView:
    """What the judgement reads of one call."""

    tool: str
    args: str | None  # canonical JSON
    result: str | None  # the head of the result text (``rules.RESULT_HEAD`` characters); None without a result
    is_error: bool | None
    turn: str | None = None  # the assistant message that issued it (calls issued together share it)


@dataclass(frozen=True, slots=True)
class Judged:
    """A kept episode: its calls (positions), whether it was stuck, and why, in one line a person reads. ``kind``:
    the kind it is reported as when the judgement found another than the candidate's (``waiting``), else None."""

    positions: list[int]
    stuck: bool
    why: str
    kind: str | None = None


# -- what a call is about ----------------------------------------------------------------------------------------------

_CODE_KEYS = ("code",)


def _key(k: str) -> str:
    """An argument name in one spelling: ``old_string``, ``oldString`` and ``old-string`` are one key."""
    return k.lower().replace("_", "").replace("-", "")


# Keys that name what a structured call is about; their values must be equal for two calls to act on one object.
_OBJECT_KEYS = frozenset(
    map(
        _key,
        (
            "file_path",
            "path",
            "filepath",
            "filename",
            "file",
            "notebook_path",
            "target_file",
            "target",
            "url",
            "uri",
            "directory",
            "dir",
            "folder",
            "pattern",
            "query",
            "regex",
            "glob",
            "search",
            "q",
            "selector",
            "index",
            "element",
            "element_id",
            "ref",
            "name",
            "npc",
            "recipient",
            "to",
            "id",
            "key",
            "offset",
            "limit",
            "line",
            "start_line",
            "end_line",
            "view_range",
            "page",
            "range",
            "start",
            "end",
            "line_number",
            "insert_line",
            "old_str_line",
        ),
    )
)
# Free text whose wording may drift while the action stays the same (a retried edit's old text, a restated message).
_DRIFTING_KEYS = frozenset(
    map(
        _key,
        (
            "old_string",
            "old_str",
            "old_text",
            "to_replace",
            "old",
            "search_text",
            "message",
            "content_old",
            "thought",
            "text",
            "prompt",
            "instruction",
            "question",
        ),
    )
)
_NAMED_KEYS = _OBJECT_KEYS | _DRIFTING_KEYS  # a structured call names its object or drifting text
# What varies without changing the action: the fix being tried, presentation and limits. A declared tool's commentary
# and tuning (``semantics.TOOLS``) are dropped before these; the names below also cover the tools the table leaves at
# the default.
_IGNORED_KEYS = frozenset(
    map(
        _key,
        (
            "new_string",
            "new_str",
            "new_text",
            "new_content",
            "content",
            "replacement",
            "replace",
            "new",
            "description",
            "timeout",
            "timeout_ms",
            "max_output",
            "max_output_tokens",
            "workdir",
            "cwd",
            "justification",
            "yield_time_ms",
            "with_escalated_permissions",
            "sandbox_permissions",
            "is_background",
            "run_in_background",
            "security_risk",
            "explanation",
            "summary",
        ),
    )
)
# (PowerShell's grep is ``Select-String``, its pattern ``-Pattern``.)
_SEARCH_PROGRAMS = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "git-grep", "glob", "Select-String", "sls"}
)
_WRAPPERS = frozenset({"cd", "sleep", "export", "source", ".", "set", "true", "wait", "clear", "pushd", "popd"})
_PREFIXES = frozenset({"timeout", "time", "nice", "nohup", "env", "sudo", "stdbuf", "xargs"})
_PATTERN_FLAGS = frozenset({"-S", "-G", "--grep", "-e", "--regexp", "-Pattern"})  # git log -S X, grep -e X
_REDIRECT_WORD = re.compile(r"^(?:\d*|&)[<>]")  # a word that redirects: `2>&1`, `>`, `2>err`
_PATHLIKE = re.compile(r"^(?:[~./]|[A-Za-z]:\\|https?://)|/|\.[A-Za-z0-9]{1,6}$")


@dataclass(frozen=True, slots=True)
class Action:
    """What a call is about: the program (or tool), the paths it names, the rest of its target (search patterns,
    code, message text), and words of the drifting parts for a near-identical comparison."""

    tool: str
    program: str
    paths: frozenset[str]
    exact: tuple[str, ...]  # must be equal (search patterns, object keys, structured values)
    drifting: frozenset[str]  # words of the parts that may drift (code, old text, messages)
    search: bool
    options: tuple[tuple[str, str], ...] = ()  # --name=value options: one name with two values asks two things
    objects: frozenset[str] = frozenset()  # a command's positional words: what it acts on
    valued: frozenset[str] = frozenset()  # words right after a flag: that flag's value, or a positional word


def _args(args: str | None) -> Any:
    if not args:
        return {}
    try:
        return orjson.loads(args)
    except orjson.JSONDecodeError:
        return {"raw": args}


@lru_cache(maxsize=_COMMANDS)
def command_text(args: str | None) -> str | None:
    """The shell command a call runs, when its arguments hold one (``semantics.shell_command``)."""
    return shell_command(_args(args))


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[A-Za-z0-9_]{2,}", text.lower()))


def _tokens(segment: str) -> list[str]:
    return list(_split(segment))


# ``shlex.split(posix=True)``, faster: ``semantics.shell_words``.


@lru_cache(maxsize=_COMMANDS)
def _split(segment: str) -> tuple[str, ...]:
    """Shell words (``shlex``'s, faster: every command is split again for each question)."""
    try:
        return tuple(shell_words(segment))
    except ValueError:
        return tuple(segment.split())


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1([^\n]*)\n(.*?)(?:\n\2\s*(?:\n|$)|\Z)", re.S)


@lru_cache(maxsize=_COMMANDS)
def _unwrap(command: str) -> str:
    cmd = command.strip()
    for _ in range(3):  # bash -lc '…' (possibly nested)
        toks = _tokens(cmd) if cmd.count("\n") < 50 else cmd.split()[:3]
        if len(toks) >= 3 and toks[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and toks[1] in ("-c", "-lc"):
            cmd = toks[2]
        else:
            break
    return cmd


_SWE_EDIT = re.compile(r"^(\s*edit\s+\d+:\d+)\n(.*?)(?:\nend_of_edit\s*$|\Z)", re.S)


def _steps(command: str) -> tuple[list[list[str]], str]:
    """The token lists of the command's steps, wrappers (``bash -lc``, ``cd x &&``, ``sleep 5;``, ``timeout 60``,
    ``export``, ``… | head -n 20``) removed, and the text of its heredoc bodies (content, not the action; so is the
    replacement text of a SWE-agent ``edit N:M`` command)."""
    cmd = _unwrap(command)
    bodies: list[str] = []
    m = _SWE_EDIT.match(cmd)
    if m:
        bodies.append(m.group(2))
        cmd = m.group(1)

    def keep_body(m: re.Match[str]) -> str:
        bodies.append(m.group(4))
        return f"<<HEREDOC{m.group(3)}\n"

    cmd = _HEREDOC.sub(keep_body, cmd)
    steps = []
    for seg in SHELL_STEP.findall(cmd):
        # a pipeline is about its first step (`grep x f | head` is a grep), past stages that only feed it words
        # (`echo PASS | sudo -S …` is the sudo)
        stages = [t.strip() for t in SHELL_STAGE.findall(seg)]
        while len(stages) > 1 and _tokens(stages[0])[:1] in (["echo"], ["printf"], ["yes"]):
            stages = stages[1:]
        toks = _tokens(stages[0]) if stages else []
        while toks and (toks[0] in _PREFIXES or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", toks[0])):
            takes_value = ("-u", "-g") if toks[0] == "sudo" else ()  # sudo -u USER: the user is no program
            toks = toks[1:]
            while toks and (toks[0].startswith("-") or re.fullmatch(r"\d+[smh]?", toks[0])):
                toks = toks[2:] if toks[0] in takes_value else toks[1:]
        if len(toks) == 3 and toks[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and toks[1] in ("-c", "-lc"):
            inner, more = _steps(toks[2])  # `sudo -u x bash -c '…'` runs the script
            steps.extend(inner)
            if more:
                bodies.append(more)
            continue
        if toks and toks[0].rsplit("/", 1)[-1] not in _WRAPPERS:
            steps.append(toks)
    return steps, "\n".join(bodies)


# A shell command that runs apply_patch first (after a ``cd``): ``apply_patch <<'EOF'``, Codex's argv
# ``["apply_patch", "*** Begin Patch…"]``; not a patch inside another program's heredoc or an echo.
_RUNS_APPLY_PATCH = re.compile(r"[ \t]*(?:cd[ \t]+\S+[ \t]*&&[ \t]*)?apply_patch\b")


def _patch(tool: str, args: str | None, command: str | None) -> PatchParts | None:
    """The patch a call applies: a field the tool's semantics declare a patch (``apply_patch``'s ``input``), or a
    shell command that runs ``apply_patch`` on one (Codex's ``["apply_patch", "*** Begin Patch…"]``, a heredoc)."""
    declared = semantics(tool)
    if declared is not None and declared.patch:
        a = _args(args)
        if not isinstance(a, dict):
            return None
        text = next((v for f in declared.patch if isinstance(v := a.get(f), str)), None)
        return patch_parts(text) if text is not None else None
    if command is not None and PATCH_BEGIN in command and _RUNS_APPLY_PATCH.match(_unwrap(command)):
        return patch_parts(command)
    return None


@lru_cache(maxsize=65536)
def action(tool: str, args: str | None) -> Action:
    command = command_text(args)
    patch = _patch(tool, args, command)
    if patch is not None:  # an edit: its files are the object, its old lines may drift (an Edit's ``old_string``)
        return Action(
            tool.lower(),
            "apply_patch",
            frozenset(f for _, f in patch.files),
            tuple(sorted(f"{op} {f}" for op, f in patch.files)),
            _words(patch.old),
            False,
        )
    if command is not None:
        steps, bodies = _steps(command)
        programs, paths, exact, words = [], set(), [], [bodies]
        options: list[tuple[str, str]] = []
        objects: set[str] = set()
        valued: set[str] = set()
        search = False
        for toks in steps:
            program = toks[0].rsplit("/", 1)[-1]
            if program == "git" and len(toks) > 1:
                program = f"git-{toks[1]}"
                toks = toks[1:]
            programs.append(program)
            is_search = program in _SEARCH_PROGRAMS or program == "git-grep"
            search = search or is_search
            pattern_first = is_search and program not in ("find", "fd", "locate")  # grep PATTERN [PATH...]
            flag = ""  # the flag just before this word: the word may be its value
            says = program in ("echo", "printf")  # its words are a message, not an object
            for t in toks[1:]:
                before, flag = flag, ""
                if _REDIRECT_WORD.match(t):  # `2>&1`, `> log`: where output goes, like a flag (its target may follow)
                    flag = t
                    continue
                if t.startswith("-"):
                    if "=" in t:  # --option=value: the same option with another value asks another thing
                        name, _, value = t.partition("=")
                        options.append((name, value))
                    else:
                        flag = t
                    continue
                if re.fullmatch(r"\d+[smhkKMG%]?", t):  # a flag's number (--retry 5, -n 20): not the object
                    continue
                if "\n" in t:  # a program of many lines (`python -c "…"`): its lines are the action, as a script's
                    exact.append(t)
                    continue
                if pattern_first:
                    exact.append(t)
                    pattern_first = False
                    continue
                if (_PATHLIKE.search(t) or is_search) and " " not in t and len(t) < 300:
                    paths.add(t.rstrip("/"))
                elif is_search or before in _PATTERN_FLAGS:
                    exact.append(t)  # a search pattern: another one asks another question
                else:
                    words.append(t)
                    if not (says or re.search(r"\s", t)):  # (echo's words and quoted text are no object)
                        (valued if before else objects).add(t)
        return Action(
            tool.lower(),
            "+".join(programs),
            frozenset(paths),
            tuple(exact),
            _words(" ".join(words)),
            search,
            tuple(sorted(options)),
            frozenset(objects),
            frozenset(valued),
        )
    a = action_args(tool, _args(args))  # commentary and tuning, as the tool's semantics declare them, dropped
    if isinstance(a, dict) and not any(_key(k) in _NAMED_KEYS for k in a):
        code = next((a[k] for k in _CODE_KEYS if isinstance(a.get(k), str)), None)
        if code is not None:  # run_ipython / python tools: the code is the action, and it may drift
            return Action(tool.lower(), tool.lower(), frozenset(), (), _words(code), False)
    if not isinstance(a, dict):
        return Action(tool.lower(), tool.lower(), frozenset(), (orjson.dumps(a).decode(),), frozenset(), False)
    exact, drifting, paths = [], [], []
    for name in sorted(a):
        v, k = a[name], _key(name)
        if k in _IGNORED_KEYS:
            continue
        if k in _DRIFTING_KEYS and isinstance(v, str):
            drifting.append(v)
        elif k in _OBJECT_KEYS and isinstance(v, str) and _PATHLIKE.search(v):
            paths.append(v.rstrip("/"))
        else:
            exact.append(f"{k}={orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()}")
    search = tool.lower() in ("grep", "glob", "search", "find", "search_files", "grep_search", "file_search")
    return Action(tool.lower(), tool.lower(), frozenset(paths), tuple(exact), _words(" ".join(drifting)), search)


def _nested_scope(a: frozenset[str], b: frozenset[str]) -> bool:
    """One search scope inside the other (``django`` and ``django/core/management``): the same question asked of a
    part of the same tree."""
    if len(a) != 1 or len(b) != 1:
        return False
    (x,), (y,) = a, b
    return x == y or y.startswith(x.rstrip("/") + "/") or x.startswith(y.rstrip("/") + "/")


def same_object(a: Action, b: Action) -> bool:
    """Two calls act on one object: the same tool and program, the same paths (for a search, the same pattern over
    the same or a nested scope), the same exact parts (search patterns: a different pattern is a different
    question), the same positional words (a flag's value may drift), and drifting parts that are near-identical."""
    if a.tool != b.tool or a.program != b.program or a.exact != b.exact:
        return False
    if a.options and b.options:
        mine = dict(a.options)
        if any(mine.get(name, value) != value for name, value in b.options):
            return False
    if a.paths != b.paths and not (a.search and b.search and _nested_scope(a.paths, b.paths)):
        return False
    # every positional word of one is a word of the other: `make all` is `make -j2 all` (is `-j2` given a value? the
    # words cannot say), `ssh db-1 uptime` is not `ssh db-2 uptime`
    if not (a.objects <= b.objects | b.valued and b.objects <= a.objects | a.valued):
        return False
    if a.drifting == b.drifting:
        return True
    return bool(a.drifting and b.drifting) and jaccard(a.drifting, b.drifting) >= SIMILARITY


# -- what a result says --------------------------------------------------------------------------------------------


class _Caseless:
    """A case-insensitive pattern and literal words one of which every match contains. On ASCII text (where ``re.I``
    folds only A-Z) a text holding none of them, lower-cased, cannot match: the regex, ~50x slower than the test
    for the words, runs only on the texts that could match and on the rest (non-ASCII) as before."""

    __slots__ = ("regex", "words")

    def __init__(self, pattern: str, words: tuple[str, ...], flags: int = 0) -> None:
        self.regex = re.compile(pattern, re.I | flags)
        self.words = words

    def _may_match(self, text: str) -> bool:
        if not text.isascii():
            return True
        low = text.lower()
        return any(w in low for w in self.words)

    def search(self, text: str) -> re.Match[str] | None:
        return self.regex.search(text) if self._may_match(text) else None

    def sub(self, repl: str, text: str) -> str:
        return self.regex.sub(repl, text) if self._may_match(text) else text


_CASCADE_TEXTS = (
    "sibling tool call errored",
    "cancelled: parallel tool call",
    "cancelled because another tool call",
    "inputvalidationerror",
    "<tool_use_error>",
    "invalid tool parameters",
    "tool input validation",
)
_CASCADE = _Caseless("|".join(map(re.escape, _CASCADE_TEXTS)), _CASCADE_TEXTS)
# A refusal in the harness's validation envelope that is no invalid call: the file changed under the agent since it
# read it (a linter, a formatter, another writer). Writing again the same way meets the same refusal.
# Of these, "not found" answers the text sent, not the file's state: another old text is another question ("is X in
# the file?"), as another search pattern is, so only the same text again, or barely changed, is a retry
# (``semantics.TEXT_NOT_FOUND``).
_STATE_ERROR = re.compile(rf"modified since read|unexpectedly modified|{TEXT_NOT_FOUND.pattern}", re.I)
# A change refused for its own text (an old text not in the file, a malformed patch) or for a file it has not read:
# the answer is about that call and that file.
_SELF_REFUSAL = re.compile(rf"{TEXT_NOT_FOUND.pattern}|invalid (?:hunk|patch)|has not been read yet", re.I)
_PLACEHOLDER = re.compile(
    r"^\s*(?:File unchanged since last read|\(identical to result|identical to result [^\n]*"
    r"\)?\s*$)",
    re.I,
)
_EXIT = _Caseless(
    r"(?:<returncode>|Exit code:?|exit code|exited with code|Process exited with code)\s*(-?\d+)",
    ("<returncode>", "exit code", "exited with code"),
)
_OUTPUT_NOISE = _Caseless(
    r"<returncode>-?\d*</returncode>|</?returncode>|</?output>|</?warning>|^\s*(?:Exit code|Wall time|"
    r"Chunk ID|Original token count|Output|Process exited with code)[^\n]*$|\[Command finished[^\]]*\]",
    (
        "returncode>",
        "output",
        "warning>",
        "exit code",
        "wall time",
        "chunk id",
        "original token count",
        "process exited with code",
        "[command finished",
    ),
    re.M,
)
_ERROR_TEXT = re.compile(
    r"^\s*\[?(?:Your proposed edit has introduced new syntax error|No replacement was performed|"
    r"ERROR:|Error:|error:|Traceback \(most recent call last\)|E999|SyntaxError|No such file or "
    r"directory|command not found|bash: .*: No such file|Element with index \d+ not found)",
    re.M,
)
# A reply the harness refused before anything ran (mini-swe-agent's "EXACTLY ONE action", a parse error): the
# "call" is the reply's format, not the command it quoted.
_FORMAT_ERROR = _Caseless(
    r"EXACTLY ONE action|found \d+ actions|Please format your (?:action|response)|"
    r"could not parse your (?:action|response)|Your (?:action|response) was not formatted",
    ("exactly one action", " actions", "please format your ", "could not parse your ", " was not formatted"),
)
_NO_MATCH = re.compile(
    r"^\s*(?:No matches found|No files found|No results|Found 0 (?:files|matches)|0 matches)\b", re.I
)


def _exit_code(result: str | None) -> int | None:
    if not result:
        return None
    m = _EXIT.search(result[:400])
    return int(m.group(1)) if m else None


@lru_cache(maxsize=_RESULTS)
def _body(result: str | None) -> str:
    """A result without its envelope (return code tags, exit-code and timing lines)."""
    return _OUTPUT_NOISE.sub("", normalize_result(result or "")).strip()


@lru_cache(maxsize=_RESULTS)
def format_error(c: CallView) -> bool:
    """The harness refused the reply's format: the quoted command never ran."""
    return bool(c.result) and bool(_FORMAT_ERROR.search((c.result or "")[:400]))


@lru_cache(maxsize=_RESULTS)
def is_placeholder(result: str | None) -> bool:
    return bool(result) and bool(_PLACEHOLDER.match(result or ""))


def is_answer(c: CallView) -> bool:
    """A non-zero exit that answers the question: a search that found nothing, a test/diff that said "different"."""
    act = action(c.tool, c.args)
    body = _body(c.result)
    if act.search or c.tool.lower() in ("grep", "glob"):
        return not body or bool(_NO_MATCH.match(body))
    if act.program.split("+")[0] in ("test", "[", "[[", "diff", "cmp", "git-diff") and _exit_code(c.result) in (
        1,
        None,
    ):
        return True
    return False


@lru_cache(maxsize=_RESULTS)
def failed(c: CallView) -> bool:
    """A real failure of the agent's own action: flagged as an error or ending with a non-zero exit or an error
    message, and neither an answer, a cascade of another call's failure, an input-validation refusal nor a
    placeholder."""
    if c.result is None or is_placeholder(c.result):
        return False
    head = c.result[:ERROR_HEAD]
    if _CASCADE.search(head) and not _STATE_ERROR.search(head):
        return False
    code = _exit_code(c.result)
    flagged = bool(c.is_error) or (code is not None and code != 0) or bool(_ERROR_TEXT.search(head))
    return flagged and not is_answer(c)


_DIGITS = re.compile(r"\d+")
# Arguments that name who a message goes to (a person, an NPC, a channel's member).
_RECIPIENT_KEYS = frozenset(map(_key, ("npc", "npc_name", "recipient", "recipients", "to")))


def is_message(c: CallView) -> bool:
    """A message to another party: the call names its recipient. The result is that party's reply, text written by
    someone else, whose wording changes from one reply to the next when what it says does not."""
    a = _args(c.args)
    return isinstance(a, dict) and any(_key(k) in _RECIPIENT_KEYS for k in a)


# A command killed at its time limit: Codex's "command timed out after N milliseconds" or exit code 124 (its tool's
# limit, as GNU `timeout`'s), Claude Code's "Command timed out after 2m 0.0s".
_TIMED_OUT = re.compile(
    r"\b(?:command )?timed out after \d|^\s*(?:Exit code:?|Process exited with code) 124\b", re.I | re.M
)


class ResultKey(NamedTuple):
    """What ``alike`` compares of a result, declared once (``_came_back`` keeps sets of them): the body with numbers
    masked; a failure's error signature ("" for a call that did not fail, or was killed at its time limit); a message
    reply's words (None for any other result)."""

    body: str
    signature: str
    words: frozenset[str] | None


@lru_cache(maxsize=_RESULTS)
def result_key(c: CallView) -> ResultKey | None:
    """The comparison key of a call's result; None when it has no comparable result (none, a placeholder, or the
    acknowledgement of a blind step: ``semantics.blind_step``)."""
    if c.result is None or is_placeholder(c.result) or blind_step(_args(c.args), _body(c.result)):
        return None
    body = _comparable(c.result)
    bad = failed(c)
    words = _words(body) if not bad and is_message(c) else None
    # a run killed at its time limit has no error of its own to compare: what it printed before the cut is its result
    # (a build that got further than the last time made progress)
    signed = bad and not _TIMED_OUT.search(c.result[:ERROR_HEAD])
    return ResultKey(body, _error_signature(c.result) if signed else "", words)


def alike(a: CallView, b: CallView) -> bool | None:
    """Whether two results say the same thing (ignoring numbers such as element indices, line numbers and ids);
    None when either has no comparable result (none, or a placeholder). Two replies to messages say the same thing
    when their words pass the shared-token bar (``SIMILARITY``), as two assistant texts do: a person restating the
    same request in other words has given no new answer."""
    ka, kb = result_key(a), result_key(b)
    if ka is None or kb is None:
        return None
    if ka.body == kb.body:
        return True
    if ka.words is not None and kb.words is not None:
        return jaccard(ka.words, kb.words) >= SIMILARITY
    # two failures say the same thing when their error says the same thing, whatever code or output they echo
    return ka.signature != "" and ka.signature == kb.signature


@lru_cache(maxsize=_RESULTS)
def _comparable(result: str) -> str:
    """A result's body with numbers masked and whitespace collapsed: what ``alike`` compares."""
    return " ".join(_DIGITS.sub("#", _body(result)).split())


_ERROR_LINE = re.compile(
    r"error|exception|failed|fatal|not found|no such|cannot|could not|invalid|denied|refused", re.I
)


@lru_cache(maxsize=_RESULTS)
def _error_signature(result: str | None) -> str:
    """What an error says: its first line and its first line naming an error, numbers and quoted text masked."""
    lines = [ln.strip() for ln in _body(result).splitlines() if ln.strip()]
    if not lines:
        return ""
    named = next((ln for ln in lines if _ERROR_LINE.search(ln)), "")
    sig = f"{lines[0]}\n{named}"
    return _DIGITS.sub("#", re.sub(r"(['\"`]).*?\1", "…", sig))


# -- changes of state ------------------------------------------------------------------------------------------------

_WRITE_PROGRAMS = frozenset(
    {
        "rm",
        "mv",
        "cp",
        "mkdir",
        "touch",
        "ln",
        "chmod",
        "chown",
        "install",
        "truncate",
        "tee",
        "patch",
        "ed",
        "dd",
        "unzip",
        "tar",
        "rsync",
        "edit",
        "create",
        "apply_patch",
    }
)
_WRITE_GIT = frozenset(
    {
        "git-apply",
        "git-am",
        "git-checkout",
        "git-restore",
        "git-reset",
        "git-stash",
        "git-commit",
        "git-merge",
        "git-rebase",
        "git-cherry-pick",
        "git-rm",
        "git-mv",
        "git-switch",
        "git-pull",
    }
)
_INSTALLERS = frozenset(
    {"pip", "pip3", "uv", "npm", "pnpm", "yarn", "cargo", "apt", "apt-get", "brew", "conda", "go", "gem"}
)
_CODE_WRITES = re.compile(
    r"\.write_text\(|\.write\(|open\([^)]*['\"][wa]b?\+?['\"]|edit_file|create_file|"
    r"append_file|insert_content|os\.(?:remove|rename|replace)|shutil\."
)


@lru_cache(maxsize=_COMMANDS)
def _shell_writes(command: str) -> bool:
    """A shell command that writes files or installs: a writing program, ``sed -i``, a redirect to a file, a
    heredoc into a file, ``git checkout``/``apply``…, a package install, Python code that writes."""
    steps, _ = _steps(command)
    for toks in steps:
        program = toks[0].rsplit("/", 1)[-1]
        args = toks[1:]
        if program in _WRITE_PROGRAMS or (program == "git" and args and f"git-{args[0]}" in _WRITE_GIT):
            return True
        if program in ("sed", "perl") and any(t.startswith("-") and "i" in t.lstrip("-") for t in args):
            return True
        if program in _INSTALLERS and any(t in ("install", "add", "i", "get") for t in args[:2]):
            return True
        if program.startswith("python") and "-c" in args and _CODE_WRITES.search(" ".join(args)):
            return True
    bare = _QUOTED.sub("''", _HEREDOC.sub(lambda m: f"<<{m.group(2)}{m.group(3)}\n", _unwrap(command)))
    return bool(_REDIRECT.search(bare))


_QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")
# A redirect into a file (not 2>&1, >&2, >/dev/null), outside quoted text; the file may be quoted (`> "$DIR/a.txt"`,
# whose quotes ``_shell_writes`` has emptied to `''`).
_REDIRECT = re.compile(r"(?<![0-9&>-])>{1,2}\s*(?!&|/dev/null|\s*$)[\w./~$'\"-]")


@lru_cache(maxsize=_RESULTS)
def changed_state(c: CallView) -> bool:
    """A successful call that changed something: an edit/write tool, or a shell command that writes files or
    installs (``sed -i``, a redirect, ``tee``, ``git checkout``, a heredoc, ``pip install`` …). An edit tool whose
    call came back an error changed nothing, whatever the error (a refusal in the harness's envelope such as "Found 21
    matches of the string to replace", a cascade: not the agent's own failure, yet no edit was made)."""
    if failed(c) or c.result is None and c.is_error:
        return False
    if is_mutating(c.tool):
        return not c.is_error
    cmd = command_text(c.args)
    if cmd is None:
        a = _args(c.args)
        code = a.get("code") if isinstance(a, dict) else None
        return isinstance(code, str) and bool(
            re.search(
                r"edit_file|create_file|append_file|insert_content|"
                r"\.write\(|open\([^)]*['\"][wa]",
                code,
            )
        )
    return _shell_writes(cmd)


# -- the judgement ---------------------------------------------------------------------------------------------------


def _label(c: CallView, width: int = 60) -> str:
    cmd = command_text(c.args)
    s = f"{c.tool}: {cmd}" if cmd is not None else f"{c.tool} {c.args or ''}"
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _result_words(c: CallView) -> str:
    if failed(c):
        return "the same error"
    body = _body(c.result)
    return "the same empty result" if not body else "the same result"


View = Callable[[int], CallView]
Between = Callable[[int, int], Sequence[int]]
# A kind's judgement: (positions, period, view, between) -> the episodes the candidate really holds.
CallJudge = Callable[[Sequence[int], int | None, View, Between], list[Judged]]


def judge_calls(kind: str, positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    """The episodes a candidate of ``kind`` (a kind of call episode: ``CALL_JUDGES``) really holds: none, one, or
    (a failure run whose object changes, a window with a fix between its occurrences) several. ``view(p)`` gives a
    call; ``between(a, b)`` the top-level positions strictly between two of the candidate's calls in its user turn.
    A candidate that starts by polling a process that still runs is first a ``waiting`` episode (``_waiting``); what
    follows the wait is judged as its kind."""
    if kind in WAITING_FROM:
        waited = _waiting(kind, positions, period, view)
        if waited is not None:
            judged, rest = waited
            block = period if kind == "cycle" and period else 1
            more = CALL_JUDGES[kind](rest, period, view, between) if len(rest) // block >= MIN_REPEATS else []
            return [judged, *more]
    return CALL_JUDGES[kind](positions, period, view, between)


# -- waiting -------------------------------------------------------------------------------------------------------

# The kinds of candidate a wait is found in: polls of one process repeat identically (streak), between other calls
# (window), with a lengthened wait or a drifting flag (drift), or alternating with a bare ``sleep`` (cycle).
WAITING_FROM = frozenset({"streak", "window", "drift", "cycle"})


@lru_cache(maxsize=_RESULTS)
def poll_state(c: CallView) -> str | None:
    """``running`` / ``ended`` for a poll (``semantics.POLLS``) whose result says the process still runs / has
    ended, ``wait`` for a call that only waits (``sleep 30``), None for any other call (a poll whose result says
    neither included)."""
    cmd = command_text(c.args)
    if is_wait(cmd):
        return "wait"
    if not is_poll(c.tool, _args(c.args), cmd):
        return None
    if c.result is not None and _cut_silent(c.result):
        # killed at the tool's time limit before it printed anything (``sleep 240 && gh run list`` under a two-minute
        # limit): the look never ran, or saw nothing; it waited, as a bare ``sleep`` does
        return "wait"
    return call_poll_status(cmd, c.result)


# The lines of a shell tool's notice that it killed a run at its time limit, and nothing else: Claude Code's "Command
# timed out after 2m 0.0s" (after "Exit code 143"), Codex's "command timed out after 120000 milliseconds" (in its
# "Exit code / Wall time / Output" envelope).
_TIMEOUT_NOTICE = re.compile(
    r"(?:command timed out after (?:\d+m(?: \d+(?:\.\d+)?s)?|\d+(?:\.\d+)?s|\d+ milliseconds)|exit code:? \d+|"
    r"wall time: [\d.]+ seconds|output:)",
    re.I,
)


def _cut_silent(result: str) -> bool:
    """A result that is only the notice of a run killed at its time limit (``_TIMEOUT_NOTICE``), nothing printed."""
    lines = [ln.strip() for ln in result.splitlines() if ln.strip()]
    return (
        any("timed out after" in ln.lower() for ln in lines)
        and len(lines) <= 4
        and all(_TIMEOUT_NOTICE.fullmatch(ln) for ln in lines)
    )


def _waiting(kind: str, positions: Sequence[int], period: int | None, view: View) -> tuple[Judged, list[int]] | None:
    """The wait a candidate starts with, and the positions after it. A wait: polls of a process that still runs
    (``poll_state`` ``running``; bare waits between them), up to and including the poll that says it ended, at
    least ``MIN_REPEATS`` polls (rounds, for a cycle). Waiting is not a loop: the process, not the agent, decides
    when it ends, and the agent cannot do better than look again (lengthening its wait or not). Polls of a process
    that has ended (the same "done" or "failed" again) are no wait: they are judged as their kind."""
    block = period if kind == "cycle" and period else 1
    calls = [view(p) for p in positions]
    n, ended = 0, False
    for i, c in enumerate(calls):
        state = poll_state(c)
        if state in ("running", "wait"):
            continue
        n, ended = (i + 1, True) if state == "ended" else (i, False)
        break
    else:
        n = len(calls)
    n = -(-n // block) * block if ended else n // block * block
    polls = [c for c in calls[:n] if poll_state(c) in ("running", "ended")]
    if (
        n // block < MIN_REPEATS
        or len(polls) < MIN_REPEATS
        or block > 1
        and any(all(poll_state(c) == "wait" for c in calls[r : r + block]) for r in range(0, n, block))
    ):
        return None
    running = sum(1 for c in polls if poll_state(c) == "running")
    why = (
        f"waited on {_label(polls[0])}: {running} poll{'s' if running != 1 else ''} while it was still running"
        + (", then it ended" if ended else "")
        + "; waiting, not a loop (its cost is shown, never counted as waste)"
    )
    return Judged(list(positions[:n]), False, why, "waiting"), list(positions[n:])


# -- the kinds of call episode -------------------------------------------------------------------------------------


def _judge_streak(positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    return _with_stuck_runs(positions, view, "in a row", _counts)


def _judge_window(positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    """A recurring call, split where a fix came between two of its occurrences (``_unfixed_pieces``). Failed changes
    that are not one action (``rules.failure_key``: an edit refused the same way, its text varied) are one blind
    retry when they are on one target, failing alike (``_failure_runs``)."""
    pieces = _unfixed_pieces(positions, view, between)
    if len({_action_of(view(p)) for p in positions}) > 1:
        looks = "within a few calls, only looks in between"
        runs = [j for piece in pieces for j in _failure_runs(piece, [view(p) for p in piece], looks)]
        return [j for j in runs if len(j.positions) >= MIN_REPEATS]
    spread = "within a few calls, with no change in between"
    return [j for piece in pieces for j in _with_stuck_runs(piece, view, spread)]


def _counts(piece: Sequence[int]) -> bool:
    return len(piece) >= MIN_REPEATS


def _dense(piece: Sequence[int]) -> bool:
    """At least ``MIN_REPEATS`` occurrences, that many of them within one window of ``WINDOW`` calls."""
    return len(piece) >= MIN_REPEATS and any(
        piece[x + MIN_REPEATS - 1] - piece[x] <= WINDOW for x in range(len(piece) - MIN_REPEATS + 1)
    )


def _with_stuck_runs(
    positions: Sequence[int], view: View, spread: str, keep: Callable[[Sequence[int]], bool] = _dense
) -> list[Judged]:
    """One call repeated (a streak, a piece of a window). When its results changed (progress as a whole), a run of
    ``MIN_REPEATS``+ repeats failing the same way that ends in a repeat that worked was still stuck: the failing run
    is a stuck episode that ends before the success (its repeats and waste counted up to there), and the repeats
    around it are judged apart (``keep``: which of them still count as an episode)."""
    whole = _repeated_call(positions, view, spread)
    if whole.stuck:
        return [whole]
    calls = [view(p) for p in positions]
    runs, start = [], 0
    for i in range(1, len(calls) + 1):
        if i < len(calls) and failed(calls[i]) and failed(calls[i - 1]) and alike(calls[i - 1], calls[i]):
            continue
        if keep(positions[start:i]) and failed(calls[start]):
            runs.append((start, i))
        start = i
    if not runs:
        return _stale_runs(positions, calls, spread, keep) or [whole]

    def apart(ps: Sequence[int]) -> list[Judged]:  # the repeats around a failing run, judged as a repeat of their own
        piece = _repeated_call(ps, view, spread)
        return [piece] if piece.stuck else _stale_runs(ps, [view(p) for p in ps], spread, keep) or [piece]

    out, prev = [], 0
    for s, e in runs:
        if s > prev and keep(positions[prev:s]):
            out.extend(apart(positions[prev:s]))
        after = (
            ""
            if e == len(calls)
            else ", before it worked again"
            if not failed(calls[e])
            else ", then it failed otherwise"
        )
        out.append(
            Judged(
                list(positions[s:e]),
                True,
                f"{_label(calls[s])} failed {e - s}× {spread} with the same error, no fix in between{after}",
            )
        )
        prev = e
    if prev < len(positions) and keep(positions[prev:]):
        out.extend(apart(positions[prev:]))
    return out


def _stale_runs(
    positions: Sequence[int], calls: list[CallView], spread: str, keep: Callable[[Sequence[int]], bool]
) -> list[Judged]:
    """A repeated call whose results changed (progress as a whole) but kept coming back: a repeat whose result says
    what an earlier repeat's already said told the agent nothing new. A run of ``MIN_REPEATS``+ such repeats in a row
    is stuck (the same result, no fix in between: only the order of the answers changed), judged apart from the
    repeats around it; the calls that brought a new result are progress."""
    stale = _came_back(calls)
    out: list[Judged] = []
    start = None
    for i in range(len(calls) + 1):
        if i < len(calls) and stale[i]:
            start = i if start is None else start
            continue
        if start is not None and keep(positions[start:i]):
            out.append(
                Judged(
                    list(positions[start:i]),
                    True,
                    f"the same {_label(calls[start])} {i - start}× {spread}, each time an answer it had already "
                    "got (no new result)",
                )
            )
        start = None
    return out


def _came_back(calls: list[CallView]) -> list[bool]:
    """Per call, whether its result is ``alike`` an earlier call's: in one pass, by the parts of ``result_key``."""
    bodies: set[str] = set()
    errors: set[str] = set()
    replies: list[frozenset[str]] = []
    out = []
    for c in calls:
        k = result_key(c)
        if k is None:
            out.append(False)
            continue
        out.append(
            k.body in bodies
            or (k.signature != "" and k.signature in errors)
            or (k.words is not None and any(jaccard(w, k.words) >= SIMILARITY for w in replies))
        )
        bodies.add(k.body)
        if k.signature:
            errors.add(k.signature)
        if k.words is not None:
            replies.append(k.words)
    return out


def _repeated_call(positions: Sequence[int], view: View, spread: str) -> Judged:
    """One call repeated (a streak, a piece of a window): stuck when each repeat got the same result."""
    calls = [view(p) for p in positions]
    stuck = _stuck(calls, 1)
    why = f"the same {_label(calls[0])} {len(positions)}× {spread}, " + (
        _result_words(calls[-1]) + " each time" if stuck else "but its result changed (progress)"
    )
    return Judged(list(positions), stuck, why)


def _judge_cycle(positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    calls = [view(p) for p in positions]
    block = period or 1
    stuck = _stuck(calls, block)
    why = f"the block {' → '.join(_label(c, 40) for c in calls[:block])} repeated {len(positions) // block}×" + (
        ", with the same results each round" if stuck else ", and its results changed (progress)"
    )
    return [Judged(list(positions), stuck, why)]


def _judge_nested(positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    calls = [view(p) for p in positions]
    why = f"{_label(calls[0])} repeated {len(positions)}× inside one script"
    return [Judged(list(positions), _stuck(calls, 1), why)]


def _judge_failure(positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    return _failure_runs(positions, [view(p) for p in positions])


def _judge_drift(positions: Sequence[int], period: int | None, view: View, between: Between) -> list[Judged]:
    """Drifting retries; a kept run whose calls are all one action (the candidate mixed identical and drifted calls,
    and only identical ones passed) is a streak, not a drift: it is left for the streak claimed next."""
    calls = [view(p) for p in positions]
    return [j for j in _drift_runs(positions, calls) if len({_action_of(view(p)) for p in j.positions}) > 1]


def _action_of(c: CallView) -> str:
    """The call's action (tool + action arguments: ``keys.action_json``), as ``calls.action_key`` hashes it."""
    return f"{c.tool}\x00{_action_text(c.tool, c.args)}"


@lru_cache(maxsize=_COMMANDS)
def _action_text(tool: str, args: str | None) -> str:
    try:
        return action_json(tool, orjson.loads(args)) if args else "{}"
    except orjson.JSONDecodeError:  # arguments clipped at load time: compared as they are
        return args


def _unfixed_pieces(positions: Sequence[int], view: View, between: Between) -> list[list[int]]:
    """A recurring call's occurrences split where a fix came between two of them: a change of state (an edit, a
    write, a ``sed -i`` between two runs of a test makes the second run the right move, not a loop), unless the next
    or the previous gap made exactly the same change (restore, re-apply the same edit, look again: no new fix). The
    pieces that still hold 3 occurrences within one window."""
    first = view(positions[0])
    # a change refused for its own text ("not found", a malformed patch) or for a file not read yet: only a change of
    # that file can change the answer; a change of another file between two tries is no fix for it
    own = _SELF_REFUSAL.search((first.result or "")[:ERROR_HEAD]) is not None and bool(first.is_error)
    mine = _targets(first.tool, first.args) if own else frozenset()

    def fixes(c: CallView) -> bool:
        return changed_state(c) and (not own or same_target(_targets(c.tool, c.args), mine))

    gaps = [
        frozenset((c.tool, c.args) for c in (view(q) for q in between(a, b)) if fixes(c))
        for a, b in zip(positions, positions[1:])
    ]
    pieces, cur = [], [positions[0]]
    for i, b in enumerate(positions[1:]):
        retried = bool(gaps[i]) and (
            (i > 0 and gaps[i - 1] == gaps[i]) or (i + 1 < len(gaps) and gaps[i + 1] == gaps[i])
        )
        if gaps[i] and not retried:
            pieces.append(cur)
            cur = []
        cur.append(b)
    pieces.append(cur)
    return [p for p in pieces if _dense(p)]


def _stuck(calls: list[CallView], block: int) -> bool:
    """No repeat made progress. The calls repeat identically (a streak, a window, a cycle's block), so a repeated
    write changes nothing new: progress shows in the results. A single call repeated is stuck when each repeat got
    the same result as the one before (numbers aside) or failed as it did; a cycle when every round ended the same
    way (its last call's result). A repeat with no comparable result (none, a placeholder, or a reply refused for
    its format, whose command never ran) is no evidence either way."""
    evidence = False
    for i in range(block, len(calls), 1 if block == 1 else block):
        j = i + block - 1 if block > 1 else i
        if j >= len(calls):
            break
        prev, cur = calls[j - block], calls[j]
        if format_error(cur) or format_error(prev):
            continue
        if failed(cur) and failed(prev):
            same = alike(prev, cur)
            if same is False:
                return False
            evidence = True
            continue
        same = alike(prev, cur)
        if same is None:
            continue
        if not same:
            return False
        evidence = True
    return evidence


def _pieces(
    positions: Sequence[int], calls: list[CallView], link: Callable[[CallView, CallView], bool]
) -> list[tuple[list[int], list[CallView]]]:
    out: list[tuple[list[int], list[CallView]]] = []
    cur_p, cur_c = [positions[0]], [calls[0]]
    for p, c in zip(positions[1:], calls[1:]):
        if link(cur_c[-1], c):
            cur_p.append(p)
            cur_c.append(c)
        else:
            out.append((cur_p, cur_c))
            cur_p, cur_c = [p], [c]
    out.append((cur_p, cur_c))
    return [(p, c) for p, c in out if len(p) >= MIN_REPEATS]


def _threads(
    positions: Sequence[int], calls: list[CallView], link: Callable[[CallView, CallView], bool]
) -> list[tuple[list[int], list[CallView]]]:
    """``_pieces`` that a failure of another question does not cut: each call joins the first thread whose last call
    it links to (a failed edit of other text in between changed nothing, so the text sent again asks again)."""
    threads: list[tuple[list[int], list[CallView]]] = []
    for p, c in zip(positions, calls):
        for ps, cs in threads:
            if link(cs[-1], c):
                ps.append(p)
                cs.append(c)
                break
        else:
            threads.append(([p], [c]))
    return [(p, c) for p, c in threads if len(p) >= MIN_REPEATS]


def _failure_runs(positions: Sequence[int], calls: list[CallView], spread: str = "in a row") -> list[Judged]:
    """The same action failing again and again: real failures on one object, other failures between them or not
    (``_threads``)."""

    def link(a: CallView, b: CallView) -> bool:
        if format_error(a) or format_error(b):  # replies refused for their format: the reply is the action
            return format_error(a) and format_error(b)
        if refused(a) or refused(b):  # one change refused for permission, through whatever tool: the same wall
            return refused(a) and refused(b) and same_target(_targets(a.tool, a.args), _targets(b.tool, b.args))
        x, y = action(a.tool, a.args), action(b.tool, b.args)
        # an edit that keeps being refused on one file is one blind retry, however its guessed old text changes,
        # when the refusal is the file's state ("modified since read"), not an answer to the text sent
        target = (
            is_mutating(a.tool)
            and edit_family(a.tool) == edit_family(b.tool)
            and bool(x.paths)
            and x.paths == y.paths
            and command_text(a.args) is None
            and not _text_not_found(a)
        )
        if _text_not_found(a) and _text_not_found(b):  # an answer to the text sent: the same text, or barely changed
            if not _same_text_not_found(a, b, x, y):
                return False
        elif not (target or same_object(x, y)) or not alike(a, b):
            return False
        # the same failure again, or the same question asked again and the same answer (a search's "no match")
        return (failed(a) and failed(b)) or (is_answer(a) and is_answer(b))

    out = []
    for ps, cs in _threads(positions, calls, link):
        if format_error(cs[0]) and len(ps) < MIN_FORMAT_REFUSALS:
            continue
        if _attempts(cs) < MIN_REPEATS:
            continue  # one message's parallel calls are one attempt: none saw another's failure before it was sent
        if refused(cs[0]) and not _resent(cs):
            continue  # each tool tried once, as the refusal invites: no tool sent the call again after its refusal
        if format_error(cs[0]):
            why = f"{len(ps)} replies in a row refused for their format (the same format error), no fix in between"
        elif refused(cs[0]):
            tools = ", ".join(dict.fromkeys(c.tool for c in cs))
            names = Counter(t[-1] for c in cs for t in _targets(c.tool, c.args))
            file = names.most_common(1)[0][0] if names else "one file"
            why = f"calls on {file} refused for permission {len(ps)}× {spread} ({tools}), no grant in between"
        elif is_answer(cs[0]):
            why = (
                f"the same search {_label(cs[0])} asked {len(ps)}× in a row, the same "
                f"{'empty answer' if not _body(cs[0].result) else 'answer'} each time"
            )
        else:
            why = f"{_label(cs[0])} failed {len(ps)}× {spread} with the same error, no fix in between"
        out.append(Judged(ps, True, why))
    return out


def _same_text_not_found(a: CallView, b: CallView, x: Action, y: Action) -> bool:
    """Two edits of one file refused because the text they expect is not in it (``semantics.TEXT_NOT_FOUND``), each
    answer quoting the same text or barely changed (``SAME_QUOTE``): the same question asked again (a patch stops at
    its first hunk that does not match, and quotes that hunk; the later hunks it never reached may differ). The
    quotes are compared as sent, whitespace and numbers kept: adding the trailing spaces a file holds is a fix of the
    text, and ``port: 3000`` is not ``port: 5000``."""
    if edit_family(a.tool) != edit_family(b.tool) or not x.paths or x.paths != y.paths:
        return False
    if not (_text_not_found(a) and _text_not_found(b)):
        return False
    qa, qb = _quoted(a.result), _quoted(b.result)
    if qa == qb:
        return True
    if qa.split() == qb.split():
        return False  # only the whitespace changed: matching the file's indentation or trailing spaces, a fix
    na, nb = set(_DIGITS.findall(qa)), set(_DIGITS.findall(qb))
    if not (na <= nb or nb <= na):
        return False  # a number replaced by another: `port: 3000`, then `port: 5000`, asks another question
    m = SequenceMatcher(None, qa, qb, autojunk=False)
    return m.real_quick_ratio() >= SAME_QUOTE and m.quick_ratio() >= SAME_QUOTE and m.ratio() >= SAME_QUOTE


# Two quotes of text not found are one text barely changed at this character similarity (difflib's ratio, 2M/T):
# a line of context added to a 20-line block, an escaped quote, a trailing brace.
SAME_QUOTE = 0.8
_QUOTE_CHARS = 2000  # characters of a quote compared (what is not found is its head: the first line that differs)
_QUOTE_HEAD = re.compile(r"\A(?:String:[ \t]?)?")  # Claude Code's "String: " before the old text it quotes
_QUOTE_TAIL = re.compile(r"</tool_use_error>\s*\Z")
_QUOTE_SPAN = re.compile(r"`([^`]*)`|'([^'\n]*)'|\"([^\"\n]*)\"")  # the text a one-line refusal puts in quotes


def _text_not_found(c: CallView) -> bool:
    """An edit refused because the text it sent is not in the file (``semantics.TEXT_NOT_FOUND``)."""
    return is_text_not_found(c.result)


@lru_cache(maxsize=_RESULTS)
def _quoted(result: str | None) -> str:
    """The text a "not found" refusal quotes, as sent, its head (``_QUOTE_CHARS``): the lines after the refusal's own
    line (Claude Code's "String: …", Codex's expected lines), without the harness's envelope; or, when nothing
    follows that line, what the refusal puts in quotes (Codex's "Failed to find context '<anchor>'", OpenHands'
    "old_str `…` did not appear verbatim")."""
    body = _body(result)
    m = TEXT_NOT_FOUND.search(body)
    after = body[m.end() :].partition("\n")[2] if m else ""
    if after.strip():
        quote = _QUOTE_TAIL.sub("", _QUOTE_HEAD.sub("", after, count=1))
    else:
        span = _QUOTE_SPAN.search(body)
        quote = next(g for g in span.groups() if g is not None) if span else body
    return quote[:_QUOTE_CHARS]


def refused(c: CallView) -> bool:
    """A call refused for want of permission (``semantics.is_refusal``): it never ran."""
    return bool(c.is_error) and is_refusal(c.result)


@lru_cache(maxsize=_COMMANDS)
def _targets(tool: str, args: str | None) -> frozenset[tuple[str, ...]]:
    """The files a call names, each as ``semantics.path_parts``: its path arguments (``action``'s paths), and the
    paths its shell command, program or patch names (``semantics.named_paths``)."""
    a = _args(args)
    text = command_text(args)
    # a shell command's files are those ``named_paths`` finds: its parse keeps any word with a slash as a path, and
    # a sed script (`s/x/y/`) names no file
    paths = {path_parts(p) for p in action(tool, args).paths} if text is None else set()
    if text is None and isinstance(a, dict):
        text = next((v for k in (*_CODE_KEYS, "input", "patch") if isinstance(v := a.get(k), str)), None)
    if text is not None:
        paths |= named_paths(text)
    return frozenset(p for p in paths if p)


def _resent(calls: list[CallView]) -> bool:
    """Whether some tool sent the call again after its refusal: one tool in two or more attempts (messages; calls
    where a message is unknown)."""
    by_tool: dict[str, set[Any]] = {}
    for i, c in enumerate(calls):
        by_tool.setdefault(c.tool, set()).add(c.turn if c.turn is not None else i)
    return any(len(turns) > 1 for turns in by_tool.values())


def _attempts(calls: list[CallView]) -> int:
    """How many attempts a run of calls is: the messages that issued them (calls issued together in one message are
    one attempt, made before any of their results came back); the calls themselves where a message is unknown."""
    if any(c.turn is None for c in calls):
        return len(calls)
    return len({c.turn for c in calls})


def _drift_runs(positions: Sequence[int], calls: list[CallView]) -> list[Judged]:
    """The same action with drifting arguments (flags, a wrapper, a retried edit's old text) answered alike."""

    def link(a: CallView, b: CallView) -> bool:
        x, y = action(a.tool, a.args), action(b.tool, b.args)
        if _text_not_found(a) and _text_not_found(b):  # an answer to the text sent: the same text, or barely changed
            return _same_text_not_found(a, b, x, y)
        if format_error(a) or format_error(b) or not same_object(x, y):
            return False
        if failed(a) and failed(b):
            return bool(alike(a, b))
        return not failed(b) and not changed_state(b) and bool(alike(a, b))

    out = []
    for ps, cs in _pieces(positions, calls, link):
        if _attempts(cs) < MIN_REPEATS:
            continue  # one message's parallel calls are one attempt: a retry needs the result it repeats
        errors = all(failed(c) for c in cs[1:])
        why = f"{_label(cs[0])} retried {len(ps)}× with arguments barely changing, " + (
            "failing the same way each time" if errors else "getting the same answer each time"
        )
        out.append(Judged(ps, True, why))
    return out


# Each kind of call episode (``rules.LOOP_KINDS`` but ``text``, which ``judge_text`` judges) and its judgement.
CALL_JUDGES: dict[str, CallJudge] = {
    "streak": _judge_streak,
    "cycle": _judge_cycle,
    "window": _judge_window,
    "drift": _judge_drift,
    "failure": _judge_failure,
    "nested": _judge_nested,
}


# -- text --------------------------------------------------------------------------------------------------------------

_FENCE_BLOCK = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
# Table rows, rules, headings (also a bold line or a short label standing as one), quotes and tags.
_MARKUP_LINE = re.compile(
    r"^\s*(?:\|.*\||[-*_=]{3,}|#{1,6}\s.*|>\s?.*|<[^>]+>|\*\*[^*]+\*\*:?|__[^_]+__:?|"
    r"[^.!?]{1,40}:)\s*$"
)
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def prose(text: str) -> str:
    """The text a person reads as thought: fenced code, tables, rules, headings, quotes and tags removed, list
    markers stripped."""
    body = _FENCE_BLOCK.sub("\n", text or "")
    lines = []
    for line in body.splitlines():
        if _MARKUP_LINE.match(line):
            continue
        lines.append(_LIST_MARK.sub("", line))
    return "\n".join(lines)


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


_CODE_CHARS = re.compile(r"[=(){}\[\];<>$\\|]")
_CODE_START = re.compile(
    r"^\s*(?:def|class|import|from|return|elif|else|if|for|while|try|except|with|self\.|"
    r"print|sed|cat|echo|grep|python|\d+[:|]?\s)",
    re.I,
)


def _code_like(unit: str) -> bool:
    """A line of code, a command or a numbered listing line rather than a sentence of thought."""
    if _CODE_START.match(unit):
        return True
    return len(_CODE_CHARS.findall(unit)) >= max(3, len(unit) // 10)


def degenerate(text: str) -> tuple[int, str] | None:
    """(repeats, the repeated unit) when one message repeats itself degenerately: one sentence or line of prose 3+
    times back to back, or filling a third of the message; or one whole fenced block 3+ times. None otherwise."""
    # one fenced block restated again and again, back to back (little or no prose between the copies)
    run, prev, end = 1, None, 0
    for m in _FENCE_BLOCK.finditer(text or ""):
        body = _norm(m.group(1))
        gap = len((text or "")[end : m.start()].strip())
        run = run + 1 if body == prev and gap <= 200 else 1
        prev, end = body, m.end()
        if run >= MIN_REPEATS and len(body) >= MIN_SENTENCE:
            count = sum(1 for b in _FENCE_BLOCK.findall(text or "") if _norm(b) == body)
            return count, body
    units = [_norm(u) for u in _SENTENCE.split(prose(text))]
    units = [u for u in units if len(u) >= MIN_SENTENCE and not _code_like(u)]
    if len(units) < MIN_REPEATS:
        return None
    # one sentence, or a paragraph of up to 8 of them, emitted again and again back to back
    for k in range(1, 9):
        run = 0
        for i in range(k, len(units)):
            run = run + 1 if units[i] == units[i - k] else 0
            if run >= k * (MIN_REPEATS - 1):
                unit = Counter(units[i - run - k + 1 : i + 1]).most_common(1)[0][0]
                return units.count(unit), unit
    # not back to back, but filling the message: a third of it, and its last third
    unit, count = Counter(units).most_common(1)[0]
    tail = units[len(units) * 2 // 3 :]
    if count >= MIN_REPEATS and count * len(unit) >= len(" ".join(units)) / 3 and tail.count(unit) >= 2:
        return count, unit
    return None


def short_replies(texts: Sequence[str]) -> bool:
    """Every reply is short: fewer than ``MIN_TEXT_WORDS`` words of prose (filler such as "Continuing.")."""
    return all(len(_words(prose(t))) < MIN_TEXT_WORDS for t in texts)


def same_reply(texts: Sequence[str]) -> bool:
    """Consecutive replies that say the same thing: their prose near-identical (code and markup aside); short
    replies only word for word, and ``MIN_SHORT_REPEATS`` times or more."""
    words = [_words(prose(t)) for t in texts]
    if any(len(w) < MIN_TEXT_WORDS for w in words):
        return len(texts) >= MIN_SHORT_REPEATS and len({" ".join(t.split()) for t in texts}) == 1
    return all(jaccard(a, b) >= SAME_REPLY for a, b in zip(words, words[1:]))


def judge_text(texts: Sequence[str], single: bool, period: int = 1) -> tuple[int, str] | None:
    """(repeats, why) when a candidate text loop is degenerate generation, else None. ``period`` > 1: a block of
    that many consecutive replies repeated word for word (the episode builders found it so), degenerate when it
    comes back ``MIN_REPEATS`` times (``MIN_SHORT_REPEATS`` when every reply is short)."""
    if single:
        got = degenerate(texts[0])
        if got is None:
            return None
        n, unit = got
        snippet = unit if len(unit) <= 60 else unit[:59] + "…"
        return n, f"one message repeats “{snippet}” {n}×"
    first = " ".join(prose(texts[0]).split()) or " ".join(texts[0].split())
    snippet = first if len(first) <= 60 else first[:59] + "…"
    if period > 1:
        n = len(texts) // period
        if n < (MIN_SHORT_REPEATS if short_replies(texts) else MIN_REPEATS):
            return None
        return n, f"the same {period} replies {n}× in a row, word for word: “{snippet}” …"
    if not same_reply(texts):
        return None
    return len(texts), f"the same reply {len(texts)}× in a row: “{snippet}”"
