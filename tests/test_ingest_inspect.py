"""Inspect AI logs: ``.eval`` zips (log v2 and v3 with message_pool/input_refs) and ``.json`` logs, checked against
inspect_ai's own reader (``read_eval_log``) for samples, calls, results, errors and usage; bad input kept and
recorded; --agent filtering and the CLI."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import ingest_paths, query
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.detect.keys import canonical_json
from analyzer.ingest.formats import agent_names
from analyzer.store.filters import parse_agent

LOGS = [
    "inspect/inspect_ai_browser.json",
    "inspect/log_message_deduplication.eval",
    "inspect/log_formats.eval",
    "inspect/log_streaming.eval",
]


def reference(path: Path) -> dict[str, dict]:
    """What inspect_ai's reader says each sample holds, keyed by the session id loopscope should give it."""
    log_mod = pytest.importorskip("inspect_ai.log", reason="inspect_ai (a test dependency) is not installed")
    log = log_mod.read_eval_log(str(path))
    out = {}
    for s in log.samples or []:
        sid = s.uuid or f"{log.eval.run_id}:{s.id}:{s.epoch}"
        calls = [
            (tc.id, tc.function, canonical_json(tc.arguments))
            for m in s.messages
            if m.role == "assistant"
            for tc in (m.tool_calls or [])
        ]
        results = {m.tool_call_id: (m.text, m.error is not None) for m in s.messages if m.role == "tool"}
        # per model event where they carry usage (the log_formats sample has an empty model_usage but one model
        # event with usage), else the sample's aggregate: one level only
        usage = [e.output.usage for e in s.events if e.event == "model" and e.output.usage is not None] or list(
            s.model_usage.values()
        )
        out[sid] = {
            "calls": calls,
            "results": results,
            "prompts": sum(1 for m in s.messages if m.role == "user"),
            "total": sum(u.total_tokens for u in usage),
            "cache_read": sum(u.input_tokens_cache_read or 0 for u in usage),
            "output": sum(u.output_tokens for u in usage),
        }
    return out


@pytest.mark.parametrize("name", LOGS)
def test_fixture_matches_inspect_ai_reader(fixtures: Path, db: Path, name: str) -> None:
    ref = reference(fixtures / name)
    s = ingest_paths(db, fixtures / name)
    assert (s.files_ingested, s.errors) == (1, 0)
    got = {
        r[0]: r[1:]
        for r in query(
            db, "SELECT session_id, format, user_turns, total_tokens, cache_read_tokens, output_tokens FROM sessions"
        )
    }
    assert set(got) == set(ref)
    # messages carry no time; the sample's events give its start and end
    assert query(db, "SELECT count(*) FROM sessions WHERE started_at IS NULL OR ended_at < started_at") == [(0,)]
    for sid, want in ref.items():
        fmt, prompts, total, cache_read, output = got[sid]
        assert (fmt, prompts) == ("inspect", want["prompts"])
        assert (total, cache_read, output) == (want["total"], want["cache_read"], want["output"])
        calls = query(
            db, "SELECT call_id, tool, args, result_text, is_error FROM calls WHERE session_id = ? ORDER BY seq", [sid]
        )
        assert [c[:3] for c in calls] == want["calls"]
        for cid, _, _, text, is_error in calls:
            assert (text, is_error) == want["results"][cid]


def test_browser_log_usage_per_model_event(fixtures: Path, db: Path) -> None:
    # Read off the file: 5 model events; this older OpenAI log's input_tokens include the cached input
    # (total_tokens = input + output), so input is stored without it: 15235 - 9088.
    ingest_paths(db, fixtures / "inspect/inspect_ai_browser.json")
    assert query(db, "SELECT input_tokens, cache_read_tokens, output_tokens, total_tokens, models FROM sessions") == [
        (15235 - 9088, 9088, 281, 15516, ["gpt-4o-mini-2024-07-18"])
    ]
    rows = query(
        db,
        "SELECT input_tokens, cache_read_tokens, output_tokens FROM turns WHERE role = 'assistant' ORDER BY turn_index",
    )
    assert rows == [(1124, 0, 23), (544, 1024, 17), (1196, 1536, 17), (1208, 2688, 17), (2075, 3840, 207)]


def test_v3_message_pool_log(fixtures: Path, db: Path) -> None:
    # log v3: model events have input [] + input_refs into message_pool; the final messages are whole
    ingest_paths(db, fixtures / "inspect/log_message_deduplication.eval")
    assert query(db, "SELECT agent_version, calls, error_calls FROM sessions") == [("inspect log v3", 5, 0)]
    assert {r[0] for r in query(db, "SELECT args FROM calls")} == {'{"cmd":"ls"}'}


def _rewrite(src: Path, dst: Path, extra: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item, zin.read(item.filename))
        for name, data in extra.items():
            zout.writestr(name, data)
    return dst


def test_bad_sample_is_one_error_and_others_are_kept(fixtures: Path, tmp_path: Path, db: Path) -> None:
    src = fixtures / "inspect/log_message_deduplication.eval"
    with zipfile.ZipFile(src) as z:
        good = json.loads(z.read("samples/0_epoch_1.json"))
    # a second epoch whose bash call failed, plus a tool event the messages never showed
    failing = json.loads(json.dumps(good))
    failing.update(epoch=2, uuid="failing-epoch-2")
    # messages[2] is the tool message answering hardcoded_0
    failing["messages"][2]["error"] = {"type": "timeout", "message": "Command timed out"}
    failing["events"].append(
        {
            "event": "tool",
            "id": "extra_1",
            "function": "python",
            "arguments": {"code": "1/0"},
            "result": "",
            "error": {"type": "unknown", "message": "ZeroDivisionError"},
            "timestamp": "2026-02-28T00:44:00+00:00",
        }
    )
    path = _rewrite(
        src,
        tmp_path / "mixed.eval",
        {
            "samples/0_epoch_2.json": json.dumps(failing).encode(),
            "samples/1_epoch_1.json": b'{"id": 1, "epoch": 1, "messages": [',  # truncated JSON
        },
    )
    s = ingest_paths(db, path)
    assert (s.files_ingested, s.sessions) == (1, 2)
    errors = query(db, "SELECT reason FROM ingest_errors")
    assert len(errors) == 1 and "samples/1_epoch_1.json" in errors[0][0]
    rows = query(
        db, "SELECT call_id, tool, is_error, result_text FROM calls WHERE session_id = 'failing-epoch-2' ORDER BY seq"
    )
    assert [r[:3] for r in rows] == [
        ("hardcoded_0", "bash", True),
        ("hardcoded_1", "bash", False),
        ("hardcoded_2", "bash", False),
        ("hardcoded_3", "bash", False),
        ("hardcoded_4", "bash", False),
        ("extra_1", "python", True),
    ]
    assert rows[5][3] == "ZeroDivisionError"


def test_corrupt_zip_member_is_recorded(fixtures: Path, tmp_path: Path, db: Path) -> None:
    path = tmp_path / "corrupt.eval"
    shutil.copyfile(fixtures / "inspect/log_streaming.eval", path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("samples/2_epoch_2.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 10 : start + 40] = b"\xff" * 30  # damage the compressed bytes of one member
    path.write_bytes(bytes(data))
    s = ingest_paths(db, path)
    assert s.sessions == 3
    assert [r[0] for r in query(db, "SELECT reason FROM ingest_errors")][0].startswith("samples/2_epoch_2.json")


def test_json_log_with_a_bad_sample(fixtures: Path, tmp_path: Path, db: Path) -> None:
    doc = json.loads((fixtures / "inspect/inspect_ai_browser.json").read_text())
    doc["samples"].append("not a sample")
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc, indent=2))
    s = ingest_paths(db, path)
    assert (s.sessions, s.calls, s.errors) == (1, 4, 1)


def test_agent_filter_and_cli(fixtures: Path, tmp_path: Path) -> None:
    assert parse_agent("inspect-ai", agent_names()) == parse_agent("inspect_ai", agent_names()) == "inspect"
    corpus = tmp_path / "corpus"
    shutil.copytree(fixtures / "inspect", corpus / "inspect")
    shutil.copytree(fixtures / "gemini", corpus / "gemini")
    db = tmp_path / "cli.duckdb"
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["sessions", "--db", str(db), "--agent", "inspect", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)  # the price notes go to stderr
    assert len(rows) == 8 and {r["format"] for r in rows} == {"inspect"}


def test_orphan_tool_messages_are_recorded(fixtures: Path, db: Path) -> None:
    # Read off the file: one sample of 11 tool messages with errors and no assistant message that made the calls
    s = ingest_paths(db, fixtures / "inspect/log_tool_call_error.json")
    assert (s.files_ingested, s.sessions, s.calls, s.errors) == (1, 1, 0, 11)
    reasons = {r[0] for r in query(db, "SELECT reason FROM ingest_errors")}
    assert len(reasons) == 11 and all(r.startswith("tool message for a call not in sample") for r in reasons)


# -- current inspect_ai writes: zstd-compressed members, and chunked samples -------------------------------------------
def _zstd_copy(src: Path, dst: Path) -> Path:
    pytest.importorskip("inspect_ai._util.zipfile", reason="inspect_ai (a test dependency) is not installed")
    from inspect_ai._util.zipfile import zipfile_compress_kwargs  # patches zipfile to write zstd before 3.14

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", **zipfile_compress_kwargs) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item.filename))
    with zipfile.ZipFile(dst) as z:
        assert {i.compress_type for i in z.infolist()} == {93}
    return dst


def test_zstd_log_matches_inspect_ai_reader(fixtures: Path, tmp_path: Path, db: Path) -> None:
    path = _zstd_copy(fixtures / "inspect/log_streaming.eval", tmp_path / "zstd.eval")
    ref = reference(path)
    s = ingest_paths(db, path)
    assert (s.sessions, s.errors) == (4, 0)
    got = dict(query(db, "SELECT session_id, total_tokens FROM sessions"))
    assert got == {sid: want["total"] for sid, want in ref.items()}


def test_zstd_without_a_decoder_is_recorded(fixtures: Path, tmp_path: Path, db: Path, monkeypatch: Any) -> None:
    from analyzer.ingest.formats import inspect as adapter

    path = _zstd_copy(fixtures / "inspect/log_streaming.eval", tmp_path / "zstd.eval")
    monkeypatch.setattr(adapter, "_zstd_decoder", lambda: None)
    s = ingest_paths(db, path)
    # header.json, then _journal/start.json in its stead, and each of the 4 samples
    assert (s.files_ingested, s.sessions, s.errors) == (1, 0, 6)
    assert all("install the zstandard package" in r[0] for r in query(db, "SELECT reason FROM ingest_errors"))


def test_chunked_sample_matches_its_monolith(fixtures: Path, tmp_path: Path, db: Path) -> None:
    chunked = pytest.importorskip(
        "inspect_ai.log._recorders.chunked",
        reason="inspect_ai (a test dependency) is not installed, or too old to chunk",
    )
    src = fixtures / "inspect/log_message_deduplication.eval"
    # small chunks, so messages, events and attachments each span several zip entries
    chunked.convert_eval_logs_to_chunked(str(src), str(tmp_path / "out"), chunk_size=4, attachments_chunk_bytes=100)
    (path,) = (tmp_path / "out").glob("*.eval")
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert "samples/0_epoch_1/sample.json" in names and "samples/0_epoch_1/messages/4.json" in names
    # inspect_ai 0.3.285's read_eval_log does not read chunked samples back (it takes skeleton.json for a sample),
    # so the reference is its reading of the monolith the chunked log was converted from
    ref = reference(src)
    s = ingest_paths(db, path)
    assert (s.sessions, s.calls, s.errors) == (1, 5, 0)
    (sid,) = ref
    calls = query(db, "SELECT call_id, tool, args, result_text, is_error FROM calls ORDER BY seq")
    assert [c[:3] for c in calls] == ref[sid]["calls"]
    assert all((c[3], c[4]) == ref[sid]["results"][c[0]] for c in calls)
    # and the same rows as the monolith sample it came from
    mono = tmp_path / "mono.duckdb"
    ingest_paths(mono, src)
    assert query(mono, "SELECT call_id, tool, args, result_text, is_error FROM calls ORDER BY seq") == calls
    assert query(mono, "SELECT role, text, ts FROM turns ORDER BY turn_index") == query(
        db, "SELECT role, text, ts FROM turns ORDER BY turn_index"
    )
