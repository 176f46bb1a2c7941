"""``loopscope hook``: run loopscope as a live guard inside an agent (Claude Code), and install it there.

``loopscope hook claude-code`` is the hook itself (the installed entries call the lighter ``loopscope-hook
claude-code``, which behaves the same); ``loopscope hook install claude-code`` / ``uninstall claude-code`` merge its
entries into Claude Code's settings.json.
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
UserOpt = Annotated[bool, typer.Option("--user", help="~/.claude/settings.json (the default).")]
ProjectOpt = Annotated[bool, typer.Option("--project", help="<project>/.claude/settings.json.")]
LocalOpt = Annotated[bool, typer.Option("--local", help="<project>/.claude/settings.local.json.")]
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
    agent: Annotated[Agent, typer.Argument(parser=Choice(Agent), help="The agent: claude-code.")],
    user: UserOpt = False,
    project: ProjectOpt = False,
    local: LocalOpt = False,
    project_dir: ProjectDirOpt = None,
    policy: PolicyOpt = None,
    settings: SettingsOpt = None,
    sets: SetOpt = None,
) -> None:
    """Add the hook to Claude Code's settings.json (merging: other hooks are kept; a previous loopscope entry is
    replaced) and print what changed."""
    from analyzer.hook import install as inst
    from analyzer.hook.settings import hook_policy, settings_path

    pol = hook_policy(policy, settings, _sets(sets))  # a bad policy or setting fails here, not on every call
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
    agent: Annotated[Agent, typer.Argument(parser=Choice(Agent), help="The agent: claude-code.")],
    user: UserOpt = False,
    project: ProjectOpt = False,
    local: LocalOpt = False,
    project_dir: ProjectDirOpt = None,
) -> None:
    """Remove loopscope's hook entries from Claude Code's settings.json (only those; other hooks stay)."""
    from analyzer.hook import install as inst

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
