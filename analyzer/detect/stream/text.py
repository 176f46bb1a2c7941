"""Text-loop counters for assistant messages: rules 1-4 of docs/detectors.md#the-text-loop-rules, and Gemini CLI's
repeated 50-char chunks (docs/detectors.md#other-guards-in-use).

Like the call core, a streaming state machine: each message's counters depend on it and the messages before it. A
live ``Guard`` embeds it; the batch scan computes the same counters in bulk (``detect.vector.text``) and is held to
this. Counters, not verdicts: a policy decides that 3 is a hit. Blank messages (whitespace only, e.g. tool-only turns)
are not recorded and never hit, as in pi.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Callable, Sequence

from analyzer.detect.keys import fast_token_set, jaccard
from analyzer.detect.rules import CHUNK, CHUNK_HISTORY, MIN_SENTENCE, TEXT_WINDOW, TextSignals

_text_signals = TextSignals.__new__  # by field name, as the plain function it is (``stream.calls._signals``)

_SPLIT = re.compile(r"(?<=[.:!?])")  # pi splits on /(?<=[.:!?])\s*/; the whitespace goes with the trim below
_PUNCT = re.compile(r"[.:!?]")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


def normalize_text(text: str) -> str:
    """Whitespace runs collapsed and ends trimmed: formatting drift never hides a verbatim repeat."""
    return " ".join(text.split())


def sentence_repeats(norm: str) -> int:
    """Rule 1: how often the most repeated sentence of 16+ characters occurs in one (normalised) message. Sentences
    split after ``.:!?`` and lose trailing punctuation, as pi's ``repeatedSegment``; 0 when no sentence qualifies."""
    if len(norm) < MIN_SENTENCE:
        return 0
    if not _PUNCT.search(norm):
        return 1  # one sentence, the whole (trimmed) message
    counts: dict[str, int] = {}
    best = 0
    for seg in _SPLIT.split(norm):
        s = seg.strip().rstrip(".:!?")
        if len(s) >= MIN_SENTENCE:
            c = counts.get(s, 0) + 1
            counts[s] = c
            if c > best:
                best = c
    return best


def chunk_repeats(text: str) -> int:
    """How often the most repeated 50-character chunk (at any offset) occurs in the message's last 5000 characters,
    fenced code blocks removed (repeated code is not chanting). 0 for text shorter than a chunk.

    Exact, but cheap for ordinary text: every occurrence of a chunk after its first holds a 25-character block,
    aligned to a multiple of 25, that also occurs earlier (in the earlier copy). So only the chunks over such blocks
    are counted: each is counted at all its occurrences but perhaps the first, which ``find`` tells, and only for
    the chunks that could be the most repeated. Without such a block every chunk is unique. A text where most
    offsets qualify is counted whole."""
    if "```" in text:
        text = _FENCE.sub("\n", text)
    if len(text) > CHUNK_HISTORY:
        text = text[-CHUNK_HISTORY:]
    n = len(text) - CHUNK + 1
    if n <= 0:
        return 0
    half = CHUNK // 2
    find = text.find
    offsets: set[int] = set()
    for a in range(0, len(text) - half + 1, half):
        if find(text[a : a + half]) < a:
            offsets.update(range(max(0, a - half), min(a, n - 1) + 1))
    if not offsets:
        return 1
    if 2 * len(offsets) > n:
        return max(Counter(map(text.__getitem__, map(slice, range(n), range(CHUNK, n + CHUNK)))).values())
    counts = Counter(text[o : o + CHUNK] for o in offsets)
    best = max(counts.values())  # every repeat's count, short by one where its first occurrence is not an offset
    if any(find(c) not in offsets for c, k in counts.items() if k == best):
        return best + 1
    return best


def _max_clique(nodes: Sequence[int], adjacent: Callable[[int, int], bool]) -> int:
    """Size of the largest set of mutually similar nodes (at most 9 here, so plain branch and bound)."""
    best = 0

    def grow(size: int, rest: list[int]) -> None:
        nonlocal best
        if size + len(rest) <= best:
            return
        if not rest:
            best = size
            return
        first, others = rest[0], rest[1:]
        grow(size + 1, [o for o in others if adjacent(first, o)])
        grow(size, others)

    grow(0, list(nodes))
    return best


class TextDetector:
    """Streaming text counters for one session's assistant messages."""

    __slots__ = ("_bar", "_reset_on_user", "_ut", "n", "links", "_win", "_run")

    def __init__(self, similarity: float = 0.55, reset_on_user: bool = True) -> None:
        self._bar = similarity
        self._reset_on_user = reset_on_user
        self._ut: int | None = None
        self.n = 0  # messages fed so far, blank ones included: the position of the next message
        # position of a message -> positions of the earlier window messages it equals or resembles (for episodes)
        self.links: dict[int, list[int]] = {}
        self.reset()

    def reset(self) -> None:
        self._win: deque[tuple[int, str, frozenset[str]]] = deque(maxlen=TEXT_WINDOW - 1)
        self._run = 0

    def user_prompt(self) -> None:
        if self._reset_on_user:
            self.reset()

    def feed(self, text: str | None, user_turn: int | None = None) -> TextSignals | None:
        """Counters for one assistant message, or None for a blank one."""
        if user_turn is not None and user_turn != self._ut:
            if self._ut is not None and self._reset_on_user:
                self.reset()
            self._ut = user_turn
        pos = self.n
        self.n = pos + 1
        norm = " ".join(text.split()) if text else ""
        if not norm:
            return None
        tok = fast_token_set(norm)
        n_tok = len(tok)
        bar = self._bar
        win = self._win
        matches: list[tuple[int, str, frozenset[str]]] = []
        same = 1
        last_similar = False
        for e in win:
            if e[1] == norm:
                same += 1
                matches.append(e)
                last_similar = True
                continue
            other = e[2]
            n_other = len(other)
            # Jaccard <= min/max of the sizes: most pairs fail this before any set is intersected
            if not n_tok or not n_other or min(n_tok, n_other) < bar * max(n_tok, n_other):
                last_similar = False
                continue
            inter = len(tok & other)
            last_similar = inter / (n_tok + n_other - inter) >= bar
            if last_similar:
                matches.append(e)
        self._run = self._run + 1 if last_similar else 1
        if len(matches) <= 1 or len({e[1] for e in matches}) == 1:  # identical texts: all mutually similar
            similar = 1 + len(matches)
        else:
            similar = 1 + _max_clique(range(len(matches)), lambda i, j: _alike(matches[i], matches[j], bar))
        cur = (pos, norm, tok)
        if matches:
            self.links[pos] = [e[0] for e in matches]
        win.append(cur)
        return _text_signals(
            TextSignals,
            sentence_repeats=sentence_repeats(norm),
            same_count=same,
            similar_run=self._run,
            similar_count=similar,
            chunk_repeats=chunk_repeats(text or ""),
        )


def _alike(a: tuple[int, str, frozenset[str]], b: tuple[int, str, frozenset[str]], bar: float) -> bool:
    return a[1] == b[1] or jaccard(a[2], b[2]) >= bar


def scan_texts(
    texts: Sequence[str | None], user_turns: Sequence[int], similarity: float = 0.55, reset_on_user: bool = True
) -> tuple[list[TextSignals | None], dict[int, list[int]]]:
    """The batch form over one session's assistant messages in order: counters per message (None when blank) and
    the links between similar messages."""
    d = TextDetector(similarity, reset_on_user)
    feed = d.feed
    out = [feed(texts[i], user_turns[i]) for i in range(len(texts))]
    return out, d.links
