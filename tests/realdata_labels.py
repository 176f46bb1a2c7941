"""Hand labels of loop episodes in real transcripts (tests/realdata/labels/*.json): load, validate, split.

Every `labels/*.json` file is one JSON array of records (schema in tests/realdata/README.md). `load_labels()` reads
them all and raises `LabelError` naming the file and the record index of the first bad record. `part(file)` puts a
labelled file in the TUNING or the HELD-ASIDE part: held aside when sha1(file) % 3 == 0, so a file's labels never
straddle the two parts.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT / "tests" / "realdata"
LABELS_DIR = REALDATA / "labels"
SOURCES_DIR = REALDATA / "sources"

KINDS = frozenset({"streak", "cycle", "drift", "failure", "text", "window", "nested"})
LABELS = frozenset({"loop", "not_loop", "unsure"})
REQUIRED = (
    "file",
    "format",
    "session_id",
    "kind",
    "first_call_index",
    "last_call_index",
    "message_index",
    "label",
    "why",
    "origin",
)
ORIGIN_RE = re.compile(r"^(realdata-dev candidate \d+|loopscope finding|reader)$")
FORMAT_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class LabelError(ValueError):
    """A labels file or one of its records does not follow the schema."""


def _is_index(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def validate(rec: Any) -> None:
    """Raise LabelError (without location) when `rec` does not follow the schema."""
    if not isinstance(rec, dict):
        raise LabelError(f"a record must be an object, got {type(rec).__name__}")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise LabelError(f"missing keys {missing}")
    f = rec["file"]
    if not isinstance(f, str) or not f or f.startswith("/") or "\\" in f or ".." in f.split("/"):
        raise LabelError(f"file must be a path relative to the repository root, got {f!r}")
    if not isinstance(rec["format"], str) or not FORMAT_RE.match(rec["format"]):
        raise LabelError(f"bad format {rec['format']!r}")
    if not isinstance(rec["session_id"], str) or not rec["session_id"]:
        raise LabelError(f"session_id must be a non-empty string, got {rec['session_id']!r}")
    if rec["kind"] not in KINDS:
        raise LabelError(f"kind must be one of {sorted(KINDS)}, got {rec['kind']!r}")
    if rec["label"] not in LABELS:
        raise LabelError(f"label must be one of {sorted(LABELS)}, got {rec['label']!r}")
    if not isinstance(rec["why"], str) or not rec["why"].strip():
        raise LabelError("why must be a non-empty string")
    if not isinstance(rec["origin"], str) or not ORIGIN_RE.match(rec["origin"]):
        raise LabelError(
            f"origin must be 'realdata-dev candidate N', 'loopscope finding' or 'reader', got {rec['origin']!r}"
        )
    a, b, m = rec["first_call_index"], rec["last_call_index"], rec["message_index"]
    if (a is None) != (b is None):
        raise LabelError("first_call_index and last_call_index are both null or both set")
    if a is not None:
        if not (_is_index(a) and _is_index(b)):
            raise LabelError(f"call indexes must be integers >= 0, got {a!r}, {b!r}")
        if a > b:
            raise LabelError(f"first_call_index {a} > last_call_index {b}")
    if m is not None and not _is_index(m):
        raise LabelError(f"message_index must be an integer >= 0 or null, got {m!r}")
    if rec["kind"] == "text":
        if m is None and a is None:
            raise LabelError("a text record needs message_index (or the calls the looping messages issued)")
    elif a is None:
        raise LabelError(f"a {rec['kind']} record needs first_call_index and last_call_index")


def load_labels(labels_dir: Path | None = None) -> list[dict]:
    """Every record of every labels/*.json file, in file-name then record order; raises LabelError on a bad one."""
    d = Path(labels_dir) if labels_dir is not None else LABELS_DIR
    out: list[dict] = []
    for path in sorted(d.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise LabelError(f"{path.name}: not readable JSON: {e}") from e
        if not isinstance(data, list):
            raise LabelError(f"{path.name}: must hold one JSON array of records")
        for i, rec in enumerate(data):
            try:
                validate(rec)
            except LabelError as e:
                raise LabelError(f"{path.name}[{i}]: {e}") from None
            out.append(rec)
    return out


def part(file: str) -> str:
    """'held_aside' when int(sha1(file)) % 3 == 0 (the `file` string exactly as in the labels), else 'tuning'."""
    return "held_aside" if int(hashlib.sha1(file.encode()).hexdigest(), 16) % 3 == 0 else "tuning"


def source_shas() -> dict[str, str]:
    """{repo-relative file: sha} from every sources table under tests/realdata/sources/ that has a blob/sha column.

    Paths in a table are relative to tests/realdata/ unless they start with 'tests/'. A 40-hex value is a git blob
    sha (`git hash-object`), a 64-hex value a sha256 of the file's bytes.
    """
    out: dict[str, str] = {}
    for md in sorted(SOURCES_DIR.glob("*.md")):
        header: list[str] | None = None
        for line in md.read_text(encoding="utf-8").splitlines():
            if not line.startswith("|"):
                header = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = [c.lower() for c in cells]
                continue
            if set("".join(cells)) <= set("-: "):
                continue
            sha_col = next((j for j, h in enumerate(header) if "blob" in h or "sha" in h), None)
            path_col = next((j for j, h in enumerate(header) if "path" in h and "repo" not in h), None)
            if sha_col is None or path_col is None or max(sha_col, path_col) >= len(cells):
                continue
            sha, p = cells[sha_col].strip("`"), cells[path_col].strip("`")
            if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) or not p:
                continue
            out[p if p.startswith("tests/") else f"tests/realdata/{p}"] = sha
    return out


def file_sha(path: Path, like: str) -> str:
    data = path.read_bytes()
    if len(like) == 64:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def transcripts_module():
    """The reference call counter tests/realdata/tools/transcripts.py (imported once)."""
    tools = str(REALDATA / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import transcripts  # noqa: PLC0415

    return transcripts


def summary(labels: list[dict] | None = None) -> str:
    """Markdown tables: labels per format and kind, and files/labels/loops per part."""
    from collections import Counter, defaultdict

    recs = load_labels() if labels is None else labels
    lines = ["| format | kind | labels | loop | not_loop | unsure |", "|---|---|---|---|---|---|"]
    by: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in recs:
        by[(r["format"], r["kind"])][r["label"]] += 1
    tot: Counter = Counter()
    for (fmt, kind), c in sorted(by.items()):
        lines.append(f"| {fmt} | {kind} | {sum(c.values())} | {c['loop']} | {c['not_loop']} | {c['unsure']} |")
        tot.update(c)
    lines.append(f"| **all** | | {sum(tot.values())} | {tot['loop']} | {tot['not_loop']} | {tot['unsure']} |")
    lines += ["", "| part | files with labels | labels | loop | not_loop | unsure |", "|---|---|---|---|---|---|"]
    for p in ("tuning", "held_aside"):
        rs = [r for r in recs if part(r["file"]) == p]
        c = Counter(r["label"] for r in rs)
        lines.append(
            f"| {p} | {len({r['file'] for r in rs})} | {len(rs)} | {c['loop']} | {c['not_loop']} | {c['unsure']} |"
        )
    lines += ["", "| origin | labels | loop | not_loop | unsure |", "|---|---|---|---|---|"]
    org: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        org[re.sub(r" \d+$", " N", r["origin"])][r["label"]] += 1
    for o, c in sorted(org.items()):
        lines.append(f"| {o} | {sum(c.values())} | {c['loop']} | {c['not_loop']} | {c['unsure']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary())
