"""From one session's signals to its findings: maximal loop episodes inside one user turn, what each one cost, and
whether it was stuck. Unlike the core this looks at the whole session (an episode's end is known only afterwards).

This is the readable statement of the rules, session by session; the scan runs their bulk form over whole groups
(``detect.vector.episodes``), which tests/test_detect_vector.py holds to exactly the same findings.

Kinds, each a maximal run inside one user turn, claimed in this order so no call belongs to two episodes:
``cycle`` (a block of 2-10 calls with at least 2 distinct keys repeated 3+ times, smallest period first), ``drift``
(3+ consecutive calls of one tool, each identical or near-identical to the one before and at least one not
identical, sharing at least 2 words, and answered alike: the same or a similar result, or a failure; a script that
ran nested calls is compared by identity only, as in pi), ``streak`` (3+ identical calls in a row),
``failure`` (3+ consecutive failed calls of one tool), ``window`` (one call recurring 3+ times, each within 10 calls
of the one before, 3 of them within one window of 10, with no change of state in between: a successful edit between
two builds makes the second build the right move, not a loop), ``nested`` (a call repeated inside one script: 2+),
``text`` (3+ consecutive messages that repeat or resemble each other, the one that makes the third at least 4 words
long, or a shorter message 5+ times in a row word for word when its steps made no progress; or a block of messages
repeated word for word 3+ times back to back; unless every repeat only narrates calls already in a call episode;
or one message chanting a sentence 3+ times or a 50-char chunk 10+ times). Consecutive means consecutive among the
messages with text: a reply recurring between different ones (A B A C A D) is no text loop.

Stuck or progress: a repeat made progress when it succeeded and its result differs from the previous identical
call's (a poll whose status changes), or, for a call with no identical predecessor, when it changed state (a
successful edit or write) or its result differs from the previous call of the same tool. An episode is ``stuck``
when none of its repeats made progress: the same result again, or a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzer.detect.judge import CallView, judge_calls, judge_text, short_replies
from analyzer.detect.keys import digest, fast_token_set, jaccard, normalize_result
from analyzer.detect.rules import (
    CYCLE_PERIODS,
    HOT_SIGNALS,
    LABEL_CHARS,
    MIN_CHUNKS,
    MIN_NESTED,
    MIN_REPEATS,
    MIN_SHARED_WORDS,
    MIN_SHORT_REPEATS,
    MIN_TEXT_WORDS,
    SIGNAL_FIELDS,
    SIMILARITY,
    TEXT_FIELDS,
    WINDOW,
    failure_key,
    is_mutating,
)
from analyzer.detect.stream.text import normalize_text

# Signals are read by name (their place in the record, or in a row of the same columns).
_I = {name: i for i, name in enumerate(SIGNAL_FIELDS)}
_STREAK, _DRIFT, _FAIL, _PROGRESS = _I["streak"], _I["drift_run"], _I["fail_run"], _I["progress"]
_HOT = tuple(_I[name] for name in HOT_SIGNALS)
_T = {name: i for i, name in enumerate(TEXT_FIELDS)}
_SENTENCES, _SAME, _RUN, _SIMILAR, _CHUNKS = (
    _T[name] for name in ("sentence_repeats", "same_count", "similar_run", "similar_count", "chunk_repeats")
)


@dataclass
class SessionData:
    """One session's calls (in ``seq`` order) and assistant messages (in ``turn_index`` order), as lists."""

    session_id: str
    seq: Sequence[int]
    call_id: Sequence[str]
    turn_id: Sequence[str | None]
    user_turn: Sequence[int]
    tool: Sequence[str]
    key: Sequence[Any]
    args: Sequence[str | None]
    parent: Sequence[str | None]
    est_tokens: Sequence[int]
    signals: Sequence[tuple]
    nested_links: dict[int, list[int]]
    # assistant messages
    m_turn_id: Sequence[str] = ()
    m_turn_index: Sequence[int] = ()
    m_user_turn: Sequence[int] = ()
    m_text: Sequence[str | None] = ()
    m_est_tokens: Sequence[int] = ()
    m_signals: Sequence[tuple | None] = ()
    text_links: dict[int, list[int]] = field(default_factory=dict)
    # usage of every assistant turn whose usage counts (turns.usage_counted): turn_id -> (tokens, cost)
    usage: dict[str, tuple[int, float]] = field(default_factory=dict)
    # argument token sets by key, as the core computed them (every same-tool neighbour pair has both)
    tokens: dict[Any, frozenset[str]] = field(default_factory=dict)
    # results, to tell a drifting retry from exploration: result keys, error flags, and the head of a result text
    result_key: Sequence[Any] = ()
    is_error: Sequence[bool | None] = ()
    result_head: Callable[[int], str | None] = lambda i: None


@dataclass
class Finding:
    """One loop episode; the fields of the ``findings`` table (schema.FINDINGS documents them)."""

    finding_id: str
    session_id: str
    kind: str
    period: int | None
    tools: list[str]
    call_ids: list[str]
    first_seq: int | None
    last_seq: int | None
    repeats: int
    stuck: bool
    user_turn: int
    wasted_tokens: int
    estimated_tokens: int
    cost_usd: float
    first_turn_index: int | None
    last_turn_index: int | None
    turn_ids: list[str]
    repeated: str
    why: str = ""
    repeat_tokens: int = 0
    repeat_cost_usd: float = 0.0
    calls: list[int] = field(default_factory=list, repr=False)  # positions in the session, not stored
    messages: list[int] = field(default_factory=list, repr=False)


def finding_id(session_id: str, kind: str, anchor: str) -> str:
    """Stable across rescans of unchanged data: the session, the kind and where the episode starts."""
    return digest(f"{session_id}\x00{kind}\x00{anchor}")


def _segments(idx: Sequence[int], user_turn: Sequence[int]) -> Iterator[list[int]]:
    """Split positions into runs of one user turn: repeats that span a prompt are never one episode."""
    cur: list[int] = []
    ut = None
    for i in idx:
        if cur and user_turn[i] != ut:
            yield cur
            cur = []
        ut = user_turn[i]
        cur.append(i)
    if cur:
        yield cur


def _runs(linked: Sequence[bool]) -> Iterator[tuple[int, int]]:
    """Maximal [start, end] index ranges where each element after the first is linked to the one before."""
    n = len(linked)
    j = 1
    while j < n:
        if linked[j]:
            s = j - 1
            while j < n and linked[j]:
                j += 1
            yield s, j - 1
        else:
            j += 1


def unclaimed_pieces(s: int, e: int, claimed: Sequence[bool] | bytearray) -> Iterator[tuple[int, int]]:
    """The maximal runs of unclaimed positions in ``[s, e]`` (the vectorised scan claims the same way)."""
    j = s
    while j <= e:
        if claimed[j]:
            j += 1
            continue
        k = j
        while k + 1 <= e and not claimed[k + 1]:
            k += 1
        yield j, k
        j = k + 1


class _Builder:
    """Turns index sets into Finding rows for one session."""

    def __init__(self, d: SessionData) -> None:
        self.d = d
        self.turn_index = dict(zip(d.m_turn_id, d.m_turn_index))
        self.out: list[Finding] = []
        self.scripts = {p for p in d.parent if p is not None}  # calls that ran nested calls

    def _label_call(self, i: int, width: int = LABEL_CHARS) -> str:
        a = self.d.args[i] or ""
        s = f"{self.d.tool[i]} {a}"
        return s if len(s) <= width else s[: width - 1] + "…"

    def _cost(self, repeat_turns: set[str | None], first_turns: set[str | None]) -> tuple[list[str], int, float]:
        order = self.turn_index
        turns = sorted((t for t in repeat_turns - first_turns if t is not None), key=lambda t: (order.get(t, -1), t))
        usage = self.d.usage
        tokens = sum(usage[t][0] for t in turns if t in usage)
        cost = sum(usage[t][1] for t in turns if t in usage)
        return turns, tokens, cost

    def _turn_range(self, turns: Sequence[str | None]) -> tuple[int | None, int | None]:
        idx = [self.turn_index[t] for t in turns if t in self.turn_index]
        return (min(idx), max(idx)) if idx else (None, None)

    def view(self, i: int) -> CallView:
        d = self.d
        return CallView(
            d.tool[i],
            d.args[i],
            d.result_head(i) if d.result_key[i] is not None else None,
            d.is_error[i],
            d.turn_id[i],
        )

    def between(self, a: int, b: int) -> list[int]:
        """Top-level calls strictly between positions ``a`` and ``b`` of the session."""
        return [i for i in range(a + 1, b) if self.d.parent[i] is None]

    def calls(
        self, kind: str, calls: list[int], n_first: int, repeats: int, period: int | None, label: str | None = None
    ) -> list[int]:
        """Judge a candidate episode (``judge.judge_calls``), emit what it really holds, and return the calls those
        episodes hold (the others stay free for the kinds claimed after)."""
        kept: list[int] = []
        for j in judge_calls(kind, calls, period, self.view, self.between):
            pos = j.positions
            n = len(pos) // period if kind == "cycle" and period else len(pos)
            self._emit(
                j.kind or kind,
                pos,
                n_first,
                n,
                period,
                j.stuck,
                j.why,
                label if label is not None and pos == calls else None,
            )
            kept.extend(pos)
        return kept

    def _emit(
        self,
        kind: str,
        calls: list[int],
        n_first: int,
        repeats: int,
        period: int | None,
        stuck: bool,
        why: str,
        label: str | None,
    ) -> None:
        d = self.d
        first, rest = calls[:n_first], calls[n_first:]
        turn_ids, tokens, cost = self._cost({d.turn_id[i] for i in rest}, {d.turn_id[i] for i in first})
        tools = list(dict.fromkeys(d.tool[i] for i in calls))
        t0, t1 = self._turn_range([d.turn_id[i] for i in calls])
        if label is None:
            label = (
                " → ".join(self._label_call(i, 60) for i in calls[:period])
                if period and period > 1
                else self._label_call(calls[0])
            )
        self.out.append(
            Finding(
                finding_id=finding_id(d.session_id, kind, str(d.seq[calls[0]])),
                session_id=d.session_id,
                kind=kind,
                period=period,
                tools=tools,
                call_ids=[d.call_id[i] for i in calls],
                first_seq=d.seq[calls[0]],
                last_seq=d.seq[calls[-1]],
                repeats=repeats,
                stuck=stuck,
                user_turn=d.user_turn[calls[0]],
                wasted_tokens=tokens if stuck else 0,
                estimated_tokens=sum(d.est_tokens[i] for i in rest),
                cost_usd=cost if stuck else 0.0,
                first_turn_index=t0,
                last_turn_index=t1,
                turn_ids=turn_ids,
                repeated=label,
                why=why,
                repeat_tokens=tokens,
                repeat_cost_usd=cost,
                calls=calls,
            )
        )

    def texts(self, messages: list[int], repeats: int, single: bool, period: int = 1) -> None:
        """Judge a candidate text loop (``judge.judge_text``) and emit it when it is degenerate generation. Its first
        occurrence is its first message, or its first block of ``period`` messages."""
        d = self.d
        texts = [d.m_text[m] or "" for m in messages]
        judged = judge_text(texts, single, period)
        if judged is None:
            return
        repeats, why = judged
        member_turns = {d.m_turn_id[m] for m in messages}
        calls = [i for i in range(len(d.seq)) if d.turn_id[i] in member_turns]
        first_turns = {d.m_turn_id[m] for m in messages[:period]}
        later = [i for i in calls if d.turn_id[i] not in first_turns]
        if single:
            stuck = True
            turn_ids, tokens, cost = [], 0, 0.0
            est = d.m_est_tokens[messages[0]] * (repeats - 1) // max(repeats, 1)
        else:
            stuck = not any(d.signals[i][_PROGRESS] for i in later)
            if not stuck and short_replies(texts):
                return  # short filler before steps that each did something new: captions of work, not a loop
            turn_ids, tokens, cost = self._cost({d.m_turn_id[m] for m in messages[period:]}, first_turns)
            est = sum(d.m_est_tokens[m] for m in messages[period:])
        text = normalize_text(d.m_text[messages[0]] or "")
        label = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
        self.out.append(
            Finding(
                finding_id=finding_id(d.session_id, "text", f"t{d.m_turn_index[messages[0]]}"),
                session_id=d.session_id,
                kind="text",
                period=None,
                tools=list(dict.fromkeys(d.tool[i] for i in calls)),
                call_ids=[d.call_id[i] for i in calls],
                first_seq=d.seq[calls[0]] if calls else None,
                last_seq=d.seq[calls[-1]] if calls else None,
                repeats=repeats,
                stuck=stuck,
                user_turn=d.m_user_turn[messages[0]],
                wasted_tokens=tokens if stuck else 0,
                estimated_tokens=est,
                cost_usd=cost if stuck else 0.0,
                first_turn_index=d.m_turn_index[messages[0]],
                last_turn_index=d.m_turn_index[messages[-1]],
                turn_ids=turn_ids,
                repeated=label,
                why=why,
                repeat_tokens=tokens,
                repeat_cost_usd=cost,
                calls=calls,
                messages=messages,
            )
        )


def _top_level_episodes(b: _Builder, seg: list[int]) -> None:
    """Episodes among one user turn's top-level calls (``seg``: their positions in the session, in order)."""
    d = b.d
    keys = [d.key[i] for i in seg]
    sig = [d.signals[i] for i in seg]
    n = len(seg)
    claimed = [False] * n
    scripts = b.scripts
    is_script = [d.call_id[i] in scripts for i in seg] if scripts else [False] * n

    where = {p: j for j, p in enumerate(seg)}

    def claim(
        kind: str, s: int, e: int, n_first: int, repeats: int, period: int | None, label: str | None = None
    ) -> None:
        """Offer seg[s..e] as a ``kind`` episode; the calls the judgement keeps are claimed."""
        for p in b.calls(kind, [seg[j] for j in range(s, e + 1)], n_first, repeats, period, label):
            claimed[where[p]] = True

    # cycles, smallest period first, so (A B) x 6 is one 2-cycle and not also a 4-cycle
    for k in CYCLE_PERIODS:
        linked = [j >= k and keys[j] == keys[j - k] and sig[j][_STREAK] < k for j in range(n)]
        j = k
        while j < n:
            if not linked[j]:
                j += 1
                continue
            j0 = j
            while j < n and linked[j]:
                j += 1
            for s, e in unclaimed_pieces(j0 - k, j - 1, claimed):
                reps = (e - s + 1) // k
                if reps >= MIN_REPEATS:  # a trailing partial block repeats too, so it belongs to the episode
                    label = " → ".join(b._label_call(seg[i], 60) for i in range(s, s + k))
                    claim("cycle", s, e, k, reps, k, label)

    def contiguous(kind: str, linked: list[bool], period: int | None, drifted: bool = False) -> None:
        for s, e in _runs(linked):
            for ps, pe in unclaimed_pieces(s, e, claimed):
                if pe - ps + 1 < MIN_REPEATS:
                    continue
                if drifted and all(keys[q] == keys[q - 1] for q in range(ps + 1, pe + 1)):
                    continue  # identical calls only: a streak, not a drift
                claim(kind, ps, pe, 1, pe - ps + 1, period)

    # drift before streak: a run mixing identical and drifted repeats is one episode (rules.CLAIM_ORDER)
    tok = d.tokens
    empty: frozenset[str] = frozenset()
    contiguous(
        "drift",
        [
            j > 0
            and sig[j][_DRIFT] > 1
            and not is_script[j]
            and not is_script[j - 1]
            and len(tok.get(keys[j], empty) & tok.get(keys[j - 1], empty)) >= MIN_SHARED_WORDS
            and _results_alike(d, seg[j - 1], seg[j])
            for j in range(n)
        ],
        None,
        drifted=True,
    )
    contiguous("streak", [j > 0 and keys[j] == keys[j - 1] for j in range(n)], 1)
    contiguous("failure", [j > 0 and (sig[j][_FAIL] or 0) > 1 for j in range(n)], None)

    # window: one key coming back within W calls, with no change of state in between
    changed = [0] * (n + 1)  # prefix count of successful state-changing calls
    for j in range(n):
        changed[j + 1] = changed[j] + (1 if sig[j][_PROGRESS] and is_mutating(d.tool[seg[j]]) else 0)

    def windows(key_of: Callable[[int], Any]) -> None:
        occ: dict[Any, list[int]] = {}
        for j in range(n):
            if not claimed[j] and (k := key_of(j)) is not None:
                occ.setdefault(k, []).append(j)
        for positions in occ.values():
            if len(positions) < MIN_REPEATS:
                continue
            chain = [positions[0]]
            for p in positions[1:] + [None]:  # type: ignore[operator]
                if p is not None and p - chain[-1] <= WINDOW and changed[p] == changed[chain[-1] + 1]:
                    chain.append(p)
                    continue
                if len(chain) >= MIN_REPEATS and any(
                    chain[x + MIN_REPEATS - 1] - chain[x] <= WINDOW for x in range(len(chain) - MIN_REPEATS + 1)
                ):
                    for kept in b.calls("window", [seg[q] for q in chain], 1, len(chain), None):
                        claimed[where[kept]] = True
                if p is not None:
                    chain = [p]

    windows(keys.__getitem__)
    # then one target's failed changes (an edit refused the same way, its text varied, looks in between)
    if d.result_key:
        windows(lambda j: failure_key(d.tool[seg[j]], d.is_error[seg[j]], d.result_key[seg[j]], d.args[seg[j]]))


def _results_alike(d: SessionData, a: int, b: int) -> bool:
    """A drifting retry gets the same answer again, a similar one (a poll's status, "edited a.py"), or fails; near-
    identical calls with unrelated answers (one command reading file after file) are exploration, not a loop."""
    if d.is_error[a] and d.is_error[b]:
        return True
    ra, rb = d.result_key[a], d.result_key[b]
    if ra is None or rb is None:
        return False
    if ra == rb:
        return True
    ha, hb = d.result_head(a), d.result_head(b)
    return jaccard(fast_token_set(normalize_result(ha or "")), fast_token_set(normalize_result(hb or ""))) >= SIMILARITY


def components(edges: list[tuple[int, int]]) -> list[list[int]]:
    """Connected components (2+ nodes) of an undirected edge list, each sorted (union-find; both builders use it)."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for x in list(parent):
        groups.setdefault(find(x), []).append(x)
    return [sorted(g) for g in groups.values() if len(g) > 1]


def _union_find_clusters(links: dict[int, list[int]], allowed: set[int], same_group: Any) -> list[list[int]]:
    return components([(a, b) for a, bs in links.items() if a in allowed for b in bs if same_group(a, b)])


def _nested_episodes(b: _Builder) -> None:
    d = b.d
    ut = d.user_turn
    for cluster in _union_find_clusters(d.nested_links, set(d.nested_links), lambda a, c: ut[a] == ut[c]):
        if len(cluster) >= MIN_NESTED:
            b.calls("nested", cluster, 1, len(cluster), None)


def normalized(text_of: Callable[[int], str | None]) -> Callable[[int], str]:
    """``normalize_text`` of message ``m``'s text, computed once per message (the text pieces compare each message
    with several others)."""
    norms: dict[int, str] = {}

    def norm(m: int) -> str:
        got = norms.get(m)
        if got is None:
            got = norms[m] = normalize_text(text_of(m) or "")
        return got

    return norm


def text_pieces(
    cluster: Sequence[int],
    nonblank: Sequence[int],
    ordinal: Callable[[int], int],
    norm: Callable[[int], str],
    scope: Callable[[int], Any],
    used: set[int],
) -> list[tuple[list[int], int]]:
    """The text loops a cluster of alike messages (positions, sorted) holds, each with its period. Consecutive means
    consecutive among the messages with text (``nonblank``: their positions in order; ``ordinal``: a message's place
    there): a run of 3+ members in a row (period 1); or, from members with one text recurring at a constant
    distance k, the messages repeated word for word k back, back to back (A B A B A B: period 2), as far as they go
    inside the scope (``scope``: the session and user turn of a message), 3+ full blocks, 2+ texts a block. A reply
    recurring between different ones (A B A C A D) is neither. ``used`` (ordinals already in a text loop of the
    session) grows with the pieces returned; both engines call this."""
    out: list[tuple[list[int], int]] = []
    pos = [ordinal(m) for m in cluster]
    start = 0
    for i in range(1, len(pos) + 1):
        if i == len(pos) or pos[i] != pos[i - 1] + 1:
            if i - start >= MIN_REPEATS and not used.intersection(range(pos[start], pos[i - 1] + 1)):
                out.append((list(cluster[start:i]), 1))
                used.update(range(pos[start], pos[i - 1] + 1))
            start = i
    by_text: dict[str, list[int]] = {}
    for m, o in zip(cluster, pos):
        if o not in used:
            by_text.setdefault(norm(m), []).append(o)
    n = len(nonblank)
    for same in by_text.values():
        for a, b in zip(same, same[1:]):
            k = b - a
            if k < 2 or a in used:
                continue
            home = scope(nonblank[a])
            lo, hi = a, a + k - 1
            while (
                hi + 1 < n and scope(nonblank[hi + 1]) == home and norm(nonblank[hi + 1]) == norm(nonblank[hi + 1 - k])
            ):
                hi += 1
            while lo > 0 and scope(nonblank[lo - 1]) == home and norm(nonblank[lo - 1]) == norm(nonblank[lo - 1 + k]):
                lo -= 1
            span = range(lo, hi + 1)
            if (hi - lo + 1) // k < MIN_REPEATS or used.intersection(span):
                continue
            if len({norm(nonblank[x]) for x in range(lo, lo + k)}) < 2:
                continue
            out.append(([nonblank[x] for x in span], k))
            used.update(span)
    return sorted(out)


def _text_episodes(b: _Builder) -> None:
    """Text loops. A loop of messages whose every repeat issued calls already in a call episode is that episode's
    narration ("Let me fetch the ref:" before each identical fetch), not a second loop, and is not reported."""
    d = b.d
    sig = d.m_signals
    text = d.m_text
    hits = {
        m
        for m, s in enumerate(sig)
        if s is not None
        and (
            ((s[_SAME] > 2 or s[_RUN] > 2 or s[_SIMILAR] > 2) and len(fast_token_set(text[m] or "")) >= MIN_TEXT_WORDS)
            or s[_SAME] >= MIN_SHORT_REPEATS
        )
    }
    chants = [
        m for m, s in enumerate(sig) if s is not None and (s[_SENTENCES] >= MIN_REPEATS or s[_CHUNKS] >= MIN_CHUNKS)
    ]
    if not hits and not chants:
        return
    ut = d.m_user_turn
    clustered: set[int] = set()
    if hits:
        claimed = {i for f in b.out for i in f.calls}
        narrated: dict[str | None, bool] = {}  # turn_id -> every call it issued is in a call episode
        for i, t in enumerate(d.turn_id):
            narrated[t] = narrated.get(t, True) and i in claimed
        nonblank = [m for m, s in enumerate(sig) if s is not None]
        where = {m: o for o, m in enumerate(nonblank)}
        norm = normalized(text.__getitem__)
        used: set[int] = set()
        for cluster in sorted(_union_find_clusters(d.text_links, hits, lambda a, c: ut[a] == ut[c])):
            clustered.update(cluster)
            for piece, period in text_pieces(cluster, nonblank, where.__getitem__, norm, ut.__getitem__, used):
                clustered.update(piece)  # a block holds messages of other clusters too
                if not all(narrated.get(d.m_turn_id[m], False) for m in piece[period:]):
                    b.texts(piece, len(piece) // period, single=False, period=period)
    for m in chants:
        if m not in clustered:
            s = sig[m]
            b.texts([m], s[_SENTENCES] if s[_SENTENCES] >= MIN_REPEATS else s[_CHUNKS], single=True)


def _hot_turns(d: SessionData) -> set[int]:
    """User turns where some signal reached the minimum an episode needs, or a change failed the same way a third
    time within a window (``failure_key``); the others cannot hold a call episode, which spares most of a corpus the
    episode search."""
    hot: set[int] = set()
    ut = d.user_turn
    seen: dict[Any, list[int]] = {}
    top = 0
    for i, s in enumerate(d.signals):
        if any(s[j] > 2 for j in _HOT):
            hot.add(ut[i])
        if d.parent[i] is not None or s[_STREAK] == 0 or not d.result_key:
            continue
        top += 1
        k = failure_key(d.tool[i], d.is_error[i], d.result_key[i], d.args[i])
        if k is not None:
            at = seen.setdefault((ut[i], k), [])
            at.append(top)
            if len(at) >= MIN_REPEATS and at[-1] - at[-MIN_REPEATS] <= WINDOW:
                hot.add(ut[i])
    return hot


def build_findings(d: SessionData) -> list[Finding]:
    """Every loop episode of one session, ordered by where it starts."""
    b = _Builder(d)
    hot = _hot_turns(d)
    if hot:
        ut, parent, sig = d.user_turn, d.parent, d.signals
        top = [i for i in range(len(d.seq)) if ut[i] in hot and parent[i] is None and sig[i][_STREAK] > 0]
        for seg in _segments(top, ut):
            _top_level_episodes(b, seg)
    if d.nested_links:
        _nested_episodes(b)
    _text_episodes(b)
    b.out.sort(
        key=lambda f: (f.user_turn, f.first_seq if f.first_seq is not None else -1, f.first_turn_index or 0, f.kind)
    )
    return b.out
