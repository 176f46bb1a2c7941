"""The recommended setting as text to paste into each seed guard (and the base guard when it is another one).

The base policy's own guard gets its exact setting. A seed guard with other semantics gets a *translation* with a
comment saying what differs and which stop point it preserves (the halt of a streak of identical calls):

- open-codesign: the constants ``TOOL_LOOP_WARN_REPEATS`` / ``TOOL_LOOP_HALT_REPEATS`` (seed 000,
  ``packages/core/src/tool-loop-guard.ts``).
- gitagent: the ``createLoopGuard`` options ``maxRepeats`` and ``maxTurns`` (seed 001, ``src/loop-guard.ts``; the turn
  cap can also come from the agent manifest's ``runtime.max_turns``).
- pi-anti-doom-loop: its environment variables as v0.0.7 reads them (``extensions/detector.ts`` ``readOptions``):
  ``PI_ANTI_LOOP_REPEATS``, ``PI_ANTI_LOOP_WINDOW``, ``PI_ANTI_LOOP_FAILS``. v0.0.7 has no variable for a
  near-identical bar (it compares exact arguments; near-identical calls come from the seed's newer release), so a
  swept similarity is reported as a comment. pi blocks the R-th occurrence and aborts when the blocked call is
  re-issued: a streak of identical calls stops at R + 1, which is what the translations match.
"""

from __future__ import annotations

from typing import Any

GUARD_FILES = {
    "open-codesign": "packages/core/src/tool-loop-guard.ts",
    "gitagent": "src/loop-guard.ts",
    "gemini-cli": "packages/core/src/services/loopDetectionService.ts",
    "cline": "src/core/task/loop-detection.ts",
    "roo-code": "src/core/tools/ToolRepetitionDetector.ts",
}


def _codesign(warn: int, halt: int, why: str | None = None) -> str:
    head = f"// translation: {why}\n" if why else ""
    return (f"{head}// {GUARD_FILES['open-codesign']}\n"
            f"const TOOL_LOOP_WARN_REPEATS = {warn};\nconst TOOL_LOOP_HALT_REPEATS = {halt};")


def _gitagent(halt: int, max_turns: int, why: str | None = None) -> str:
    head = f"// translation: {why}\n" if why else ""
    return (f"{head}// {GUARD_FILES['gitagent']}\ncreateLoopGuard({{ maxRepeats: {max(2, halt)}, maxTurns: {max_turns} }})\n"
            f"// or set the turn cap in the agent manifest: runtime.max_turns: {max_turns}")


def _pi(repeats: int, window: int, fails: int, why: str | None = None, similarity: float | None = None,
        swept_similarity: bool = False) -> str:
    lines = [f"# translation: {why}"] if why else []
    lines += [f"PI_ANTI_LOOP_REPEATS={max(2, repeats)}", f"PI_ANTI_LOOP_WINDOW={window}",
              f"PI_ANTI_LOOP_FAILS={fails}"]
    if swept_similarity:
        if similarity is None:
            lines.append("# near-identical arguments off: exact arguments only, as v0.0.7 compares them")
        else:
            lines.append(f"# near-identical arguments at a shared-token score >= {similarity:g}: v0.0.7 has no "
                         "variable for it (it compares exact arguments); newer releases count them at 0.55")
    return "\n".join(lines)


_PI_STREAK = ("pi blocks the N-th occurrence within its window and aborts on the re-issue, so a streak of identical "
              "calls stops at {halt} as here")


def paste_settings(base: str, warn: int, halt: int, window: int | None, similarity: float | None,
                   params: dict[str, Any], defaults: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Guard name -> text to paste, for the recommended (warn, halt, window, similarity) of ``base`` (whose other
    settings are ``params``); ``defaults`` holds each seed guard's default settings."""
    git_turns = int(params.get("max_turns", defaults["gitagent"]["max_turns"])) if base == "gitagent" else \
        int(defaults["gitagent"]["max_turns"])
    pi_window = int(defaults["pi-anti-doom-loop"]["window"])
    pi_fails = int(defaults["pi-anti-doom-loop"]["fails"])
    out: dict[str, str] = {}
    if base == "open-codesign":
        out["open-codesign"] = _codesign(warn, halt)
        out["gitagent (translation)"] = _gitagent(
            halt, git_turns, "gitagent counts identical calls in a row only (no 2-/3-call cycles, no warning) and "
                             "terminates after the call has run")
        out["pi-anti-doom-loop (translation)"] = _pi(halt - 1, pi_window, pi_fails, _PI_STREAK.format(halt=halt))
    elif base == "gitagent":
        out["gitagent"] = _gitagent(halt, git_turns)
        out["open-codesign (translation)"] = _codesign(
            halt, halt, "open-codesign also halts 2- and 3-call cycles; warn = halt means no separate warning, "
                        "as gitagent has none")
        out["pi-anti-doom-loop (translation)"] = _pi(halt - 1, pi_window, pi_fails, _PI_STREAK.format(halt=halt))
    elif base == "pi-anti-doom-loop":
        fails = int(params.get("fails", pi_fails))
        out["pi-anti-doom-loop"] = _pi(warn, window or pi_window, fails, similarity=similarity, swept_similarity=True)
        out["open-codesign (translation)"] = _codesign(
            warn, warn + 1, f"on a streak of identical calls pi blocks at {warn} and aborts at {warn + 1}; "
                            "open-codesign counts calls in a row (and 2-/3-call cycles), not within a window")
        out["gitagent (translation)"] = _gitagent(
            warn + 1, git_turns, f"gitagent stops a streak of identical calls at {warn + 1} like pi's abort; it "
                                 "does not count calls spread over a window")
    else:
        out[base] = _other(base, warn, halt)
        why = f"{base} counts {'repeated blocks of up to 5 calls' if base == 'gemini-cli' else 'calls in a row'}"
        out["open-codesign (translation)"] = _codesign(warn, halt, why + "; open-codesign counts streaks and 2-/3-"
                                                                        "call cycles, resetting at user prompts")
        out["gitagent (translation)"] = _gitagent(halt, git_turns, why + "; gitagent counts calls in a row only")
        out["pi-anti-doom-loop (translation)"] = _pi(halt - 1, pi_window, pi_fails, _PI_STREAK.format(halt=halt))
    return out


def _other(base: str, warn: int, halt: int) -> str:
    where = f"// {GUARD_FILES[base]}"
    if base == "gemini-cli":
        return f"{where}\nconst TOOL_CALL_LOOP_THRESHOLD = {halt};"
    if base == "cline":
        return (f"{where} (constant names not verified)\n// soft notice at exactly {warn} identical calls in a row, "
                f"hard stop at {halt}")
    return (f"{where} (setting name not verified)\n// refuse the {halt}th identical call in a row: repetition "
            f"limit {halt - 1}")
