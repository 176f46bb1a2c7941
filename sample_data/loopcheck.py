"""A deliberately simple reference check of the sample sessions: which loop signals fire, and on which calls.

Why: the README and ``.expected.json`` promise that ``loopscope scan`` finds exactly the listed loops. This check
recomputes every signal of docs/detectors.md (streak, cycle, window count, drift, failure run, text repeats, nested
repeats) on the calls as rendered, and ``make_samples.py`` refuses to write the samples when a signal fires outside the
episodes a scenario declared (or declares and explains as not-a-loop), or when a declared episode does not fire its own
kind. It is not loopscope's detector; it exists so the sample data cannot drift away from its own description.

Near-identical arguments are scored two ways, because a detector may tokenise either the canonical JSON of the
arguments or their string values: a declared drift must clear 0.55 both ways, and any other pair of consecutive calls
of one tool must stay below 0.55 both ways.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from transcript_writer import CallRec, Recorder, Step, TextRec

SIMILAR = 0.55
_WORD = re.compile(r"^[a-z0-9_-]{3,}$")
_VOLATILE = re.compile(
    r"^(?:Chunk ID|Wall time|Process running with session ID|Original token count|"
    r"Total output lines)\b.*$",
    re.M,
)
_WS = re.compile(r"\s+")


def tokens(text: str) -> frozenset[str]:
    """The shared-token words (docs/detectors.md#the-shared-token-score): lower-case, split on whitespace, keep
    words of 3+ chars of ``[a-z0-9_-]`` only."""
    return frozenset(w for w in text.lower().split() if _WORD.match(w))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def canonical(args: Any) -> str:
    return (
        args if isinstance(args, str) else json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    )


def _values(args: Any) -> Iterable[str]:
    if isinstance(args, str):
        yield args
    elif isinstance(args, dict):
        for v in args.values():
            yield from _values(v)
    elif isinstance(args, list):
        for v in args:
            yield from _values(v)


def arg_similarity(a: Any, b: Any) -> tuple[float, float]:
    """(score on canonical JSON, score on string values)."""
    return (
        jaccard(tokens(canonical(a)), tokens(canonical(b))),
        jaccard(tokens(" ".join(_values(a))), tokens(" ".join(_values(b)))),
    )


def key(c: CallRec) -> str:
    return f"{c.tool}\x00{canonical(c.args)}"


def result_key(c: CallRec) -> str | None:
    if c.result is None and c.is_error is None:
        return None
    return f"{'E' if c.is_error else 'R'}\x00{_WS.sub(' ', _VOLATILE.sub('', c.result or '')).strip()}"


def norm_text(t: str) -> str:
    return _WS.sub(" ", t).strip()


@dataclass
class Signal:
    kind: str
    seqs: frozenset[int]  # calls involved (for text: the calls of the repeating messages)
    steps: frozenset[int] = frozenset()  # id() of the Step objects involved (text)
    detail: str = ""


@dataclass
class Episode:
    """A loop a scenario declares. ``calls`` are the episode's ``Call`` objects (for text: the looping ``Step``s)."""

    kind: str
    calls: list[Any]
    stuck: bool
    period: int | None = None
    note: str = ""


@dataclass
class Benign:
    """A signal that fires on purpose but is not a loop (e.g. the edit -> build cycle), with the reason."""

    kind: str
    calls: list[Any]
    reason: str


@dataclass
class Checked:
    episodes: list[dict[str, Any]] = field(default_factory=list)
    benign: list[dict[str, Any]] = field(default_factory=list)


def signals(rec: Recorder) -> list[Signal]:
    out: list[Signal] = []
    top = [c for c in rec.calls if c.parent_id is None]
    turns = sorted({c.user_turn for c in top} | {t.user_turn for t in rec.texts})
    for ut in turns:
        calls = [c for c in top if c.user_turn == ut]
        keys = [key(c) for c in calls]
        # streak: a run of 3+ identical keys
        i = 0
        while i < len(calls):
            j = i
            while j + 1 < len(calls) and keys[j + 1] == keys[i]:
                j += 1
            if j - i + 1 >= 3:
                out.append(Signal("streak", frozenset(c.seq for c in calls[i : j + 1]), detail=f"{j - i + 1}x"))
            i = j + 1
        # cycle: a block of k (2..5) keys, at least 2 distinct, repeated unchanged at least twice in a row
        for k in range(2, 6):
            i = k
            while i < len(calls):
                if keys[i] != keys[i - k]:
                    i += 1
                    continue
                j = i
                while j + 1 < len(calls) and keys[j + 1] == keys[j + 1 - k]:
                    j += 1
                start = i - k
                if j - start + 1 >= 2 * k and len(set(keys[start : start + k])) >= 2:
                    out.append(
                        Signal(
                            "cycle",
                            frozenset(c.seq for c in calls[start : j + 1]),
                            detail=f"period {k}, {(j - start + 1) / k:.1f} reps",
                        )
                    )
                i = j + 1
        # window: a key seen 3+ times among the last 10 calls
        for i in range(len(calls)):
            win = range(max(0, i - 9), i + 1)
            same = [calls[w].seq for w in win if keys[w] == keys[i]]
            if len(same) >= 3:
                out.append(Signal("window", frozenset(same), detail=f"{len(same)} in 10"))
        # drift: consecutive calls of one tool, arguments differ but overlap >= 0.55 (either scoring)
        for a, b in zip(calls, calls[1:]):
            if a.tool == b.tool and key(a) != key(b):
                sj, sv = arg_similarity(a.args, b.args)
                if max(sj, sv) >= SIMILAR:
                    out.append(Signal("drift", frozenset({a.seq, b.seq}), detail=f"json {sj:.2f} values {sv:.2f}"))
        # failure: one tool failing 3+ times in a row
        i = 0
        while i < len(calls):
            if not calls[i].is_error:
                i += 1
                continue
            j = i
            while j + 1 < len(calls) and calls[j + 1].is_error and calls[j + 1].tool == calls[i].tool:
                j += 1
            if j - i + 1 >= 3:
                out.append(Signal("failure", frozenset(c.seq for c in calls[i : j + 1]), detail=f"{j - i + 1}x"))
            i = j + 1
        out.extend(_text_signals(rec, [t for t in rec.texts if t.user_turn == ut]))
    # nested: inside one script, any repeated or near-identical call
    parents = sorted({c.parent_id for c in rec.calls if c.parent_id is not None})
    for p in parents:
        kids = [c for c in rec.calls if c.parent_id == p]
        for x in range(len(kids)):
            for y in range(x + 1, len(kids)):
                a, b = kids[x], kids[y]
                near = a.tool == b.tool and max(arg_similarity(a.args, b.args)) >= SIMILAR
                if key(a) == key(b) or near:
                    out.append(Signal("nested", frozenset({a.seq, b.seq}), detail=f"inside {p}"))
    return out


def _text_signals(rec: Recorder, texts: list[TextRec]) -> list[Signal]:
    out: list[Signal] = []
    step_calls = {id(c.step): [] for c in rec.calls}
    for c in rec.calls:
        step_calls[id(c.step)].append(c.seq)

    def sig(group: list[TextRec], detail: str) -> Signal:
        seqs = frozenset(s for t in group for s in step_calls.get(id(t.step), []))
        return Signal("text", seqs, frozenset(id(t.step) for t in group), detail)

    norm = [norm_text(t.text) for t in texts]
    toks = [tokens(n) for n in norm]
    for i, t in enumerate(texts):
        sentences = [s.strip() for s in re.split(r"(?<=[.:!?])\s+", t.text) if len(s.strip()) >= 16]
        for s in set(sentences):
            if sentences.count(s) >= 3:
                out.append(sig([t], "sentence repeated in one message"))
        win = range(max(0, i - 9), i + 1)
        same = [texts[w] for w in win if norm[w] == norm[i]]
        if len(same) >= 3:
            out.append(sig(same, f"same text {len(same)}x in 10"))
        if i >= 2 and all(norm[x] == norm[x - 1] or jaccard(toks[x], toks[x - 1]) >= SIMILAR for x in (i - 1, i)):
            out.append(sig(texts[i - 2 : i + 1], "3 consecutive similar texts"))
        for a in win:
            for b in win:
                if a < b < i and all(
                    jaccard(toks[x], toks[y]) >= SIMILAR or norm[x] == norm[y] for x, y in ((a, b), (a, i), (b, i))
                ):
                    out.append(sig([texts[a], texts[b], texts[i]], "3 mutually similar texts"))
    return out


def check(rec: Recorder, episodes: list[Episode], benign: list[Benign], where: str) -> Checked:
    """Match the signals to the declared episodes; raise ``AssertionError`` on any mismatch."""
    by_call = {id(c.call): c for c in rec.calls}
    by_step: dict[int, list[CallRec]] = {}
    for c in rec.calls:
        by_step.setdefault(id(c.step), []).append(c)
    sigs = signals(rec)

    def seqs_of(objs: list[Any]) -> tuple[frozenset[int], frozenset[int]]:
        seqs, steps = set(), set()
        for o in objs:
            if isinstance(o, Step):
                steps.add(id(o))
                seqs.update(c.seq for c in by_step.get(id(o), []))
            else:
                seqs.add(by_call[id(o)].seq)
        return frozenset(seqs), frozenset(steps)

    declared = [(e, *seqs_of(e.calls)) for e in episodes] + [(b, *seqs_of(b.calls)) for b in benign]
    for s in sigs:
        covered = any(s.seqs <= seqs and (s.kind != "text" or s.steps <= steps) for _, seqs, steps in declared)
        if not covered:
            calls = ", ".join(f"{c.seq}:{c.tool} {canonical(c.args)[:70]}" for c in rec.calls if c.seq in s.seqs)
            raise AssertionError(f"{where}: undeclared {s.kind} signal ({s.detail}) on calls [{calls}]")
    result = Checked()
    for e, seqs, steps in declared:
        own = [s for s in sigs if s.seqs <= seqs and (s.kind != "text" or s.steps <= steps)]
        kinds = sorted({s.kind for s in own})
        if isinstance(e, Benign):
            result.benign.append({"kind": e.kind, "call_seqs": sorted(seqs), "signals": kinds, "reason": e.reason})
            continue
        # A wait is judged from the repeats of its polls: a streak, window, drift or cycle signal must fire on it.
        fires = {"streak", "window", "drift", "cycle"} if e.kind == "waiting" else {e.kind}
        if not fires & set(kinds):
            raise AssertionError(f"{where}: declared {e.kind} episode does not fire (signals: {kinds})")
        if e.kind == "drift":
            ordered = sorted(seqs)
            for a, b in zip(ordered, ordered[1:]):
                sj, sv = arg_similarity(rec.calls[a].args, rec.calls[b].args)
                if min(sj, sv) < SIMILAR:
                    raise AssertionError(f"{where}: drift pair {a},{b} scores json {sj:.2f} / values {sv:.2f}")
        result.episodes.append(describe(rec, e, seqs, steps, kinds))
    return result


def describe(
    rec: Recorder, e: Episode, seqs: frozenset[int], steps: frozenset[int], kinds: list[str]
) -> dict[str, Any]:
    calls = [rec.calls[s] for s in sorted(seqs)]
    tools = list(dict.fromkeys(c.tool for c in calls))
    n = len(calls)
    if e.kind == "cycle":
        assert e.period, "a cycle needs its period"
        repeats = n // e.period
        first = {id(c.step) for c in calls[: e.period]}
    elif e.kind == "text":
        repeats = len(steps)
        first = {id(calls[0].step)} if calls else set()
    else:
        repeats = n
        first = {id(calls[0].step)}
    # measured waste: usage of the API responses that issued the episode's calls after its first occurrence
    wasted, seen = 0, set(first)
    for c in calls:
        if id(c.step) not in seen:
            seen.add(id(c.step))
            wasted += c.tokens
    return {
        "kind": e.kind,
        "tools": tools,
        "period": e.period or (1 if e.kind in ("streak", "waiting") else None),  # a wait: its candidate's block
        "first_seq": calls[0].seq,
        "last_seq": calls[-1].seq,
        "calls": n,
        "repeats": repeats,
        "stuck": e.stuck,
        "user_turn": calls[0].user_turn,
        "seqs": [c.seq for c in calls],
        "call_ids": [c.call_id for c in calls],
        "parent_call_id": calls[0].parent_id,
        "repeat_tokens": wasted,
        "wasted_tokens": wasted if e.stuck else 0,
        "also_fires": [k for k in kinds if k != e.kind],
        "note": e.note,
    }
