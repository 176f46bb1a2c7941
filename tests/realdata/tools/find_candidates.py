#!/usr/bin/env python3
"""Loop-candidate finder used to label tests/realdata (a reader's aid, not a detector: it over-reports on purpose).

    python tests/realdata/tools/find_candidates.py FORMAT FILE [FILE...]   # one JSON line per candidate

Call indexes are those of transcripts.py (the reference counter next to this file). Candidates:
  streak   consecutive calls with the same normalised key (sleep/cd/head|tail wrappers, 2>&1, whitespace dropped)
  drift    >= 3 consecutive calls of one tool whose argument texts are >= 85% similar but not identical
  window   a normalised key seen >= 3 times with gaps < 10 calls (every cluster, not only the first)
  failure  >= 3 consecutive calls flagged as errors
  text     a line/sentence (>= 25 chars) repeated >= 3x inside one assistant message; or identical consecutive replies
`x` is the number of distinct results among the calls (1 = same result every time) or the text's count and share.
Every candidate was judged by reading the calls and results; most are not loops.
"""

import collections
import difflib
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transcripts as T  # noqa: E402


def norm_cmd(s):
    s = re.sub(r"^\s*(sleep \d+\s*(&&|;)\s*)", "", s)
    s = re.sub(r"^\s*cd \S+\s*&&\s*", "", s)
    s = re.sub(r"\s*\|\s*(head|tail)( -n)? ?-?\d+\s*$", "", s)
    s = re.sub(r"\s*2>&1", "", s)
    return re.sub(r"\s+", " ", s).strip()


def key(c):
    a = c["args"]
    if isinstance(a, dict):
        a = {k: v for k, v in a.items() if k not in ("description", "timeout")}
        if isinstance(a.get("command"), str):
            a["command"] = norm_cmd(a["command"])
    return c["tool"] + json.dumps(a, sort_keys=True)


def rk(c):
    return hashlib.md5(re.sub(r"\s+", " ", c.get("result") or "")[:4000].encode()).hexdigest()[:8]


def argtext(c):
    return json.dumps(c["args"], sort_keys=True)[:3000]


def candidates(path, fmt):
    d = T.read(path, fmt)
    C, out, n = d["calls"], [], len(d["calls"])

    def nres(idx):
        return len({rk(C[k]) for k in idx})

    i = 0
    while i < n:  # streak
        j = i
        while j + 1 < n and key(C[j + 1]) == key(C[i]) and C[j + 1].get("stream") == C[i].get("stream"):
            j += 1
        if j > i:
            out.append(("streak", i, j, nres(range(i, j + 1))))
        i = j + 1
    i = 0
    while i < n:  # drift
        j = i
        while (
            j + 1 < n
            and C[j + 1]["tool"] == C[i]["tool"]
            and key(C[j + 1]) != key(C[j])
            and difflib.SequenceMatcher(None, argtext(C[j]), argtext(C[j + 1])).ratio() > 0.85
        ):
            j += 1
        if j - i >= 2:
            out.append(("drift", i, j, nres(range(i, j + 1))))
        i = max(j, i + 1)
    by = collections.defaultdict(list)  # window clusters
    for i, c in enumerate(C):
        by[key(c)].append(i)
    for occ in by.values():
        grp = [occ[0]]
        for o in occ[1:] + [None]:
            if o is not None and o - grp[-1] < 10:
                grp.append(o)
                continue
            if len(grp) >= 3:
                out.append(("window", grp[0], grp[-1], nres(grp)))
            grp = [o]
    i = 0
    while i < n:  # failure runs
        if C[i].get("is_error"):
            j = i
            while j + 1 < n and C[j + 1].get("is_error"):
                j += 1
            if j - i >= 2:
                out.append(("failure", i, j, nres(range(i, j + 1))))
            i = j + 1
        else:
            i += 1
    prev = None
    for t in d["texts"]:  # text
        parts = [re.sub(r"\s+", " ", x).strip() for x in re.split(r"\n|(?<=[.!?])\s+", t["text"])]
        for s, k in collections.Counter(x for x in parts if len(x) >= 25).items():
            if k >= 3:
                out.append(("text", t["msg"], t["line"], f"{k}x {k * len(s)}/{len(t['text'])} chars: {s[:100]}"))
        tt = re.sub(r"\s+", " ", t["text"]).strip()
        if prev is not None and tt == prev and len(tt) > 20:
            out.append(("text-repeat", t["msg"], t["line"], tt[:100]))
        prev = tt
    return d, sorted(out, key=lambda o: (o[0], str(o[1])))


if __name__ == "__main__":
    fmt = sys.argv[1]
    for p in sys.argv[2:]:
        d, out = candidates(p, fmt)
        for kind, a, b, x in out:
            print(
                json.dumps(
                    {"file": p, "format": fmt, "session_id": d["session_id"], "kind": kind, "a": a, "b": b, "x": x},
                    ensure_ascii=False,
                )
            )
