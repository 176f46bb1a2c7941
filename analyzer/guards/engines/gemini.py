"""Gemini CLI ``loopDetectionService.ts`` (google-gemini/gemini-cli@5411f11, docs/detectors.md#other-guards-in-use).

Tool calls: a block of 1..``max_cycle`` calls (sha256 of name + ``JSON.stringify(args)``) repeated ``halt`` times in
a row halts the turn before the call runs (a 2-cycle trips at call 10, a 3-cycle at 15). Streamed text: a 50-char chunk
seen 10 times with a mean gap of at most 250 characters; tracking is skipped inside code fences and reset on tables,
list items, headings, block quotes and dividers, and at every tool call. Once a loop is detected the service reports it
for every later event until the next prompt resets it. The LLM-based check (after 30 turns) cannot be replayed offline.

Transcripts keep whole messages, not stream chunks: the replay streams each message line by line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from analyzer.guards.base import HALT, KEY_ATTR, KEY_WORDS, Call, Guard, Message, Param, SweepSpec, Verdict, key_param

# The service's own patterns, kept byte for byte: note ``[*-+]`` is the range '*'..'+', so "- item" is not a list
# item to it, and ``[+-_...]`` is the range '+'..'_' (digits and capitals count as divider characters).
_FENCE = re.compile(r"```")
_TABLE = re.compile(r"(^|\n)\s*(\|.*\||[|+-]{3,})")
_LIST = re.compile(r"(^|\n)\s*[*-+]\s")
_NUMBERED = re.compile(r"(^|\n)\s*\d+\.\s")
_HEADING = re.compile(r"(^|\n)#+\s")
_QUOTE = re.compile(r"(^|\n)>\s")
_DIVIDER = re.compile(r"[+-_=*\u2500-\u257F]+")
MAX_HISTORY = 5000


class ContentLoops:
    """``checkContentLoop`` over streamed chunks. Chunk positions are stored as absolute offsets and pruned lazily, so
    truncating the 5000-character history does not rewrite every stored index (same result as the source)."""

    def __init__(self, chunk: int, threshold: int, max_gap: int) -> None:
        self.size, self.t, self.max_gap = chunk, threshold, max_gap
        self.in_code = False
        self.reset()

    def reset(self) -> None:
        self.history = ""
        self.base = 0  # characters truncated from the front so far
        self.index = 0  # absolute position of the next chunk to analyse
        self.stats: dict[str, list[int]] = {}

    def feed(self, content: str) -> bool:
        fences = len(_FENCE.findall(content))
        divider = _DIVIDER.fullmatch(content) is not None
        if (
            fences
            or _TABLE.search(content)
            or _LIST.search(content)
            or _NUMBERED.search(content)
            or _HEADING.search(content)
            or _QUOTE.search(content)
            or divider
        ):
            self.reset()
        was = self.in_code
        if fences % 2:
            self.in_code = not self.in_code
        if was or self.in_code or divider:
            return False
        self.history += content
        if len(self.history) > MAX_HISTORY:
            cut = len(self.history) - MAX_HISTORY
            self.history = self.history[cut:]
            self.base += cut
            self.index = max(self.index, self.base)
        return self._analyse()

    def _analyse(self) -> bool:
        hist, size, base = self.history, self.size, self.base
        while self.index - base + size <= len(hist):
            start = self.index - base
            chunk = hist[start : start + size]
            seen = self.stats.get(chunk)
            if seen is not None:
                while seen and seen[0] < base:
                    del seen[0]
                if not seen:
                    seen = None
            if seen is None:
                self.stats[chunk] = [self.index]
            else:
                seen.append(self.index)
                if len(seen) >= self.t:
                    recent = seen[-self.t :]
                    if (recent[-1] - recent[0]) / (self.t - 1) <= self.max_gap:
                        return True
            self.index += 1
        return False


class GeminiGuard(Guard):
    ENGINE = "gemini-cli"
    SOURCE = "google-gemini/gemini-cli@5411f11 packages/core/src/services/loopDetectionService.ts"
    UNIT = "call; streamed text characters"
    RANK = 4
    DESCRIPTION = "Halt at 5 repetitions of a 1..5-call block; streamed-text chanting."
    ALIASES = ("gemini",)
    GUARD_FILE = "packages/core/src/services/loopDetectionService.ts"
    COUNTS = "repeated blocks of up to 5 calls"
    PASTE_TEMPLATE = "{file}\nconst TOOL_CALL_LOOP_THRESHOLD = {halt};"
    SWEEP = SweepSpec(
        "max(streak, cycle2 .. cycle5)",
        False,
        one_threshold=True,
        cycles=5,
        caveat=("canonical call key instead of JSON.stringify order; the streamed-text rule is not modelled."),
    )
    PARAMS = {
        "key": key_param("ordered"),
        "halt": Param(
            "int", 5, "Repetitions of a call block that halt the turn (TOOL_CALL_LOOP_THRESHOLD).", minimum=2
        ),
        "max_cycle": Param(
            "int", 5, "Longest repeating block of calls detected (1 = identical calls only).", minimum=1
        ),
        "content": Param("bool", True, "Check streamed assistant text for chanting."),
        "content_chunk": Param("int", 50, "CONTENT_CHUNK_SIZE: characters per compared chunk.", minimum=1),
        "content_repeats": Param("int", 10, "CONTENT_LOOP_THRESHOLD: occurrences of a chunk that halt.", minimum=2),
        "content_gap": Param("int", 250, "Largest mean distance between those occurrences, in characters.", minimum=0),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._key = attrgetter(KEY_ATTR[params["key"]])
        self._halt, self._max_cycle = params["halt"], params["max_cycle"]
        self._limit = self._halt * self._max_cycle
        self._content = params["content"]
        # The code-fence state survives the per-prompt reset, as in the service.
        self.text = ContentLoops(params["content_chunk"], params["content_repeats"], params["content_gap"])
        self.on_user()

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        text = (
            (
                f"; text: a {p['content_chunk']}-char chunk {p['content_repeats']}x within a mean gap of "
                f"{p['content_gap']}"
            )
            if p["content"]
            else ""
        )
        return {
            "key": "sha256 of " + KEY_WORDS[p["key"]],
            "window": f"last {p['halt'] * p['max_cycle']} calls (blocks of 1..{p['max_cycle']}); "
            "text since the last tool call",
            "reset": "each user prompt; text tracking also at each tool call",
            "exemptions": "none (text inside code fences skipped)",
            "blocked_count": "n/a (the turn halts at the first detection)",
            "escalation": "halt the turn before the call runs; stays detected until the next prompt",
            "thresholds": f"halt at {p['halt']} repetitions of a block{text}",
        }

    def on_user(self) -> None:
        self.keys: list[str] = []
        self.detected = False
        self.text.reset()

    def on_message(self, msg: Message) -> Verdict | None:
        if self.detected or not self._content or not msg.text:
            return None
        for line in msg.text.splitlines(keepends=True):
            if self.text.feed(line):
                self.detected = True
                return Verdict(HALT, "halt", "repeating content in the streamed text", False)
        return None

    def on_call(self, call: Call) -> Verdict | None:
        if self.detected:
            return Verdict(HALT, "halt", "a loop was detected earlier in this prompt", True)
        self.text.reset()
        keys = self.keys
        keys.append(self._key(call))
        if len(keys) > self._limit:
            del keys[0]
        n = len(keys)
        for k in range(1, self._max_cycle + 1):
            span = self._halt * k
            if n < span:
                break
            block = keys[n - k :]
            if all(keys[n - span + i] == block[i % k] for i in range(span - k)):
                self.detected = True
                what = "identical calls" if k == 1 else f"a {k}-call cycle"
                return Verdict(HALT, "halt", f"{what} repeated {self._halt} times", True)
        return None
