"""Hand labels of loop episodes in real transcripts (tests/realdata/labels/*.json): load, validate, split by source.

Every `labels/*.json` file is one JSON array of records (schema in tests/realdata/README.md). `load_labels()` reads
them all and raises `LabelError` naming the file and the record index of the first bad record.

`source_of(file)` names the source a labelled file comes from: its repository, or the run folder where one repository
holds several model runs (`RUN_FOLDERS`); a public fixture under tests/fixtures/ counts with the repository its row in
tests/fixtures/SOURCES.md names. `part(file)` puts a file in the TUNING or the HELD-OUT part by its source, as
tests/realdata/heldout.json records, so a source's files never straddle the two parts: rules fitted to one source's
habits cannot score well on that source's other files.

Files whose repository has no licence are not committed: `sources/*.tsv` manifests give repo, commit, path and blob
sha, `tools/fetch_manifest.py` restores them under `fetched/` (ignored by git), and `present(file)` says whether a
labelled file is on disk (CI scores the committed part).
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

# `waiting`: polls of a process that is still running (a CI run, an install, a background shell), labelled as such
# (never a loop) so that a finding of that kind can be scored.
KINDS = frozenset({"streak", "cycle", "drift", "failure", "text", "window", "nested", "waiting"})
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


FETCHED = REALDATA / "fetched"
FIXTURES = ROOT / "tests" / "fixtures"
HELDOUT_FILE = REALDATA / "heldout.json"
TUNING, HELD_OUT = "tuning", "held_out"

# Repositories that hold several model runs: each run folder (the regex's group, matched on the path inside the
# repository) is a source of its own.
RUN_FOLDERS: dict[str, re.Pattern[str]] = {
    "SWE-agent__mini-swe-agent": re.compile(r"^(eval/[^/]+|output/[^/]+)/"),
    "xli04__Multi_Round_OpenAgentSafety": re.compile(r"^evaluation/(test_output/[^/]+|[^/]+)/"),
}


def _fixture_repos() -> dict[str, str]:
    """{tests/fixtures/<file>: owner__repo} from the table of tests/fixtures/SOURCES.md."""
    out: dict[str, str] = {}
    for line in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) > 2 and "/" in cells[1] and not set(cells[1]) <= set("-: "):
            out[f"tests/fixtures/{cells[0]}"] = cells[1].replace("/", "__")
    return out


_FIXTURE_REPOS: dict[str, str] | None = None


def source_of(file: str) -> str:
    """The source of a labelled file: `owner__repo`, or `owner__repo/<run folder>` (see RUN_FOLDERS)."""
    global _FIXTURE_REPOS
    parts = file.split("/")
    if parts[:2] == ["tests", "fixtures"]:
        if _FIXTURE_REPOS is None:
            _FIXTURE_REPOS = _fixture_repos()
        repo = _FIXTURE_REPOS.get(file)
        if repo is None:  # a folder of fixtures (e.g. a Claude Code project with its subagents): its first file's repo
            repo = next(
                (r for f, r in sorted(_FIXTURE_REPOS.items()) if f.startswith(file.rsplit("/", 1)[0] + "/")), "fixtures"
            )
        return repo
    if parts[:2] != ["tests", "realdata"] or len(parts) < 5:
        raise LabelError(f"{file}: not under tests/realdata/<format>/<owner>__<repo>/ or tests/fixtures/")
    rest = parts[3:] if parts[2] == "fetched" else parts[2:]
    repo = rest[1].split("@", 1)[0]
    rx = RUN_FOLDERS.get(repo)
    m = rx.match("/".join(rest[2:])) if rx else None
    return f"{repo}/{m.group(1)}" if m else repo


def _hash_part(source: str) -> str:
    return HELD_OUT if int(hashlib.sha1(source.encode()).hexdigest(), 16) % 3 == 0 else TUNING


def heldout_choice() -> dict[str, list[str]]:
    """The recorded choice: {"held_out": [...], "tuning": [...]} (empty lists before one is recorded)."""
    if not HELDOUT_FILE.is_file():
        return {HELD_OUT: [], TUNING: []}
    data = json.loads(HELDOUT_FILE.read_text(encoding="utf-8"))
    return {HELD_OUT: list(data.get(HELD_OUT, [])), TUNING: list(data.get(TUNING, []))}


def part(file: str) -> str:
    """The part of a labelled file: that of its source (``part_of_source``)."""
    return part_of_source(source_of(file))


def part_of_source(src: str) -> str:
    """'held_out' for a recorded held-out source, 'tuning' for a recorded tuning source; a source added after the
    choice was recorded goes by sha1(source) % 3 == 0 (held out)."""
    choice = heldout_choice()
    if src in choice[HELD_OUT]:
        return HELD_OUT
    if src in choice[TUNING]:
        return TUNING
    return _hash_part(src)


def present(file: str) -> bool:
    """The labelled file is on disk (a file of a manifest-only source is there only once fetched)."""
    return (ROOT / file).is_file()


def manifest_rows() -> list[dict[str, str]]:
    """Every row of the `sources/*.tsv` manifests (local_path, repo, commit, path, blob_sha, licence, format, calls)."""
    rows: list[dict[str, str]] = []
    for tsv in sorted(SOURCES_DIR.glob("*.tsv")):
        lines = tsv.read_text(encoding="utf-8").splitlines()
        if not lines:
            continue
        header = lines[0].split("\t")
        for n, line in enumerate(lines[1:], 2):
            if not line.strip():
                continue
            cells = line.split("\t")
            if len(cells) != len(header):
                raise LabelError(f"{tsv.name}:{n}: {len(cells)} cells, the header has {len(header)}")
            rows.append(dict(zip(header, cells)))
    return rows


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
    for row in manifest_rows():
        out[row["local_path"]] = row["blob_sha"]
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
    for p in (TUNING, HELD_OUT):
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
