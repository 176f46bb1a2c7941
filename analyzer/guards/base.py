"""What every guard simulator shares: the event stream it reads, the verdict it returns, and its declared settings.

A guard is a pure state machine fed one session's events in transcript order:

- ``on_user()``            a user prompt was delivered (most guards reset here);
- ``on_message(msg)``      an assistant message ended; its text is known, its calls have not run yet;
- ``on_call(call)``        a call is about to run (``beforeToolCall``);
- ``on_result(call)``      the call ran and its result arrived (``afterToolCall``); never sent for a call the guard
                           blocked or for a call the transcript has no result for;
- ``on_step_end(msg)``     every result of the message is in; the next model request is about to start.

Each hook may return a ``Verdict`` (``None`` means ok). The replay never changes the transcript: a call the guard
blocks is still followed by the recorded calls, and the guard sees exactly what it would have seen at runtime —
a blocked call enters its state only if that guard records blocked calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

OK, WARN, HALT = 0, 1, 2
LEVELS = ("ok", "warn", "halt")


class Verdict(NamedTuple):
    level: int  # WARN or HALT (ok is ``None``)
    action: str  # the guard's own word: block, steer, warn, notice, halt, terminate, abort, refuse, ask, stuck
    reason: str
    blocked: bool  # the guard kept the call from running (its result never reaches the guard)


@dataclass(slots=True, eq=False)
class Call:
    """One recorded tool call, with the three keys the store keeps (guards pick the one they really use)."""

    index: int  # position in ``Session.calls``
    seq: int
    call_id: str
    turn: int  # position of the issuing message in ``Session.turns``
    user_turn: int
    tool: str
    args: str  # canonical JSON (truncated for huge payloads)
    key: str  # canonical
    key_ordered: str  # insertion order, JSON.stringify
    key_shallow: str  # top-level keys sorted (Roo Code)
    result_key: str | None
    is_error: bool | None
    parent: str | None
    tokens: frozenset[str] | None = None  # shared-token set of the arguments, computed on first use
    objects: frozenset[str] | None = None  # the object words among ``tokens`` (paths, patterns), likewise
    # The action key (``calls.action_key``: commentary and tuning dropped, ``detect.semantics``) and the action
    # arguments (None: equal to ``args``); None when the caller did not give them (computed from ``args`` then).
    action: str | None = None
    action_args: str | None = None
    # A poll whose result says the process still runs (``semantics.running_poll``): waiting, not a repeat to count.
    waiting: bool = False

    @property
    def has_result(self) -> bool:
        return self.result_key is not None


@dataclass(slots=True, eq=False)
class Message:
    """An assistant message (one API response) and the calls it issued, in order."""

    turn: int  # position in ``Session.turns``
    turn_id: str
    user_turn: int
    text: str | None
    calls: list[Call] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class UserPrompt:
    turn: int
    user_turn: int


Step = Message | UserPrompt


class Recommended(NamedTuple):
    """A recommended setting from the calibration sweep (window and similarity only for guards that sweep them)."""

    warn: int
    halt: int
    window: int | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class SweepSpec:
    """How the calibration sweep maps one guard onto the stored signals (plain data: the sweep's polars code reads it).

    ``measure`` in words; ``has_warn``: the guard warns before it halts; ``one_threshold``: one swept threshold
    (taken from the halt range, rows carry warn = halt); ``windows`` / ``similarities``: the extra swept dimensions
    (``(None,)``: none); ``cycles``: the longest cycle in the measure (0: streak only); ``rule``: the sweep's rule on
    top of the measure (``max``: the measure alone, ``turn-cap``: gitagent's maxTurns and batches, ``mistakes``:
    cline's mistake limit, ``window``: pi's window, failures and aborts); ``text_rules``: the guard has text rules no
    swept setting changes (read from ``text_signals``); ``caveat``: what the sweep approximates."""

    measure: str
    has_warn: bool
    caveat: str
    one_threshold: bool = False
    windows: tuple[int | None, ...] = (None,)
    similarities: tuple[float | None, ...] = (None,)
    cycles: int = 0
    rule: str = "max"
    text_rules: bool = False

    @property
    def sweeps_window(self) -> bool:
        """Whether windows and similarity bars are swept too (``--windows``, ``--similarities``)."""
        return self.windows != (None,) or self.similarities != (None,)


@dataclass(frozen=True)
class Param:
    """One setting a guard engine accepts, with the guard's own handling of values below the minimum."""

    kind: str  # int | float | bool | str | tools
    default: Any
    doc: str
    minimum: float | None = None
    below_min: str = "error"  # error | default (pi falls back) | clamp (gitagent raises to the minimum)
    choices: tuple[str, ...] | None = None


class Guard:
    """Base class: every hook is a no-op returning ok. Subclasses declare their engine's metadata and settings."""

    ENGINE: ClassVar[str]
    RANK: ClassVar[int]  # listing order of the presets
    SOURCE: ClassVar[str]
    UNIT: ClassVar[str]
    PARAMS: ClassVar[dict[str, Param]]
    DESCRIPTION: ClassVar[str]  # one line for `loopscope policies`
    ALIASES: ClassVar[tuple[str, ...]] = ()  # other names the preset answers to
    GUARD_FILE: ClassVar[str | None] = None  # the guard's source file in its repository (for the text to paste)
    SWEEP: ClassVar[SweepSpec | None] = None  # how calibration sweeps it (None: replay only)
    # A seed guard gets a translated setting to paste whatever guard was calibrated (``translate``).
    SEED: ClassVar[bool] = False
    # Its recommended setting as text to paste, for guards whose ``paste`` is a template: {file} (the file comment),
    # {warn}, {halt}, {below_halt} (halt - 1).
    PASTE_TEMPLATE: ClassVar[str] = ""
    # What the guard counts, in words, for the notes of translations from it.
    COUNTS: ClassVar[str] = "calls in a row"
    # Its own note for a translation of its setting into a seed guard: seed -> text ({warn}, {halt}: the streak stop).
    PASTE_NOTES: ClassVar[Mapping[str, str]] = {}
    # A seed's note for translations from guards without their own ({base}, {counts}: the base's; {warn}, {halt}).
    TRANSLATION_NOTE: ClassVar[str] = ""
    # gitagent: a run stops only after a batch whose every result said terminate.
    BATCH_STOP: ClassVar[bool] = False
    # Whether the guard sees calls made inside a script (``parent_call_id``); only pi's codemode wiring does.
    SEES_NESTED: ClassVar[bool] = False

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.p = params

    # -- metadata for `loopscope policies` -----------------------------------------------------------------------------
    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        """key, window, reset, exemptions, blocked_count, escalation, thresholds — in words, for the listing."""
        raise NotImplementedError

    # -- calibration: the text to paste --------------------------------------------------------------------------------
    @classmethod
    def sweep_settings(cls, row: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        """The settings a sweep row (warn, halt, window, similarity) stands for."""
        assert cls.SWEEP is not None
        if cls.SWEEP.has_warn:
            return {"warn": int(row["warn"]), "halt": int(row["halt"])}
        return {"halt": int(row["halt"])}

    @classmethod
    def paste(cls, rec: Recommended, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
        """The recommended setting of this guard as text to paste (``params``: the chosen policy's settings,
        ``defaults``: the guard's own); by default ``PASTE_TEMPLATE`` filled in."""
        if not cls.PASTE_TEMPLATE:
            raise NotImplementedError(f"{cls.ENGINE} has no text to paste")
        return cls.PASTE_TEMPLATE.format(file=cls.file_comment(), warn=rec.warn, halt=rec.halt, below_halt=rec.halt - 1)

    @classmethod
    def file_comment(cls, why: str | None = None) -> str:
        """The first lines of a JavaScript snippet: why it is a translation (if it is one), then the guard's file."""
        head = f"// translation: {why}\n" if why else ""
        return f"{head}// {cls.GUARD_FILE}"

    @classmethod
    def streak_stop(cls, warn: int, halt: int) -> tuple[int, int]:
        """Where a recommended (warn, halt) warns and stops a streak of identical calls: what translations keep."""
        return warn, halt

    @classmethod
    def translation_note(cls, base: type[Guard], warn: int, halt: int) -> str:
        """Why a seed guard's translation of ``base``'s setting differs: the base's own note, else the seed's."""
        note = base.PASTE_NOTES.get(cls.ENGINE, cls.TRANSLATION_NOTE)
        return note.format(base=base.ENGINE, counts=base.COUNTS, warn=warn, halt=halt)

    @classmethod
    def translate(cls, base: type[Guard], warn: int, halt: int, defaults: Mapping[str, Any]) -> str:
        """A seed guard's translation of ``base``'s recommended setting (``warn``, ``halt`` of the streak stop)."""
        raise NotImplementedError

    # -- hooks ---------------------------------------------------------------------------------------------------------
    def on_user(self) -> None:
        return None

    def on_message(self, msg: Message) -> Verdict | None:
        return None

    def on_call(self, call: Call) -> Verdict | None:
        return None

    def on_result(self, call: Call) -> Verdict | None:
        return None

    def on_step_end(self, msg: Message) -> Verdict | None:
        return None


# Shell tools across agents: their failures are a command's exit status, not a broken tool call.
SHELL_TOOLS = (
    "bash",
    "Bash",
    "execute_bash",
    "run_shell_command",
    "shell",
    "exec_command",
    "cmd_run",
    "run_command",
    "execute_command",
    "terminal",
)

KEY_ATTR = {"canonical": "key", "ordered": "key_ordered", "shallow": "key_shallow"}
KEY_WORDS = {
    "canonical": "name + canonical JSON (keys sorted at every depth)",
    "ordered": "name + JSON.stringify (insertion order)",
    "shallow": "name + JSON with top-level keys sorted",
}


def key_param(default: str) -> Param:
    return Param(
        "str",
        default,
        "Call key: canonical, ordered (JSON.stringify) or shallow (top level sorted).",
        choices=tuple(KEY_ATTR),
    )


KEY_PARAM = key_param("canonical")


def key_of(call: Call, key: str) -> str:
    return getattr(call, KEY_ATTR[key])


def tools_text(tools: Any) -> str:
    return ", ".join(tools) if tools else "none"
