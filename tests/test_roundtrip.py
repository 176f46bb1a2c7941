"""Every adapter's stored arguments rebuild the raw action the model emitted, on real files (issue 30, class 8).

For each format, the real transcripts of the tuning sources (tests/fixtures/<format>, the committed
tests/realdata/<format>/ files, and tests/realdata/fetched/<format>/ where fetched) are ingested, and every stored
call is checked against the raw file read here independently, with ``json``/``shlex`` and this file's own readers:
same tool, same arguments, values exact. Files of held-out sources (tests/realdata/heldout.json) are left out: they
are not read while rules change, and a failure here would mean reading them.

What "the raw action" is, per format:
- Claude Code, pi, Gemini CLI, Codex, OpenHands V1, Inspect, OpenAI messages, mini-swe-agent v2: the tool call's
  name and its JSON arguments (Codex ``custom_tool_call``: its ``input`` text, as ``{"input": …}``; Inspect
  ``attachment://`` references resolved to the text they stand for).
- mini-swe-agent v1: the first fenced bash block of the message, byte for byte (mini-swe-agent's own action regex).
- SWE-agent: the model's tool call where the history keeps it (function calling), else the step's ``action`` string:
  ``bash`` commands byte for byte, ``str_replace_editor`` rebuilt to the same shell tokens, ``submit``/``exit_*`` with
  their argument text; plus ``open_file`` (from the step's state) for the window commands that act on the open file.
- OpenHands V0: the action event (``action`` and ``args``) without the fields the runtime sets, not the model
  (``RUNTIME_ARGS``).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import realdata_labels
from conftest import FIXTURES, ROOT
from helpers import ingest_paths, query

REALDATA = ROOT / "tests" / "realdata"


@dataclass
class Raw:
    """One call as the raw file holds it: its id (None where the file has none: matched by order), tool, arguments,
    and ``check``, a comparison of its own for formats whose stored arguments are not the raw JSON itself."""

    call_id: str | None
    tool: str
    args: Any
    check: Callable[[str, Any], str | None] | None = None


def tuning_files(folder: str, keep: Callable[[Path], bool]) -> list[Path]:
    """The files of tuning sources under tests/fixtures/<folder>, tests/realdata/<folder> and its fetched twin."""
    out = []
    for base in (FIXTURES / folder, REALDATA / folder, REALDATA / "fetched" / folder):
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if not p.is_file() or p.suffix == ".md" or not keep(p):
                continue
            try:
                part = realdata_labels.part(str(p.relative_to(ROOT)))
            except realdata_labels.LabelError:
                part = realdata_labels.TUNING  # a fixture folder without a source row
            if part == realdata_labels.TUNING:
                out.append(p)
    return out


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if line.strip():
            try:
                yield n, orjson.loads(line)
            except orjson.JSONDecodeError:
                continue


def decoded(raw: Any) -> Any:
    """Tool-call arguments as sent: JSON text decoded (twice where a dataset encoded it twice)."""
    value = raw
    for _ in range(8):
        if not isinstance(value, str):
            return {} if value is None else value
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {"raw": value}
    return value


# -- readers of the raw files ------------------------------------------------------------------------------------------
def raw_claude(path: Path) -> list[Raw]:
    out, seen = [], set()
    for _, rec in json_lines(path):
        msg = rec.get("message") if isinstance(rec, dict) and rec.get("type") == "assistant" else None
        content = msg.get("content") if isinstance(msg, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                if block.get("id") in seen:
                    continue  # a streamed message repeats its blocks on later lines
                seen.add(block.get("id"))
                out.append(Raw(block.get("id"), block.get("name"), block.get("input") or {}))
    return out


def raw_pi(path: Path) -> list[Raw]:
    out = []
    for _, rec in json_lines(path):
        msg = rec.get("message") if isinstance(rec, dict) and rec.get("type") == "message" else None
        if isinstance(msg, dict) and msg.get("role") == "assistant":
            for block in msg.get("content") or ():
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    out.append(Raw(block.get("id"), block.get("name"), block.get("arguments") or {}))
    return out


def _gemini_jsonl_messages(path: Path) -> list[Any]:
    """The messages of a JSONL chat (Gemini CLI 0.4+): a message appended again as it grows, or given again by a
    ``$set.messages`` checkpoint, is one message, its last version (as the adapter reads it)."""
    by_id: dict[Any, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if not isinstance(rec, dict):
            continue
        upd = rec.get("$set")
        for m in (upd.get("messages") or []) if isinstance(upd, dict) else [rec]:
            if isinstance(m, dict) and "type" in m:
                by_id[m.get("id", len(by_id))] = m
    return list(by_id.values())


def raw_gemini(path: Path) -> list[Raw]:
    if path.suffix == ".jsonl":
        msgs = _gemini_jsonl_messages(path)
    else:
        doc = json.loads(path.read_text(encoding="utf-8"))
        msgs = doc.get("messages", []) if isinstance(doc, dict) else doc
    return [
        Raw(tc.get("id"), tc.get("name"), tc.get("args") or {})
        for m in msgs
        if isinstance(m, dict) and m.get("type") == "gemini"
        for tc in m.get("toolCalls") or ()
    ]


def raw_codex(path: Path) -> list[Raw]:
    out = []
    for _, rec in json_lines(path):
        if not isinstance(rec, dict):
            continue
        if rec.get("type") == "response_item" and isinstance(rec.get("payload"), dict):
            p = rec["payload"]
        elif "payload" not in rec:  # a rollout from before the envelopes (mid-2025): the items stand bare
            p = rec
        else:
            continue
        t, ns, name = p.get("type"), p.get("namespace"), p.get("name")
        if ns:
            name = f"{ns}{name}" if ns.endswith("_") else f"{ns}.{name}"
        cid = p.get("call_id") or p.get("id")
        if t == "function_call":
            out.append(Raw(cid, name, decoded(p.get("arguments"))))
        elif t == "custom_tool_call":
            inp = p.get("input")
            out.append(Raw(cid, name, {"input": inp if isinstance(inp, str) else decoded(inp)}))
        elif t == "local_shell_call":
            out.append(Raw(cid, "local_shell", p.get("action") or {}))
        elif t == "web_search_call":
            out.append(Raw(cid, "web_search", p.get("action") or {}))
    return out


# OpenHands V0 action fields that the runtime or the agent controller sets, not the model: the message text
# (``thought``, kept as the turn's text), how the action was produced and confirmed, what the runtime adds.
RUNTIME_ARGS = frozenset(
    {
        "thought",
        "impl_source",
        "translated_ipython_code",
        "confirmation_state",
        "is_confirmed",
        "kernel_init_code",
        "hidden",
        "wait_for_response",
        "image_urls",
        "images_urls",
        "keep_prompt",
    }
)
OPENHANDS_NOT_CALLS = frozenset(
    {
        "message",
        "system",
        "recall",
        "change_agent_state",
        "null",
        "condensation",
        "condensation_request",
        "start",
        "pause",
        "resume",
        "stop",
        "agent_state_changed",
    }
)


def raw_openhands(path: Path) -> list[Raw]:
    if path.parent.name == "events":
        files = sorted(path.parent.glob("*.json"), key=lambda p: int(p.stem))
        if files[0] != path:
            return []
        histories = [[json.loads(p.read_text(encoding="utf-8")) for p in files]]
    else:
        text = path.read_text(encoding="utf-8")
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError:
            docs = [rec for _, rec in json_lines(path)]
        histories = [d if isinstance(d, list) else d.get("history", []) for d in docs]
    out = []
    for hist in histories:
        events = [e for h in hist for e in (h if isinstance(h, list) else [h]) if isinstance(e, dict)]
        for ev in events:
            if ev.get("kind") == "ActionEvent":
                tc = ev.get("tool_call") or {}
                tool = ev.get("tool_name") or tc.get("name")
                out.append(Raw(ev.get("tool_call_id") or tc.get("id"), tool, decoded(tc.get("arguments"))))
            elif isinstance(ev.get("action"), str) and ev["action"] not in OPENHANDS_NOT_CALLS and "kind" not in ev:
                args = ev.get("args")
                if args is None:
                    args = {k: v for k, v in ev.items() if k not in TOP_KEYS}
                eid = ev.get("id")
                args = {k: v for k, v in args.items() if k not in RUNTIME_ARGS}
                if args.get("security_risk", 0) is None:  # the model gave none: older runtimes write null
                    del args["security_risk"]
                out.append(Raw(f"e{eid}" if eid is not None else None, ev["action"], args))
    return out


TOP_KEYS = frozenset(
    {
        "id",
        "timestamp",
        "source",
        "message",
        "cause",
        "action",
        "observation",
        "tool_call_metadata",
        "llm_metrics",
        "args",
        "content",
        "extras",
        "success",
        "timeout",
        "hidden",
    }
)

ATTACHMENT = "attachment://"


def _attached(value: Any, attachments: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith(ATTACHMENT):
        got = attachments.get(value[len(ATTACHMENT) :])
        return got if isinstance(got, str) else value
    if isinstance(value, list):
        return [_attached(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _attached(v, attachments) for k, v in value.items()}
    return value


def raw_inspect(path: Path) -> list[Raw]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = sorted(n for n in z.namelist() if re.fullmatch(r"samples/[^/]+\.json", n))
            samples = [json.loads(z.read(n)) for n in names]
    else:
        samples = json.loads(path.read_text(encoding="utf-8")).get("samples") or []
    out = []
    for s in samples:
        att = s.get("attachments") or {}
        called = set()
        for m in s.get("messages") or ():
            if m.get("role") == "assistant":
                for tc in m.get("tool_calls") or ():
                    called.add(tc.get("id"))
                    out.append(Raw(tc.get("id"), tc.get("function"), _attached(decoded(tc.get("arguments")), att)))
        for ev in s.get("events") or ():
            if ev.get("event") == "tool" and ev.get("id") not in called:
                called.add(ev.get("id"))
                out.append(Raw(ev.get("id"), ev.get("function"), _attached(decoded(ev.get("arguments")), att)))
    return out


def raw_openai(path: Path) -> list[Raw]:
    out: list[Raw] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if v.get("role") == "assistant":
                for tc in v.get("tool_calls") or () if isinstance(v.get("tool_calls"), list) else ():
                    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
                    out.append(Raw(None, str(fn.get("name") or "?"), decoded(fn.get("arguments"))))
                fc = v.get("function_call")
                if isinstance(fc, dict):
                    out.append(Raw(None, str(fc.get("name") or "?"), decoded(fc.get("arguments"))))
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    try:
        docs = [json.loads(path.read_text(encoding="utf-8"))]
    except json.JSONDecodeError:
        docs = [rec for _, rec in json_lines(path)]
    for d in docs:
        walk(d)
    return out


MINI_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.S)  # mini-swe-agent's action_regex


def raw_mini(path: Path) -> list[Raw]:
    out = []
    for k, m in enumerate(json.loads(path.read_text(encoding="utf-8")).get("messages") or ()):
        if m.get("role") != "assistant":
            continue
        if m.get("tool_calls"):
            for j, tc in enumerate(m["tool_calls"]):
                fn = tc.get("function") or {}
                out.append(Raw(tc.get("id") or f"m{k}.{j}", fn.get("name"), decoded(fn.get("arguments"))))
            continue
        content = m.get("content")
        text = content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content or ())
        blocks = MINI_BLOCK.findall(text)
        if blocks:
            out.append(Raw(f"m{k}", "bash", {"command": blocks[0]}))
    return out


# SWE-agent's window commands: they act on the open file without naming it (tools/windowed*, 0.x config/commands).
SWE_WINDOW = {"goto", "scroll_up", "scroll_down", "edit", "insert"}
SWE_EXIT = {"submit", "exit_forfeit", "exit_cost", "exit_context", "exit_error", "exit_format"}
# str_replace_editor's invoke format (tools/edit_anthropic/config.yaml): positional command and path, then its flags.
EDITOR_FLAGS = ("file_text", "view_range", "old_str", "new_str", "insert_line")


def _open_file(state: Any) -> str | None:
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except json.JSONDecodeError:
            return None
    f = state.get("open_file") if isinstance(state, dict) else None
    return f if isinstance(f, str) and f.strip() not in ("", "n/a") else None


def _editor_tokens(args: dict[str, Any]) -> list[str]:
    """The shell tokens SWE-agent's ``str_replace_editor`` invocation of these arguments has."""
    toks = ["str_replace_editor", *(args[k] for k in ("command", "path") if k in args), *args.get("extra", [])]
    rest = [k for k in args if k not in ("command", "path", "extra")]
    for k in sorted(rest, key=lambda k: (EDITOR_FLAGS.index(k) if k in EDITOR_FLAGS else 99, k)):
        v = args[k]
        toks.append(f"--{k}")
        toks.extend(str(x) for x in v) if isinstance(v, list) else toks.extend([] if v is None else [str(v)])
    return toks


def _acts_on_open_file(tool: str, args: dict[str, Any]) -> bool:
    if tool == "bash":
        first_line = args.get("command", "").split("\n", 1)[0]
        words = first_line.split()
        if words and words[0] == "search_file":
            try:
                return len(shlex.split(first_line)) <= 2  # search_file <term> [<file>]: no file given
            except ValueError:
                return False
        return bool(words) and words[0] in SWE_WINDOW
    return tool in SWE_WINDOW or (tool == "search_file" and not args.get("file"))


def raw_swe_agent(path: Path) -> list[Raw]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    hist = doc.get("history") or []
    if not doc.get("trajectory"):  # a history-only demonstration: the tool calls of its chat
        return [
            Raw(tc["id"], tc["function"]["name"], decoded(tc["function"]["arguments"]))
            for h in hist
            if h.get("role") == "assistant" and not h.get("is_demo")
            for tc in _listed(h.get("tool_calls"))
        ]
    structured = []  # (action, name, arguments) of the model's own tool calls, in order
    for h in hist:
        tcs = h.get("tool_calls") if h.get("role") == "assistant" and not h.get("is_demo") else None
        if isinstance(tcs, list) and len(tcs) == 1 and isinstance(h.get("action"), str) and h["action"].strip():
            structured.append((h["action"].strip(), tcs[0]["function"]["name"], tcs[0]["function"]["arguments"]))
    out = []
    for k, st in enumerate(doc["trajectory"]):
        action = st.get("action")
        if not isinstance(action, str) or not action.strip():
            continue
        f = _open_file(st.get("state"))
        hit = next((j for j, s in enumerate(structured) if s[0] == action.strip()), None)
        if hit is not None:
            _, name, arguments = structured[hit]
            structured = structured[hit + 1 :]
            out.append(Raw(f"s{k}", name, decoded(arguments), _swe_check(action, f, structured=True)))
            continue
        first, *rest = action.strip().split(None, 1)
        if first == "str_replace_editor":
            out.append(Raw(f"s{k}", first, None, _swe_check(action, f)))
        elif first in SWE_EXIT:
            out.append(Raw(f"s{k}", first, {"args": rest[0]} if rest else {}))
        else:
            out.append(Raw(f"s{k}", "bash", {"command": action}, _swe_check(action, f)))
    return out


def _listed(value: Any) -> list[Any]:
    """A history item's ``tool_calls``: a list, or (in some 1.x demonstrations) the Python repr of one."""
    if isinstance(value, str) and value.strip():
        value = ast.literal_eval(value)
    return value if isinstance(value, list) else []


def _swe_check(action: str, open_file: str | None, structured: bool = False) -> Callable[[str, Any], str | None]:
    def check(tool: str, args: Any) -> str | None:
        wants_file = open_file is not None and _acts_on_open_file(tool, args)
        if wants_file != ("open_file" in args) or (wants_file and args["open_file"] != open_file):
            return f"open_file {args.get('open_file')!r}, the step's state has {open_file!r}"
        args = {k: v for k, v in args.items() if k != "open_file"}
        if structured:
            return None  # compared with the model's own arguments by the caller
        if tool == "str_replace_editor":
            want = shlex.split(action)
            return None if _editor_tokens(args) == want else f"tokens {_editor_tokens(args)} != {want}"
        return None if args == {"command": action} else f"{args!r} is not the action {action!r}"

    return check


# -- the comparison ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Format:
    name: str
    read: Callable[[Path], list[Raw]]
    folder: str = ""
    keep: Callable[[Path], bool] = lambda p: True


FORMATS = [
    Format("claude_code", raw_claude, keep=lambda p: p.suffix == ".jsonl"),
    Format("pi", raw_pi),
    Format("gemini_cli", raw_gemini, folder="gemini"),
    Format("codex", raw_codex),
    Format("openhands", raw_openhands),
    Format("inspect", raw_inspect),
    Format("openai_messages", raw_openai),
    Format("mini_swe_agent", raw_mini),
    Format("swe_agent", raw_swe_agent, keep=lambda p: p.suffix == ".traj"),
]


def stored_calls(db: Path, fmt: str) -> dict[str, list[tuple[str | None, str, Any]]]:
    rows = query(
        db,
        "SELECT f.path, c.call_id, c.tool, c.args FROM calls c JOIN sessions s USING (session_id) "
        "JOIN files f ON f.file_id = c.file_id WHERE s.format = ? ORDER BY f.path, c.line, s.session_id, c.seq",
        [fmt],
    )
    out: dict[str, list[tuple[str | None, str, Any]]] = defaultdict(list)
    for path, cid, tool, args in rows:
        out[path].append((None if cid is None or cid.startswith("#") else cid, tool, orjson.loads(args)))
    return out


def compare(
    raws: list[Raw], stored: list[tuple[str | None, str, Any]], fmt: str, elsewhere: set[str | None]
) -> list[str]:
    """Problems, none when every stored call rebuilds its raw call; calls are paired by id (in order among equal
    ids), or by order where the file has no ids. A raw call stored with another file (``elsewhere``: a resumed
    Claude Code session's copy of its original's calls is kept once, with the original) is not missing."""
    problems = []
    if fmt == "openai_messages":  # ids in datasets are often all "0": by order only
        raws = [Raw(None, r.tool, r.args, r.check) for r in raws]
        stored = [(None, t, a) for _, t, a in stored]
    by_id: dict[str | None, list[Raw]] = defaultdict(list)
    for r in raws:
        by_id[r.call_id].append(r)
    seen: dict[str | None, int] = defaultdict(int)
    for cid, tool, args in stored:
        group = by_id.get(cid, [])
        n = seen[cid]
        seen[cid] += 1
        if n >= len(group):
            problems.append(f"call {cid}: {tool} {short(args)} has no raw call in the file")
            continue
        r = group[n]
        if tool != r.tool:
            problems.append(f"call {cid}: tool {tool!r}, the file has {r.tool!r}")
        elif r.check is not None and (why := r.check(tool, args)) is not None:
            problems.append(f"call {cid}: {why}")
        elif r.args is not None and (args if r.check is None else _without_file(args)) != r.args:
            problems.append(f"call {cid}: args {short(args)} != raw {short(r.args)}")
    missing = sum(
        len(g) - min(seen[c], len(g)) for c, g in by_id.items() if c is None or c not in elsewhere or c in seen
    )
    if missing:
        problems.append(f"{missing} raw call(s) not stored")
    return problems


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "…"


def _without_file(args: Any) -> Any:
    return {k: v for k, v in args.items() if k != "open_file"} if isinstance(args, dict) else args


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_stored_arguments_rebuild_the_raw_action(fmt: Format, tmp_path: Path) -> None:
    files = tuning_files(fmt.folder or fmt.name, fmt.keep)
    assert files, f"no real {fmt.name} file to check"
    db = tmp_path / "store.duckdb"
    ingest_paths(db, *files)
    stored = stored_calls(db, fmt.name)
    problems, checked = [], 0
    for path in files:
        raws = fmt.read(path)
        calls = stored.get(str(path.resolve()), [])
        elsewhere = {c for p, cs in stored.items() if p != str(path.resolve()) for c, _, _ in cs}
        checked += len(calls)
        problems += [f"{path.relative_to(ROOT)}: {p}" for p in compare(raws, calls, fmt.name, elsewhere)]
    assert not problems, f"{len(problems)} problem(s) in {checked} calls:\n" + "\n".join(problems[:40])
    assert checked > 0
