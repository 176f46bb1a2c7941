"""pi-anti-doom-loop (seed 002; numbers from the published v0.0.7 ``extensions/detector.ts`` and ``controller.ts``).

Tool calls are checked before they run: a key seen ``warn`` times counting the current call and the last ``window``
executed calls (the source's ``recentSigs`` holds the last 10 recorded calls and adds the current one), or a tool
whose last ``fails`` results were all errors, blocks the call. Blocked calls are not recorded and their results are
ignored; blocking the same key a second time in a prompt aborts the turn. From the seed (newer than v0.0.7):
near-identical arguments (shared-token score >= ``similarity``, over words that keep paths, patterns and file names —
calls on different objects never match; ``call_words``) count as the same call, scripts (``exact_only_tools``)
compare by identity only, ``loop_ack`` clears a repeat block's cluster, and calls nested in a script get their own
stricter per-script rules.

Assistant text is checked at each message end (four rules, ``text_repeats`` each) and escalates per the controller:
the first hit in a prompt steers, later hits abort — the first abort of the session also queues one resume.
Everything resets at each user prompt except the session's resume budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from analyzer.detect.keys import args_json_text, fast_token_set, jaccard
from analyzer.guards.base import HALT, WARN, Call, Guard, Message, Param, Recommended, SweepSpec, Verdict, tools_text

_SEGMENT_SPLIT = re.compile(r"(?<=[.:!?])\s*")
_TRAILING_PUNCT = re.compile(r"[.:!?]+$")
ACK_TOOL = "loop_ack"


def normalize_text(text: str) -> str:
    """Trim and collapse whitespace runs, as the detector's ``normalizeText``."""
    return " ".join(text.split())


def repeated_segment(norm: str, threshold: int, min_len: int = 16) -> str | None:
    """The first sentence-ish segment (split after ``.:!?``, trailing punctuation dropped, 16+ chars) that occurs
    ``threshold`` times inside one message."""
    counts: dict[str, int] = {}
    for raw in _SEGMENT_SPLIT.split(norm):
        seg = _TRAILING_PUNCT.sub("", raw.strip())
        if len(seg) < min_len:
            continue
        n = counts.get(seg, 0) + 1
        if n >= threshold:
            return seg
        counts[seg] = n
    return None


_PLAIN_WORD = re.compile(r"[a-z0-9_-]{3,}")
_OBJECT_WORD = re.compile(r"(?=.*[a-z])(?=.*[^a-z0-9_-])")
_WORD_EDGES = "\"'`()[]{}<>,;:!?|&"


# Each lower-cased raw word's (trimmed word, kind: 0 neither, 1 plain, 2 object word), memoised: arguments repeat the
# same words (paths, flags, identifiers) call after call, and the two regular expressions cost ~10x a dict lookup.
# Only words up to _WORD_KINDS_CHARS long are kept (a blob without spaces is one long word, rarely seen twice), so the
# memo stays under ~40 MB.
_WORD_KINDS: dict[str, tuple[str, int]] = {}
_WORD_KINDS_MAX = 1 << 17  # entries kept before the memo starts again
_WORD_KINDS_CHARS = 80


def _word_kind(raw: str) -> tuple[str, int]:
    w = raw.strip(_WORD_EDGES)
    kind = 1 if _PLAIN_WORD.fullmatch(w) else 2 if _OBJECT_WORD.match(w) else 0
    if len(raw) <= _WORD_KINDS_CHARS:
        if len(_WORD_KINDS) >= _WORD_KINDS_MAX:
            _WORD_KINDS.clear()
        _WORD_KINDS[raw] = (w, kind)
    return w, kind


def call_words(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The words the seed's near-identical call rule compares: lower-cased, split on whitespace, quotes and brackets
    trimmed from each end; plain words of 3+ ``[a-z0-9_-]`` characters, and — unlike the text rule, which drops any
    word carrying punctuation — the words that name an object: paths, patterns, file names, URLs (a letter and a
    character outside ``[a-z0-9_-]``, e.g. ``src/a.py``, ``1,200p``, ``*.ts``). Second, those object words alone:
    found in the same pass, since a call's arguments can be long and every call of a window is compared."""
    words, objects = set(), set()
    kinds = _WORD_KINDS
    for raw in text.lower().split():
        w, kind = kinds.get(raw) or _word_kind(raw)
        if kind:
            words.add(w)
            if kind == 2:
                objects.add(w)
    return frozenset(words), frozenset(objects)


def call_tokens(call: Call) -> frozenset[str]:
    """The near-identical words of a call's argument values (``call_words``; cached on the call with its object
    words)."""
    toks = call.tokens
    if toks is None:
        toks, call.objects = call_words(args_json_text(call.args))
        call.tokens = toks
    return toks


def call_objects(call: Call) -> frozenset[str]:
    """The object words (paths, patterns, file names) of a call's arguments (``call_words``; cached on the call: a
    call is compared with every call in the window)."""
    if call.objects is None:
        call_tokens(call)
    assert call.objects is not None
    return call.objects


def call_score(a: Call, b: Call) -> float:
    """Shared-token score of two calls' arguments; 0 when they act on different objects (their paths, patterns or
    file names differ), so ``sed -n '1,200p' src/a.py`` never matches ``... src/b.py``."""
    if call_objects(a) != call_objects(b):
        return 0.0
    return jaccard(call_tokens(a), call_tokens(b))


class TextLoops:
    """The four assistant-text rules of ``checkText``, in the source's order and with its side effects (a rule that
    fires returns before the later rules update their state)."""

    def __init__(self, threshold: int, window: int, similarity: float) -> None:
        self.t, self.window, self.sim = threshold, window, similarity
        self.texts: list[tuple[str, frozenset[str]]] = []
        self.last: tuple[str, frozenset[str]] | None = None
        self.streak = 0

    def check(self, text: str) -> str | None:
        norm = normalize_text(text)
        if not norm:
            return None
        seg = repeated_segment(norm, self.t)
        if seg is not None:
            return f"message repeats {seg[:60]!r} {self.t}+ times"
        toks = fast_token_set(norm)
        exact = 1 + sum(1 for t, _ in self.texts if t == norm)
        self.texts.append((norm, toks))
        if len(self.texts) > self.window:
            del self.texts[0]
        if exact >= self.t:
            return f"identical text {exact} times within the last {self.window} messages"
        last = self.last
        similar = last is not None and (last[0] == norm or jaccard(toks, last[1]) >= self.sim)
        self.streak = self.streak + 1 if similar else 1
        self.last = (norm, toks)
        if self.streak >= self.t:
            return f"identical or near-identical text {self.streak} times in a row"
        near = 1 + sum(1 for t, tt in self.texts if t != norm and jaccard(toks, tt) >= self.sim)
        if near >= self.t:
            return f"near-identical text {near} times within the last {self.window} messages"
        return None


class _Entry:
    __slots__ = ("key", "tool", "call")

    def __init__(self, key: str, tool: str, call: Call) -> None:
        self.key, self.tool, self.call = key, tool, call


class PiGuard(Guard):
    ENGINE = "pi-anti-doom-loop"
    SOURCE = "pi-anti-doom-loop v0.0.7 extensions/detector.ts + controller.ts; seed 002 for drift, ack, nested"
    UNIT = "call (window of executed calls); assistant message (text)"
    RANK = 3
    SEES_NESTED = True
    DESCRIPTION = (
        "Seed guard, the seed README's behaviour (newer than the published v0.0.7, which is "
        "pi-anti-doom-loop@0.0.7): block at 3 same or near-identical calls (same paths and patterns) in a "
        "10-call window or 3 failures; re-issue aborts; text loops steer then abort."
    )
    ALIASES = ("pi", "anti-doom-loop", "pi-anti-doom-loop@seed")
    SEED = True
    PASTE_NOTES = {
        "open-codesign": "on a streak of identical calls pi blocks at {warn} and aborts at {halt}; open-codesign "
        "counts calls in a row (and 2-/3-call cycles), not within a window",
        "gitagent": "gitagent stops a streak of identical calls at {halt} like pi's abort; it does not count calls "
        "spread over a window",
    }
    TRANSLATION_NOTE = (
        "pi blocks the N-th occurrence within its window and aborts on the re-issue, so a streak of "
        "identical calls stops at {halt} as here"
    )
    SWEEP = SweepSpec(
        "window count or near-identical run; 3 failures block",
        True,
        one_threshold=True,
        windows=(5, 10, 20),
        similarities=(None, 0.55, 0.7, 0.85),
        rule="window",
        text_rules=True,
        caveat=(
            "the window counts calls pi would have blocked (pi does not record them); near-identical arguments are "
            "compared with the previous call of the tool only and over the scan's words (punctuated words dropped; "
            "the replay keeps paths and patterns, so it matches fewer calls); text rules and script blocks come from "
            "the stored counters (texts over a window of 10); cross-script aborts, loop_ack and the fail rate are not "
            "modelled."
        ),
    )
    PARAMS = {
        "warn": Param(
            "int",
            3,
            "PI_ANTI_LOOP_REPEATS: occurrences of a call (current included) that block it.",
            minimum=2,
            below_min="default",
        ),
        "window": Param(
            "int",
            10,
            "PI_ANTI_LOOP_WINDOW: executed calls (and texts, results) remembered.",
            minimum=2,
            below_min="default",
        ),
        "fails": Param(
            "int",
            3,
            "PI_ANTI_LOOP_FAILS: consecutive errors of one tool that block its next call.",
            minimum=2,
            below_min="default",
        ),
        "fail_rate": Param(
            "float",
            0.0,
            "PI_ANTI_LOOP_FAIL_RATE: block a tool whose error share in the window reaches this (0 = off).",
            minimum=0.0,
        ),
        "fail_rate_min": Param(
            "int",
            3,
            "PI_ANTI_LOOP_FAIL_RATE_MIN: results of the tool needed before the rate applies.",
            minimum=2,
            below_min="default",
        ),
        "text_repeats": Param(
            "int", 3, "PI_ANTI_LOOP_TEXT_REPEATS: repeats that fire each text rule.", minimum=2, below_min="default"
        ),
        "similarity": Param(
            "float",
            0.55,
            "Shared-token score at which texts (and, per the seed, call arguments) count as near-identical.",
            minimum=0.0,
        ),
        "near_identical_calls": Param(
            "bool",
            True,
            "Near-identical arguments of the same tool count as one call (seed; v0.0.7 compared exact keys only).",
        ),
        "exact_only_tools": Param("tools", ("codemode",), "Tools compared by exact identity only (scripts)."),
        "exclude_tools": Param("tools", (), "PI_ANTI_LOOP_TOOLS_EXCLUDE: tools never checked nor recorded."),
        "nested_repeats": Param(
            "int", 2, "Inside one script, occurrences of a call that block it.", minimum=2, below_min="default"
        ),
        "nested_memory": Param("int", 100, "Calls each script remembers.", minimum=1),
        "ack_per_tool": Param("int", 2, "loop_ack acknowledgements per tool per prompt.", minimum=0),
        "resume_budget": Param("int", 1, "Aborts per session that also queue a resume.", minimum=0),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        p = params
        self._t, self._w, self._fails = p["warn"], p["window"], p["fails"]
        self._rate, self._rate_min = p["fail_rate"], p["fail_rate_min"]
        self._sim, self._near = p["similarity"], p["near_identical_calls"]
        self._exact_only = frozenset(p["exact_only_tools"])
        self._exclude = frozenset(p["exclude_tools"])
        self._nested_t, self._nested_mem = p["nested_repeats"], p["nested_memory"]
        self.resumes = 0  # session-scoped
        self.on_user()

    # -- calibration -----------------------------------------------------------------------------------------------
    @classmethod
    def sweep_settings(cls, row: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        sim = row.get("similarity")
        changes: dict[str, Any] = {
            "warn": int(row["warn"]),
            "window": int(row["window"] or params["window"]),
            "near_identical_calls": sim is not None,
        }
        if sim is not None:
            changes["similarity"] = float(sim)
        return changes

    @classmethod
    def paste(cls, rec: Recommended, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
        """Its environment variables as v0.0.7 reads them (``extensions/detector.ts`` ``readOptions``). v0.0.7 has
        no variable for a near-identical bar, so a swept similarity is reported as a comment."""
        fails = int(params.get("fails", int(defaults["fails"])))
        return cls._snippet(
            rec.warn, rec.window or int(defaults["window"]), fails, similarity=rec.similarity, swept_similarity=True
        )

    @classmethod
    def streak_stop(cls, warn: int, halt: int) -> tuple[int, int]:
        return warn, warn + 1  # blocks the R-th occurrence, aborts on the re-issue

    @classmethod
    def translate(cls, base: type[Guard], warn: int, halt: int, defaults: Mapping[str, Any]) -> str:
        why = cls.translation_note(base, warn, halt)
        return cls._snippet(halt - 1, int(defaults["window"]), int(defaults["fails"]), why)

    @classmethod
    def _snippet(
        cls,
        repeats: int,
        window: int,
        fails: int,
        why: str | None = None,
        similarity: float | None = None,
        swept_similarity: bool = False,
    ) -> str:
        lines = [f"# translation: {why}"] if why else []
        lines += [
            f"PI_ANTI_LOOP_REPEATS={max(2, repeats)}",
            f"PI_ANTI_LOOP_WINDOW={window}",
            f"PI_ANTI_LOOP_FAILS={fails}",
        ]
        if swept_similarity:
            if similarity is None:
                lines.append("# near-identical arguments off: exact arguments only, as v0.0.7 compares them")
            else:
                lines.append(
                    f"# near-identical arguments at a shared-token score >= {similarity:g}: v0.0.7 has no "
                    "variable for it (it compares exact arguments); newer releases count them at 0.55"
                )
        return "\n".join(lines)

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        near = (
            f" (near-identical args >= {p['similarity']} on the same paths and patterns count)"
            if p["near_identical_calls"]
            else ""
        )
        return {
            "key": "name + canonical JSON" + near,
            "window": f"current call + last {p['window']} executed calls; last {p['window']} texts",
            "reset": "each user prompt (resume budget lasts the session)",
            "exemptions": f"excluded: {tools_text(p['exclude_tools'])}; exact-only: "
            f"{tools_text(p['exact_only_tools'])}",
            "blocked_count": "no (blocked calls not recorded)",
            "escalation": "block; same call blocked again -> abort; text: steer, then abort (+1 resume per session)",
            "thresholds": f"block at {p['warn']} in window, {p['fails']} consecutive fails; text rules at "
            f"{p['text_repeats']}; in a script at {p['nested_repeats']}",
        }

    # -- state ------------------------------------------------------------------------------------------------------
    def on_user(self) -> None:
        self.sigs: list[_Entry] = []
        self.results: list[tuple[str, bool]] = []
        self.blocked_by_sig: dict[str, int] = {}
        self.text = TextLoops(self.p["text_repeats"], self._w, self._sim)
        self.steered = False
        self.last_block: tuple[str, Call] | None = None  # (kind, call)
        self.acks: dict[str, int] = {}
        self.scripts: dict[str, list[_Entry]] = {}
        self.script_failed: dict[str, set[str]] = {}
        self.nested_blocked: dict[str, str] = {}  # key -> script that first blocked it

    def _similar(self, e: _Entry, key: str, call: Call) -> bool:
        return e.key == key or self._near_score(e, key, call) is not None

    def _near_score(self, e: _Entry, key: str, call: Call) -> float | None:
        """The shared-token score of a near-identical (not identical) earlier call, else None."""
        if e.key == key or not self._near or e.tool != call.tool or call.tool in self._exact_only:
            return None
        score = call_score(e.call, call)
        return score if score >= self._sim else None

    def _near_calls(self, key: str, call: Call) -> list[tuple[float, Call]]:
        """``(score, earlier call)`` of each near-identical call in the window (``_near_score`` of every entry, with
        its tests hoisted out of the loop: it runs for every call of every replay)."""
        tool = call.tool
        if not self._near or tool in self._exact_only:
            return []
        bar = self._sim
        near = []
        for e in self.sigs:
            if e.tool == tool and e.key != key:
                score = call_score(e.call, call)
                if score >= bar:
                    near.append((score, e.call))
        return near

    def _consecutive_fails(self, tool: str) -> int:
        n = 0
        for t, err in reversed(self.results):
            if not err or t != tool:
                break
            n += 1
        return n

    # -- tool calls -------------------------------------------------------------------------------------------------
    def on_call(self, call: Call) -> Verdict | None:
        if call.parent is not None:
            return self._nested(call)
        tool = call.tool
        if tool == ACK_TOOL:
            self._ack()
            return None
        if tool in self._exclude:
            return None
        key = call.key
        exact = 1 + sum(1 for e in self.sigs if e.key == key)
        near = self._near_calls(key, call)
        total = exact + len(near)
        reasons = []
        if exact >= self._t:
            reasons.append(
                f"exact repeat: {tool!r} called with the same arguments {exact} times in the last {self._w} calls"
            )
        elif total >= self._t:
            score, earlier = near[-1]  # the latest near-identical call in the window
            reasons.append(
                f"near-identical: {tool!r} called with the same or near-identical arguments {total} times "
                f"in the last {self._w} calls ({exact} identical; shared-token score {score:.2f} with "
                f"call {earlier.call_id})"
            )
        reasons += self._failure_reasons(tool)
        if reasons:
            self.last_block = ("repeat" if total >= self._t else "failure", call)
        return self._record_or_block(call, reasons)

    def _failure_reasons(self, tool: str) -> list[str]:
        """The failure-run and fail-rate rules, which every pi variant applies after its repeat rule."""
        reasons = []
        fails = self._consecutive_fails(tool)
        if fails >= self._fails:
            reasons.append(f"failure run: {tool!r} failed {fails} consecutive times")
        if self._rate > 0:
            mine = [err for t, err in self.results if t == tool]
            if len(mine) >= self._rate_min and sum(mine) / len(mine) >= self._rate:
                reasons.append(f"fail rate: {tool!r} failed {sum(mine)} of {len(mine)} calls in the window")
        return reasons

    def _record_or_block(self, call: Call, reasons: list[str]) -> Verdict | None:
        """No reason: the call enters the window. Otherwise it is blocked (not recorded); re-issuing a call that was
        blocked before aborts."""
        if not reasons:
            self.sigs.append(_Entry(call.key, call.tool, call))
            if len(self.sigs) > self._w:
                del self.sigs[0]
            return None
        count = self.blocked_by_sig.get(call.key, 0) + 1
        self.blocked_by_sig[call.key] = count
        reason = "; ".join(reasons)
        if count > 1:
            return Verdict(HALT, "abort", reason + "; the same call was blocked before", True)
        return Verdict(WARN, "block", reason, True)

    def _ack(self) -> None:
        """``loop_ack`` clears the last repeat block's near-identical cluster from the window, within its budget and
        never for a tool failing since its last success."""
        if self.last_block is None:
            return
        kind, blocked = self.last_block
        tool = blocked.tool
        if kind != "repeat" or self.acks.get(tool, 0) >= self.p["ack_per_tool"]:
            return
        for t, err in reversed(self.results):
            if t == tool:
                if err:
                    return
                break
        self.acks[tool] = self.acks.get(tool, 0) + 1
        self.sigs = [e for e in self.sigs if not self._similar(e, blocked.key, blocked)]
        self.last_block = None

    def _nested(self, call: Call) -> Verdict | None:
        if call.tool in self._exclude:
            return None
        script = call.parent or ""
        key = call.key
        first = self.nested_blocked.get(key)
        if first is not None and first != script:
            return Verdict(HALT, "abort", "script repeat: a call blocked in an earlier script was issued again", True)
        entries = self.scripts.setdefault(script, [])
        if key in self.script_failed.get(script, ()):
            reason = "script failure: the identical call already failed inside this script"
        else:
            total = 1 + sum(1 for e in entries if self._similar(e, key, call))
            if total < self._nested_t:
                entries.append(_Entry(key, call.tool, call))
                if len(entries) > self._nested_mem:
                    del entries[0]
                return None
            reason = f"script repeat: called {total} times inside one script"
        self.nested_blocked.setdefault(key, script)
        return Verdict(WARN, "block", reason, True)

    def on_result(self, call: Call) -> Verdict | None:
        if call.parent is not None:
            if call.is_error:
                self.script_failed.setdefault(call.parent, set()).add(call.key)
            return None
        self.results.append((call.tool, bool(call.is_error)))
        if len(self.results) > self._w:
            del self.results[0]
        return None

    # -- assistant text -----------------------------------------------------------------------------------------------
    def on_message(self, msg: Message) -> Verdict | None:
        if not msg.text:
            return None
        reason = self.text.check(msg.text)
        if reason is None:
            return None
        if not self.steered:
            self.steered = True
            return Verdict(WARN, "steer", "text: " + reason, False)
        if self.resumes < self.p["resume_budget"]:
            self.resumes += 1
            return Verdict(HALT, "abort+resume", "text: " + reason, False)
        return Verdict(HALT, "abort", "text: " + reason, False)
