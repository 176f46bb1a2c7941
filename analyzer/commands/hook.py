"""``loopscope hook``: run loopscope as a live guard inside an agent (Claude Code, Codex CLI, Gemini CLI), and
install it there.

``loopscope hook claude-code|codex|gemini-cli`` is the hook itself (the installed entries call the lighter
``loopscope-hook <agent>``, which behaves the same); ``loopscope hook install <agent>`` / ``uninstall <agent>`` merge
its entries into the agent's own file (Claude Code's settings.json, Codex's hooks.json, Gemini CLI's settings.json);
``loopscope hook status`` says where it is installed, with which settings, and what the user must still do.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from analyzer.commands.common import err, handle_errors, out
from analyzer.commands.params import Choice
from analyzer.errors import UsageError

app = typer.Typer(
    name="hook",
    help="Run loopscope's guard live inside an agent, and install it there.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


class Agent(str, Enum):
    claude_code = "claude-code"
    codex = "codex"
    gemini_cli = "gemini-cli"


class SettingsScope(str, Enum):
    """Which of Claude Code's settings files install and uninstall write."""

    user = "user"
    project = "project"
    local = "local"


PolicyOpt = Annotated[
    str | None,
    typer.Option(
        "--policy",
        "-p",
        help="Policy the guard runs: loopscope (default, or the settings file's) or any preset.",
        show_default=False,
    ),
]
SettingsOpt = Annotated[
    Path | None,
    typer.Option(
        "--settings",
        help="Hook settings file (default: the one `loopscope calibrate --write-settings` writes).",
        show_default=False,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Change a setting of the policy: NAME=VALUE. Repeatable.", show_default=False),
]
# where install/uninstall write: one of the three settings files (see _scope)
UserOpt = Annotated[
    bool,
    typer.Option(
        "--user",
        help="The user's file (the default): ~/.claude/settings.json, ~/.codex/hooks.json, ~/.gemini/settings.json.",
    ),
]
ProjectOpt = Annotated[
    bool,
    typer.Option(
        "--project", help="The project's: <project>/.claude/settings.json, .codex/hooks.json, .gemini/settings.json."
    ),
]
LocalOpt = Annotated[bool, typer.Option("--local", help="Claude Code only: <project>/.claude/settings.local.json.")]
ProjectDirOpt = Annotated[
    Path | None,
    typer.Option("--project-dir", help="The project (default: the current directory).", show_default=False),
]


def _extra(policy: str | None, settings: Path | None, sets: list[str] | None) -> list[str]:
    args: list[str] = []
    if policy:
        args += ["--policy", policy]
    if settings:
        args += ["--settings", str(settings.resolve())]
    for s in sets or []:
        args += ["--set", s]
    return args


@app.command("claude-code")
def claude_code(policy: PolicyOpt = None, settings: SettingsOpt = None, sets: SetOpt = None) -> None:
    """The Claude Code hook: one hook event's JSON on stdin, the hook's answer on stdout (nothing to allow). Always
    exits 0: a failure allows the call and prints one line on stderr."""
    from analyzer.hook.main import main

    raise typer.Exit(main(["claude-code"] + _extra(policy, settings, sets)))


@app.command("codex")
def codex(policy: PolicyOpt = None, settings: SettingsOpt = None, sets: SetOpt = None) -> None:
    """The Codex CLI hook (PreToolUse, PostToolUse, UserPromptSubmit): one event's JSON on stdin, the answer on
    stdout. Always exits 0: a failure allows the call and goes to stderr and the hook's log."""
    from analyzer.hook.main import main

    raise typer.Exit(main(["codex"] + _extra(policy, settings, sets)))


@app.command("gemini-cli")
def gemini_cli(policy: PolicyOpt = None, settings: SettingsOpt = None, sets: SetOpt = None) -> None:
    """The Gemini CLI hook (BeforeTool, AfterTool, BeforeAgent): one event's JSON on stdin, the answer on stdout.
    Always exits 0: a failure allows the call and goes to stderr and the hook's log."""
    from analyzer.hook.main import main

    raise typer.Exit(main(["gemini-cli"] + _extra(policy, settings, sets)))


def _scope(user: bool, project: bool, local: bool) -> SettingsScope:
    chosen = [
        s
        for s, on in ((SettingsScope.user, user), (SettingsScope.project, project), (SettingsScope.local, local))
        if on
    ]
    if len(chosen) > 1:
        raise UsageError("choose one of --user, --project, --local")
    return chosen[0] if chosen else SettingsScope.user


@app.command("install")
@handle_errors
def install(
    agent: Annotated[Agent, typer.Argument(parser=Choice(Agent), help="The agent: claude-code, codex or gemini-cli.")],
    user: UserOpt = False,
    project: ProjectOpt = False,
    local: LocalOpt = False,
    project_dir: ProjectDirOpt = None,
    policy: PolicyOpt = None,
    settings: SettingsOpt = None,
    sets: SetOpt = None,
) -> None:
    """Add the hook to the agent's file (merging: other hooks are kept; a previous loopscope entry is replaced, an
    identical one left in place), print what changed and what the user must still do."""
    from analyzer.hook import install as inst
    from analyzer.hook.settings import hook_policy, settings_path

    pol = hook_policy(policy, settings, _sets(sets), agent=agent.value)  # a bad setting fails here, not on every call
    if agent is not Agent.claude_code:
        _install_agent(
            agent.value, _scope(user, project, local), project_dir, _extra(policy, settings, sets), pol, settings
        )
        return
    path = inst.settings_file(_scope(user, project, local).value, project_dir)
    try:
        removed, added = inst.install(path, inst.hook_command(_extra(policy, settings, sets)))
    except ValueError as exc:  # settings.json that is not JSON: leave it alone
        raise UsageError(f"{path}: not changed ({exc})") from None
    out.print(f"{path}:", markup=False, soft_wrap=True)
    for r in removed:
        out.print(f"  - {r}", markup=False, soft_wrap=True)
    for a in added:
        out.print(f"  + {a}", markup=False, soft_wrap=True)
    src = settings or settings_path()
    changed = ", ".join(f"{k} {v}" for k, v in pol.changed().items()) or "its defaults"
    whence = f" (from {src})" if src.exists() and pol.changed() else ""
    out.print(
        f"guard: {pol.name}, {changed}{whence}. Claude Code reads hooks at startup: restart running sessions.",
        markup=False,
        soft_wrap=True,
    )


@app.command("uninstall")
@handle_errors
def uninstall(
    agent: Annotated[Agent, typer.Argument(parser=Choice(Agent), help="The agent: claude-code, codex or gemini-cli.")],
    user: UserOpt = False,
    project: ProjectOpt = False,
    local: LocalOpt = False,
    project_dir: ProjectDirOpt = None,
) -> None:
    """Remove loopscope's hook entries from the agent's file (only those, and what install switched on; other hooks
    stay; a file install created is removed)."""
    from analyzer.hook import install as inst

    if agent is not Agent.claude_code:
        _uninstall_agent(agent.value, _scope(user, project, local), project_dir)
        return

    path = inst.settings_file(_scope(user, project, local).value, project_dir)
    try:
        removed = inst.uninstall(path)
    except ValueError as exc:
        raise UsageError(f"{path}: not changed ({exc})") from None
    if not removed:
        err.print(f"{path}: no loopscope hook to remove", markup=False)
        return
    out.print(f"{path}:", markup=False, soft_wrap=True)
    for r in removed:
        out.print(f"  - {r}", markup=False, soft_wrap=True)


def _sets(items: list[str] | None) -> dict[str, str]:
    from analyzer.guards.policies import parse_sets

    return parse_sets(items or [])


def _install_agent(
    agent: str, scope: SettingsScope, project_dir: Path | None, extra: list[str], pol: object, settings: Path | None
) -> None:
    from analyzer.hook import agent_install as ai
    from analyzer.hook.settings import settings_path

    if scope is SettingsScope.local:
        raise UsageError("--local is for claude-code; use --user or --project")
    path = ai.hooks_file(agent, scope.value, project_dir)
    try:
        res = ai.install(agent, path, ai.command_for(agent, extra))
    except ValueError as exc:  # a file that is not JSON: leave it alone
        raise UsageError(f"{path}: not changed ({exc})") from None
    out.print(f"{path}:" + (" (created)" if res["created"] else ""), markup=False, soft_wrap=True)
    for r in res["removed"]:
        out.print(f"  - {r}", markup=False, soft_wrap=True)
    for a in res["added"]:
        out.print(f"  + {a}", markup=False, soft_wrap=True)
    for k in res["kept"]:
        out.print(f"  = {k} (already there, left in place)", markup=False, soft_wrap=True)
    for sw in res["switched"]:
        out.print(f"  switched on: {sw['what']} in {sw['file']}", markup=False, soft_wrap=True)
    if res["comments"]:
        out.print(
            "  the file had comments: they are dropped while the hook is installed; `hook uninstall` restores the "
            "original text if nothing else changed",
            markup=False,
            soft_wrap=True,
        )
    changed = ", ".join(f"{k} {v}" for k, v in pol.changed().items()) or "its defaults"  # type: ignore[attr-defined]
    src = settings or settings_path()
    out.print(f"guard: {pol.name}, {changed} (settings: {src}).", markup=False, soft_wrap=True)  # type: ignore[attr-defined]
    for item in ai.status(agent, project_dir):
        if item["file"] == str(path):
            for t in item["todo"]:
                out.print(f"to do: {t}", markup=False, soft_wrap=True)


def _uninstall_agent(agent: str, scope: SettingsScope, project_dir: Path | None) -> None:
    from analyzer.hook import agent_install as ai

    if scope is SettingsScope.local:
        raise UsageError("--local is for claude-code; use --user or --project")
    path = ai.hooks_file(agent, scope.value, project_dir)
    try:
        res = ai.uninstall(agent, path)
    except ValueError as exc:
        raise UsageError(f"{path}: not changed ({exc})") from None
    if not (res["removed"] or res["unswitched"]):
        err.print(f"{path}: no loopscope hook to remove", markup=False)
        return
    out.print(f"{path}:", markup=False, soft_wrap=True)
    for r in res["removed"]:
        out.print(f"  - {r}", markup=False, soft_wrap=True)
    for sw in res["unswitched"]:
        out.print(f"  switched back: {sw['what']} in {sw['file']}", markup=False, soft_wrap=True)
    if res["restored"]:
        out.print("  restored the file's original text (with its comments)", markup=False, soft_wrap=True)
    if res["deleted"]:
        out.print("  removed the file (install had created it)", markup=False, soft_wrap=True)
    if agent == "codex" and res["removed"] and not res["deleted"]:
        out.print(
            "  hooks listed after loopscope's in the same event moved up: Codex asks to review them again",
            markup=False,
            soft_wrap=True,
        )


@app.command("status")
@handle_errors
def status(
    project_dir: ProjectDirOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """Where the hook is installed for each agent, with which settings, what the user must still do, and the denials
    and failures in the hook's log."""
    from analyzer.hook import agent_install as ai
    from analyzer.hook import install as inst
    from analyzer.hook import log
    from analyzer.hook.settings import hook_policy, settings_path

    records = log.read()
    src = settings or settings_path()
    out.print(f"settings: {src}" + ("" if src.exists() else " (none: defaults)"), markup=False, soft_wrap=True)
    out.print(f"log: {log.log_path()}", markup=False, soft_wrap=True)
    for agent in Agent:
        out.print(f"\n{agent.value}", markup=False)
        try:
            pol = hook_policy(None, settings, None, agent=agent.value)
            changed = ", ".join(f"{k} {v}" for k, v in pol.changed().items()) or "its defaults"
            out.print(f"  guard: {pol.name}, {changed}", markup=False, soft_wrap=True)
        except UsageError as exc:
            out.print(f"  guard: settings unreadable ({exc})", markup=False, soft_wrap=True)
        if agent is Agent.claude_code:
            for scope in ("user", "project", "local"):
                path = inst.settings_file(scope, project_dir)
                try:
                    data = inst._load(path)
                except (OSError, ValueError):
                    continue
                cmds = [
                    h["command"]
                    for groups in (data.get("hooks") or {}).values()
                    if isinstance(groups, list)
                    for g in groups
                    if isinstance(g, dict)
                    for h in g.get("hooks", [])
                    if inst.is_ours(h)
                ]
                out.print(
                    f"  {scope}: {path}: " + (f"installed ({len(cmds)} entries)" if cmds else "not installed"),
                    markup=False,
                    soft_wrap=True,
                )
        else:
            for item in ai.status(agent.value, project_dir):
                state = f"installed ({len(item['commands'])} entries)" if item["installed"] else "not installed"
                out.print(f"  {item['scope']}: {item['file']}: {state}", markup=False, soft_wrap=True)
                for sw in item.get("switched", []):
                    out.print(f"    switched on by install: {sw['what']} in {sw['file']}", markup=False, soft_wrap=True)
                for t in item["todo"]:
                    out.print(f"    to do: {t}", markup=False, soft_wrap=True)
        s = log.summary(agent.value, records)
        if s["denials"] or s["errors"]:
            tools = ", ".join(f"{t} {n}" for t, n in s["tools"])
            out.print(
                f"  log: {s['denials']} denials in {s['sessions']} sessions (last {s['last_denial']}; {tools}); "
                f"{s['errors']} failures (failed open)" + (f", last: {s['last_error']}" if s["last_error"] else ""),
                markup=False,
                soft_wrap=True,
            )
