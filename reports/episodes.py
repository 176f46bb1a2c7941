"""One loop episode as a reader sees it: the distinct calls that repeated, the results they got, the texts that
looped, and how drifting arguments changed.

This is the one place transcript text turns into page text, so every string passes through the redactor here
(``Episodes.clip``) before it is cut to size.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from analyzer.calltext import _KEYS as ARG_KEYS  # the keys call_text reads, most telling first
from analyzer.calltext import call_text
from analyzer.detect.rules import LOOP_KINDS
from reports.context import ArgDiff, Clip, ConvItem, DiffPart, Episode, Variant
from reports.redact import redact_window

Redactor = Callable[[str | None], str | None]

HEAD_CHARS = 600
"""Characters shown open; the rest of a text up to ``SHOW_CHARS`` is collapsed."""
HEAD_LINES = 12
SHOW_CHARS = 4000
"""Characters of one text that reach the page at all."""
MAX_VARIANTS = 6
MSG_LINES = 4
"""Lines of an assistant message or a result shown open in the conversation; the rest is collapsed."""
MSG_CHARS = 400
MAX_CONV_CALLS = 16
"""Calls of one episode's span shown in its conversation: all of them up to this many; past it the first
``HEAD_CONV_CALLS`` and the last ``MAX_CONV_CALLS - HEAD_CONV_CALLS``, with the ones between counted."""
HEAD_CONV_CALLS = 10
SESSION_CALLS = 600
"""Calls of a session's whole conversation (a session without findings) shown: all of them up to this many; past
it the first ``SESSION_HEAD`` and the last ``SESSION_CALLS - SESSION_HEAD``, with the ones between counted (a label
may still name them by number)."""
SESSION_HEAD = 400
SESSION_MESSAGE = (3, 300)
"""Lines and characters of a message that reach the page in a session's whole conversation (of a result:
``SESSION_RESULT``): with a page for every session, loop-free ones too, the report stays light; ``loopscope show``
prints a whole result."""
SESSION_RESULT = (2, 160)
SAID_AGAIN = "(the same message again)"
MAX_DIFFS = 4
MAX_PATTERN_GROUPS = 24

KIND_TITLES = {k.name: k.title for k in LOOP_KINDS}


def letters(i: int) -> str:
    """A, B, ..., Z, AA, AB, ...: short labels for call variants."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def _variant_key(c: dict[str, Any], kind: str) -> str:
    """What makes two calls of an episode the same variant: their action (``calls.action_key``, the key the detectors
    compare), so calls that differ only in commentary such as a Bash ``description`` are one variant, as the finding
    counts them. A drift's variants are its full arguments: what drifted (a ``sleep``, a timeout) is the point."""
    key = None if kind == "drift" else c.get("action_key")
    return key or c.get("call_key") or f"{c.get('tool')}|{c.get('args')}"


def pretty_args(args: str | None) -> str:
    """Arguments as a person reads them: one ``key: value`` line per top-level key, strings unquoted (a multi-line
    command stays multi-line). Clipped or odd JSON is shown as stored."""
    if not args:
        return ""
    try:
        obj = orjson.loads(args)
    except orjson.JSONDecodeError:
        return args
    if not isinstance(obj, dict):
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()
    lines = []
    for k, v in obj.items():
        if isinstance(v, str):
            val = v if "\n" not in v else "\n  " + v.replace("\n", "\n  ")
        else:
            val = orjson.dumps(v).decode()
        lines.append(f"{k}: {val}")
    return "\n".join(lines)


def _cut_point(text: str, limit: int, lines: int = HEAD_LINES) -> int:
    """Where the open part ends: after ``lines`` lines or ``limit`` characters, at a line break near the limit
    when there is one, so it ends on a whole line."""
    nl = -1
    for _ in range(lines):
        nl = text.find("\n", nl + 1)
        if nl < 0 or nl >= limit:
            break
    else:
        if nl < len(text) - 1:
            return nl + 1
    if len(text) <= limit:
        return len(text)
    nl = text.rfind("\n", int(limit * 0.6), limit)
    return nl + 1 if nl > 0 else limit


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def _add_part(parts: list[DiffPart], op: str, text: str) -> None:
    """Append ``text`` as an ``op`` part, merged into the last part when it has the same op."""
    if not text:
        return
    if parts and parts[-1].op == op:
        parts[-1] = DiffPart(op, parts[-1].text + text)
    else:
        parts.append(DiffPart(op, text))


def _word_parts(before: str, after: str) -> list[DiffPart]:
    a, b = _TOKEN.findall(before), _TOKEN.findall(after)
    parts: list[DiffPart] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            _add_part(parts, "equal", "".join(a[i1:i2]))
        else:
            _add_part(parts, "delete", "".join(a[i1:i2]))
            _add_part(parts, "insert", "".join(b[j1:j2]))
    return parts


SIMILAR = 0.5
"""Two lines at least this similar are diffed word by word; less similar ones are shown as a removed line and an
added line, which stays readable where a character-level diff of unrelated text would not."""


def _similar(x: str, y: str) -> bool:
    """``ratio() >= SIMILAR``, with its cheap upper bounds tried first (most changed lines are unrelated)."""
    m = difflib.SequenceMatcher(None, x, y, autojunk=False)
    return m.real_quick_ratio() >= SIMILAR and m.quick_ratio() >= SIMILAR and m.ratio() >= SIMILAR


def diff_parts(before: str, after: str) -> list[DiffPart]:
    """A line diff, refined word by word inside lines that changed a little: drifting arguments usually differ by a
    flag or a number inside one long line; unrelated edits show as whole lines removed and added."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    parts: list[DiffPart] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            _add_part(parts, "equal", "".join(a[i1:i2]))
            continue
        old, new = a[i1:i2], b[j1:j2]
        if tag == "replace" and len(old) == len(new) and all(_similar(x, y) for x, y in zip(old, new)):
            for x, y in zip(old, new):
                for p in _word_parts(x, y):
                    _add_part(parts, p.op, p.text)
            continue
        _add_part(parts, "delete", "".join(old))
        _add_part(parts, "insert", "".join(new))
    return parts


def pattern(labels: list[str], period: int | None = None) -> str:
    """The episode's shape in call-variant letters: ``A ×12``, ``(A B) ×6``, ``A ×3 · B · A ×2``."""
    if not labels:
        return ""
    n = len(labels)
    for p in ([period] if period and period > 1 else []) + [1, 2, 3, 4, 5]:
        if p and p < n and len(set(labels[:p])) == p and all(labels[i] == labels[i % p] for i in range(n)):
            reps, tail = divmod(n, p)
            block = labels[0] if p == 1 else "(" + " ".join(labels[:p]) + ")"
            return f"{block} ×{reps}" + (" + " + " ".join(labels[:tail]) if tail else "")
    groups: list[tuple[str, int]] = []
    for lab in labels:
        if groups and groups[-1][0] == lab:
            groups[-1] = (lab, groups[-1][1] + 1)
        else:
            groups.append((lab, 1))
    shown = " · ".join(f"{lab} ×{c}" if c > 1 else lab for lab, c in groups[:MAX_PATTERN_GROUPS])
    if len(groups) > MAX_PATTERN_GROUPS:
        shown += f" · … ({len(groups) - MAX_PATTERN_GROUPS} more runs)"
    return shown


def _summary_args(c: dict[str, Any]) -> str | None:
    """The arguments a call's summary line is made from: as read, or, where they were clipped before the key that
    names what the call did (a file written after its content), those keys read whole (``args_keys``)."""
    keys = c.get("args_keys")
    if keys and any(keys):
        return orjson.dumps({k: v for k, v in zip(ARG_KEYS, keys) if v}).decode()
    return c.get("args")


def _num(v: Any) -> str:
    return "—" if v is None else f"{int(v):,}"


@dataclass
class CallAnchors:
    """The call anchors of one page: ``call-12`` (with a prefix in a single-file report, where several sessions share
    one document). Each call's anchor goes to the first element that claims it, so ids stay unique; ``known``
    tells which calls a link can point at."""

    prefix: str = ""
    known: set[int] = field(default_factory=set)

    def id(self, number: int) -> str:
        return f"{self.prefix}call-{number}"

    def claim(self, number: int) -> str:
        if number in self.known:
            return ""
        self.known.add(number)
        return self.id(number)

    def href(self, number: int) -> str | None:
        return "#" + self.id(number) if number in self.known else None


@dataclass
class Episodes:
    """Builds ``Episode`` views for one session; ``redact`` is applied to every transcript string."""

    redact: Redactor
    _summaries: dict[str, str] = field(default_factory=dict)

    def _shown(self, text: str | None, stored_len: int | None, show: int = SHOW_CHARS) -> tuple[str, int]:
        """The first ``show`` characters of ``text`` redacted (only they and a margin are redacted, never the whole
        text: a secret that the cut splits is still recognised whole), and how many characters the original
        has beyond them. ``stored_len`` is the length in the store when ``text`` is a clipped copy."""
        raw = text or ""
        total = max(len(raw), stored_len or 0)
        t, used = redact_window(raw, show, complete=total <= len(raw), redactor=self.redact)
        shown = t[:show]
        # Characters not in the page: those of the redacted window past the cut, and the rest of the original.
        return shown, max(0, len(t) - len(shown)) + (total - used)

    def clip(self, text: str | None, stored_len: int | None = None) -> Clip:
        """Redact first, then cut: a secret is recognised whole before any cut can split it."""
        shown, omitted = self._shown(text, stored_len)
        cut = _cut_point(shown, HEAD_CHARS)
        return Clip(shown[:cut], shown[cut:], omitted)

    def short(
        self,
        text: str | None,
        stored_len: int | None = None,
        lines: int = MSG_LINES,
        chars: int = MSG_CHARS,
        show: int = SHOW_CHARS,
    ) -> Clip:
        """Like ``clip``, with a shorter open part: a conversation shows a few lines of each step. ``show``: the
        characters that reach the page at all (the open part and what is collapsed after it)."""
        shown, omitted = self._shown(text, stored_len, show)
        cut = _cut_point(shown, chars, lines)
        return Clip(shown[:cut], shown[cut:], omitted)

    def show_command(self, c: dict[str, Any]) -> str | None:
        """``loopscope show SESSION:SEQ`` for a call, shell-quoted; None when the session id is redacted (an id that
        holds a secret never reaches the page)."""
        sid, seq = c.get("session_id"), c.get("seq")
        if not sid or seq is None or self.redact(sid) != sid:
            return None
        return "loopscope show " + shlex.quote(f"{sid}:{seq}")

    def _summary(self, key: str, args: str | None) -> str:
        """The call's telling argument on one line, redacted; computed once per distinct call on the page."""
        cached = self._summaries.get(key)
        if cached is None:
            cached = self._summaries[key] = call_text(None, self.redact(args), 120)
        return cached

    def conversation(
        self, f: dict[str, Any], calls: list[dict[str, Any]], messages: list[dict[str, Any]], anchors: CallAnchors
    ) -> tuple[list[ConvItem], int]:
        """The user prompt of the episode's turn, the assistant messages before and inside it, and every call of its
        span with its result, in transcript order; calls past ``MAX_CONV_CALLS`` are counted, not shown."""
        lo, hi = f.get("first_seq"), f.get("last_seq")
        span = [c for c in calls if lo is not None and hi is not None and lo <= c["seq"] <= hi]
        return self._steps(span, messages, anchors, set(f.get("call_ids") or []), MAX_CONV_CALLS, HEAD_CONV_CALLS)

    def session(
        self, calls: list[dict[str, Any]], messages: list[dict[str, Any]], anchors: CallAnchors
    ) -> tuple[list[ConvItem], int]:
        """A session's whole conversation (``data.whole_conversation``): every prompt, message and call, each cut
        shorter than in an episode's conversation (``SESSION_MESSAGE``, ``SESSION_RESULT``); calls past
        ``SESSION_CALLS`` are counted, and the messages among them left out too. A message said again is shown as
        that, not hidden: repeated text may be the loop a person is looking for."""
        return self._steps(calls, messages, anchors, set(), SESSION_CALLS, SESSION_HEAD, light=True)

    def _steps(
        self,
        span: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        anchors: CallAnchors,
        in_loop: set[str],
        max_calls: int,
        head_calls: int,
        light: bool = False,
    ) -> tuple[list[ConvItem], int]:
        """The conversation of the calls ``span`` and the ``messages`` around them, in transcript order, the calls
        past ``max_calls`` counted instead (the first ``head_calls`` and the last ones shown). ``light``: shorter
        text, no arguments beyond the summary line, repeated messages said as such."""
        more = max(0, len(span) - max_calls)
        shown_calls = span if not more else span[:head_calls] + span[len(span) - (max_calls - head_calls) :]
        turn_at = {m["turn_id"]: m["turn_index"] for m in messages if m.get("turn_id") is not None}
        last = max([m["turn_index"] for m in messages], default=0)
        cut = (-1, -1)
        if more and light:  # the messages among the calls left out are left out with them
            cut = (
                turn_at.get(shown_calls[head_calls - 1].get("turn_id"), last),
                turn_at.get(shown_calls[head_calls].get("turn_id"), last),
            )
        keyed: list[tuple[tuple[int, int, int, int], ConvItem]] = []
        said: set[str] = set()
        for m in messages:
            text = (m.get("text") or "").strip()
            if not text or cut[0] < m["turn_index"] < cut[1]:
                continue
            kind = "user" if m.get("role") == "user" else "assistant"
            norm = " ".join(text.split())
            again = kind == "assistant" and norm in said
            said.add(norm)
            if again and not light:  # said already in this episode: once is enough
                continue
            if again and len(norm) > len(SAID_AGAIN):
                body = Clip(SAID_AGAIN)
            elif light:
                lines, chars = SESSION_MESSAGE
                short = self.short(m.get("text"), m.get("text_len"), lines, chars, show=chars)
                body = Clip(short.head, "", len(short.rest) + short.omitted)
            else:
                body = self.short(m.get("text"), m.get("text_len"))
            keyed.append(((m["turn_index"], 0, 0, 0), ConvItem(kind, text=body)))
        # A repeat's arguments and result, when the same as an earlier call's, are said once: "same as #4".
        seen_args: dict[str, int] = {}
        seen_result: dict[str, int] = {}
        for c in shown_calls:
            number = int(c["seq"]) + 1
            akey = c.get("call_key") or f"{c.get('tool')}|{c.get('args')}"
            rkey = c.get("result_key") or (None if c.get("result_text") is None else f"text|{c.get('result_text')}")
            summary = self._summary(akey, _summary_args(c))
            args = None
            if akey not in seen_args:
                seen_args[akey] = number
                args = None if light else self.short(pretty_args(c.get("args")), None, 2, 200)
            if c.get("result_text") is None:
                result = None
            elif rkey in seen_result:
                result = Clip(f"(the same result as #{seen_result[rkey]})")
            else:
                seen_result[rkey] = number
                # A few lines here; the distinct results are in full (up to the page's limit) under Results.
                lines, chars = SESSION_RESULT if light else (3, 300)
                full = self.short(c.get("result_text"), c.get("result_len"), lines, chars, show=chars)
                result = Clip(full.head, "", len(full.rest) + full.omitted)
            same = (
                seen_args[akey]
                if seen_args[akey] != number
                and rkey is not None
                and seen_result.get(rkey) != number
                and seen_result.get(rkey) == seen_args[akey]
                else None
            )
            item = ConvItem(
                "call",
                number=number,
                anchor=anchors.claim(number),
                href="#" + anchors.id(number),
                tool=c.get("tool"),
                summary=summary,
                args=args,
                result=result,
                is_error=c.get("is_error"),
                in_loop=c.get("call_id") in in_loop,
                same_as=same,
            )
            keyed.append(((turn_at.get(c.get("turn_id"), last), 1, number, 0), item))
        if more:  # the calls left out sit between the first ones and the last ones
            c = shown_calls[head_calls - 1]
            keyed.append(((turn_at.get(c.get("turn_id"), last), 1, int(c["seq"]) + 1, 1), ConvItem("gap", number=more)))
        keyed.sort(key=lambda kv: kv[0])
        return [it for _, it in keyed], more

    def build(
        self,
        f: dict[str, Any],
        calls: list[dict[str, Any]],
        texts: list[dict[str, Any]],
        anchor: str,
        messages: list[dict[str, Any]] | None = None,
        anchors: CallAnchors | None = None,
        open: bool = True,
    ) -> Episode:
        wanted = list(f.get("call_ids") or [])
        lo, hi = f.get("first_seq"), f.get("last_seq")
        by_id = {c["call_id"]: c for c in calls if (lo is None or c["seq"] >= lo) and (hi is None or c["seq"] <= hi)}
        ep_calls = [by_id[i] for i in wanted if i in by_id]

        keys: dict[str, str] = {}
        first: dict[str, dict[str, Any]] = {}
        counts: dict[str, int] = {}
        seq_labels: list[str] = []
        kind = str(f.get("kind") or "")
        for c in ep_calls:
            key = _variant_key(c, kind)
            if key not in keys:
                keys[key] = letters(len(keys))
                first[key] = c
            counts[key] = counts.get(key, 0) + 1
            seq_labels.append(keys[key])
        diffs = self._diffs(ep_calls, keys, first, kind)
        # Drifting calls differ by a word each: the first call and the diffs say it all, without repeating each
        # near-copy in full.
        shown = 1 if f.get("kind") == "drift" and diffs else MAX_VARIANTS
        variants = [
            Variant(keys[k], counts[k], self.clip(pretty_args(first[k].get("args")), None), tool=first[k].get("tool"))
            for k in list(keys)[:shown]
        ]

        rkeys: dict[str, int] = {}
        rfirst: dict[str, dict[str, Any]] = {}
        rcounts: dict[str, int] = {}
        for c in ep_calls:
            rk = c.get("result_key") or ("<none>" if c.get("result_text") is None else f"text|{c.get('result_text')}")
            if rk not in rkeys:
                rkeys[rk] = len(rkeys) + 1
                rfirst[rk] = c
            rcounts[rk] = rcounts.get(rk, 0) + 1
        results = []
        for rk in list(rkeys)[:MAX_VARIANTS]:
            c = rfirst[rk]
            if c.get("result_text") is None:
                body = Clip("(no result: the call was not answered)")
            else:
                body = self.clip(c.get("result_text"), c.get("result_len"))
                if body.omitted:
                    body = replace(body, whole=self.show_command(c))
            results.append(Variant(f"R{rkeys[rk]}", rcounts[rk], body, is_error=c.get("is_error"), tool=c.get("tool")))

        conv, more_conv = self.conversation(f, calls, messages or [], anchors or CallAnchors())
        return Episode(
            conversation=conv,
            more_conversation=more_conv,
            why=self.redact(f.get("why")) if f.get("why") else None,
            open=open,
            anchor=anchor,
            kind=kind,
            title=self._title(f, ep_calls),
            facts=self._facts(f, len(ep_calls)),
            stuck=f.get("stuck"),
            pattern=pattern(seq_labels, f.get("period")),
            calls=variants,
            more_calls=max(0, len(keys) - shown),
            results=results,
            more_results=max(0, len(rkeys) - MAX_VARIANTS),
            texts=self._texts(texts) if f.get("kind") == "text" else [],
            diffs=diffs,
            finding_id=str(f.get("finding_id") or ""),
            first_seq=f.get("first_seq"),
            last_seq=f.get("last_seq"),
        )

    @staticmethod
    def _title(f: dict[str, Any], calls: list[dict[str, Any]]) -> str:
        kind = str(f.get("kind") or "loop")
        base = KIND_TITLES.get(kind, kind.capitalize())
        if kind == "cycle" and f.get("period"):
            base = f"Cycle of {f['period']} calls"
        tools = list(dict.fromkeys(f.get("tools") or [c.get("tool") for c in calls]))
        tool_txt = ", ".join(str(t) for t in tools[:4]) + (" …" if len(tools) > 4 else "")
        return f"{base}: {tool_txt}" if tool_txt else base

    @staticmethod
    def _facts(f: dict[str, Any], n_calls: int) -> list[tuple[str, str]]:
        if f.get("first_seq") is None:
            where = "none (repeated text only)"
        else:
            where = f"#{f['first_seq'] + 1}–#{f['last_seq'] + 1}"
            if f.get("last_seq") is not None and n_calls != f["last_seq"] - f["first_seq"] + 1:
                where += f" ({n_calls:,} of them)"
        facts = [
            ("calls", where),
            ("repeats", _num(f.get("repeats"))),
            ("user prompt", "—" if f.get("user_turn") is None else f"#{int(f['user_turn']) + 1}"),
            ("wasted tokens" + (" (stuck)" if f.get("stuck") else ""), _num(f.get("wasted_tokens"))),
        ]
        if f.get("repeat_tokens") is not None:
            facts.append(("tokens of the repeats", _num(f.get("repeat_tokens"))))
        if f.get("estimated_tokens"):
            facts.append(("estimated tokens", "~" + _num(f.get("estimated_tokens"))))
        if f.get("cost_usd") is not None:
            facts.append(("cost", f"${f['cost_usd']:,.2f}"))
        return facts

    def _texts(self, texts: list[dict[str, Any]]) -> list[Variant]:
        seen: dict[str, int] = {}
        firsts: dict[str, dict[str, Any]] = {}
        for t in texts:
            norm = " ".join((t.get("text") or "").split())
            if not norm:
                continue
            if norm not in seen:
                firsts[norm] = t
            seen[norm] = seen.get(norm, 0) + 1
        out = []
        for i, (norm, n) in enumerate(list(seen.items())[:MAX_VARIANTS]):
            t = firsts[norm]
            out.append(Variant(f"T{i + 1}", n, self.clip(t.get("text"), t.get("text_len"))))
        return out

    def _diffs(
        self, calls: list[dict[str, Any]], keys: dict[str, str], first: dict[str, dict[str, Any]], kind: str
    ) -> list[ArgDiff]:
        """Diffs between consecutive different calls of one tool: what drifted from one attempt to the next."""
        out: list[ArgDiff] = []
        seen: set[frozenset[str]] = set()
        prev_key: str | None = None
        for c in calls:
            key = _variant_key(c, kind)
            if prev_key is not None and key != prev_key and first[prev_key].get("tool") == c.get("tool"):
                pair = frozenset((prev_key, key))
                if pair not in seen:
                    seen.add(pair)
                    a = self._shown(pretty_args(first[prev_key].get("args")), None)[0]
                    b = self._shown(pretty_args(c.get("args")), None)[0]
                    out.append(ArgDiff(keys[prev_key], keys[key], diff_parts(a, b)))
                    if len(out) >= MAX_DIFFS:
                        break
            prev_key = key
        return out
