"""The hand labels of tests/realdata: every record validates, every labelled file exists with the sha its sources
table gives, and every call/message index lies inside the file as the reference counter counts it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from realdata_labels import (
    FETCHED,
    HELD_OUT,
    ROOT,
    TUNING,
    LabelError,
    file_sha,
    heldout_choice,
    load_labels,
    manifest_rows,
    part,
    present,
    source_of,
    source_shas,
    transcripts_module,
)

ALL_LABELS = load_labels()
# A source without a licence is committed as a manifest; its files are scored where they were fetched.
LABELS = [r for r in ALL_LABELS if present(r["file"])]


def test_labels_present_and_valid() -> None:
    assert LABELS, "no labels under tests/realdata/labels"
    assert {"loop", "not_loop"} <= {r["label"] for r in LABELS}


def test_bad_record_names_file_and_index(tmp_path: Path) -> None:
    good = dict(LABELS[0])
    bad = dict(good, kind="spiral")
    (tmp_path / "x.json").write_text(json.dumps([good, good, bad]))
    with pytest.raises(LabelError, match=r"x\.json\[2\].*kind"):
        load_labels(tmp_path)
    (tmp_path / "x.json").write_text(json.dumps([dict(good, first_call_index=5, last_call_index=3)]))
    with pytest.raises(LabelError, match=r"x\.json\[0\]"):
        load_labels(tmp_path)
    (tmp_path / "x.json").write_text(json.dumps({"not": "a list"}))
    with pytest.raises(LabelError, match=r"x\.json"):
        load_labels(tmp_path)


def test_parts_split_by_source() -> None:
    """A source's files are all in one part, and both parts hold labels."""
    by_source: dict[str, set[str]] = {}
    for r in ALL_LABELS:
        by_source.setdefault(source_of(r["file"]), set()).add(part(r["file"]))
    assert all(len(p) == 1 for p in by_source.values())
    assert {part(r["file"]) for r in ALL_LABELS} == {TUNING, HELD_OUT}


def test_recorded_choice_names_known_sources_once() -> None:
    choice = heldout_choice()
    named = choice[HELD_OUT] + choice[TUNING]
    assert len(named) == len(set(named)), "a source is named twice in tests/realdata/heldout.json"
    known = {source_of(r["file"]) for r in ALL_LABELS}
    assert set(named) <= known, sorted(set(named) - known)


def test_manifest_only_files_live_under_fetched() -> None:
    """A file the repository does not hold is restored by tools/fetch_manifest.py into the ignored folder."""
    committed = {r["local_path"] for r in manifest_rows() if not (ROOT / r["local_path"]).is_relative_to(FETCHED)}
    for r in ALL_LABELS:
        if not present(r["file"]):
            assert (ROOT / r["file"]).is_relative_to(FETCHED), f"{r['file']} is missing from the repository"
    for p in committed:
        assert (ROOT / p).is_file(), f"{p}: a committed manifest row without its file"


@pytest.mark.parametrize("file", sorted({r["file"] for r in LABELS}))
def test_labelled_file_exists_with_its_sha(file: str) -> None:
    path = ROOT / file
    assert path.is_file(), file
    sha = source_shas().get(file)
    if sha is not None:
        assert file_sha(path, sha) == sha, f"{file}: content differs from its sources table"


def test_every_realdata_file_has_a_source_sha() -> None:
    shas = source_shas()
    for r in LABELS:
        if r["file"].startswith("tests/realdata/") and r["origin"].startswith("realdata-dev"):
            assert r["file"] in shas, r["file"]


@cache
def _reference(file: str, fmt: str) -> tuple[int, int | None]:
    """(call count, message count or None) for a labelled file."""
    path = ROOT / file
    t = transcripts_module()
    if fmt in t.READERS:
        n_calls = len(t.read(str(path), fmt)["calls"])
    else:
        n_calls = _loopscope_calls(path)
    if fmt == "mini_swe_agent":
        n_msgs = len(json.loads(path.read_text(encoding="utf-8")).get("messages") or [])
    elif fmt == "swe_agent":
        n_msgs = len(json.loads(path.read_text(encoding="utf-8")).get("trajectory") or [])
    elif path.suffix == ".jsonl":
        n_msgs = sum(1 for _ in path.open("rb"))  # message_index = 0-based physical line
    else:
        n_msgs = None
    return n_calls, n_msgs


def _loopscope_calls(path: Path) -> int:
    """Formats the reference counter does not read: loopscope's calls.seq (see tests/realdata/README.md)."""
    return len(_loopscope_call_rows(path))


def _loopscope_call_rows(path: Path) -> list[tuple[str | None, str, bool]]:
    """The calls loopscope reads from one file, in ``calls.seq`` order: (call id, tool, is_error)."""
    import tempfile

    from helpers import ingest_paths, query

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "s.duckdb"
        ingest_paths(db, path)
        rows = query(
            db,
            "select c.call_id, c.tool, c.is_error from calls c join sessions s using (session_id)"
            " where s.source_path = ? order by c.session_id, c.seq",
            [str(path)],
        )
        return [(cid, tool, bool(err)) for cid, tool, err in rows]


@pytest.mark.parametrize("i", range(len(LABELS)), ids=lambda i: f"{LABELS[i]['file'].rsplit('/', 1)[-1]}#{i}")
def test_indexes_inside_the_file(i: int) -> None:
    r = LABELS[i]
    n_calls, n_msgs = _reference(r["file"], r["format"])
    if r["first_call_index"] is not None:
        assert r["last_call_index"] < n_calls, f"{r['file']}: call {r['last_call_index']} >= {n_calls} calls"
    if r["message_index"] is not None and n_msgs is not None:
        assert r["message_index"] < n_msgs, f"{r['file']}: message {r['message_index']} >= {n_msgs}"


GEMINI_FILES = sorted({r["file"] for r in LABELS if r["format"] == "gemini"})
GEMINI_JSONL = [
    {"sessionId": "s1", "projectHash": "h", "startTime": "2026-05-01T10:00:00Z", "kind": "main"},
    {"id": "u1", "type": "user", "content": [{"text": "list the files"}]},
    {"id": "g1", "type": "gemini", "content": "Looking.", "toolCalls": [{"id": "ls-1", "name": "list_directory"}]},
    {"id": "g1", "type": "gemini", "content": "Looking.", "toolCalls": [
        {"id": "ls-1", "name": "list_directory", "args": {"dir_path": "."}, "status": "success",
         "result": [{"functionResponse": {"id": "ls-1", "name": "list_directory", "response": {"output": "a.py"}}}]},
        {"id": "rd-1", "name": "read_file", "args": {"file_path": "b.py"}, "status": "error",
         "result": [{"functionResponse": {"id": "rd-1", "name": "read_file", "response": {"error": "not found"}}}]},
    ]},
    {"$rewindTo": "g1"},
    {"$set": {"messages": [{"id": "g2", "type": "gemini", "content": "", "toolCalls": [
        {"id": "sh-1", "name": "run_shell_command", "args": {"command": "ls"}, "status": "cancelled"}]}]}},
]  # fmt: skip


@pytest.mark.parametrize("file", [None, *GEMINI_FILES])
def test_gemini_calls_are_counted_as_loopscope_counts_them(file: str | None, tmp_path: Path) -> None:
    """Gemini CLI labels give call indexes of the reference counter (tools/transcripts.py); they are scored against
    loopscope's ``calls.seq``, so both read a chat the same way, call by call: a JSONL message appended again as it
    grows is one message, a ``$set.messages`` checkpoint merges into them, ``$rewindTo`` is not applied, and a
    cancelled or refused call is an error (the constructed chat, then every labelled Gemini CLI file)."""
    if file is None:
        path = tmp_path / "session-2026-05-01T10-00-s1.jsonl"
        path.write_text("".join(json.dumps(o) + "\n" for o in GEMINI_JSONL), encoding="utf-8")
    else:
        path = ROOT / file
    ref = [(c["id"], c["tool"], bool(c["is_error"])) for c in transcripts_module().read(str(path), "gemini")["calls"]]
    assert ref == _loopscope_call_rows(path)
    if file is None:
        assert ref == [
            ("ls-1", "list_directory", False),
            ("rd-1", "read_file", True),
            ("sh-1", "run_shell_command", True),
        ]
