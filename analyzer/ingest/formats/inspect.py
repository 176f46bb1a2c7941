"""Inspect AI eval logs: ``.eval`` zips and ``.json`` logs. docs/formats.md#inspect-ai.

One session per sample and epoch, id'd by the sample's ``uuid`` (or ``<run_id>:<sample id>:<epoch>`` in logs too
old to have one). A ``.eval`` is read with ``zipfile`` one ``samples/*.json`` member at a time, so memory follows the
largest sample, not the log; a member that cannot be read is one recorded error and the other samples are kept.
A ``.json`` log is one JSON document, read whole (up to the document limit of ``parse.py``).

Turns and calls come from the sample's final ``messages``: assistant ``tool_calls`` are the calls, ``tool`` messages
their results (``error`` set means failed). ``tool`` events add what the messages lack: the calls' timestamps, results
for calls whose tool message is missing, and calls that never made it into ``messages``. Log v3 deduplicates model
*inputs* into ``message_pool``/``input_refs``; the final ``messages`` are complete in v2 and v3, so nothing here needs
the pool. Large strings may be ``attachment://<hash>`` references into the sample's ``attachments``: resolved.
Newer inspect_ai may store a sample *chunked*: a folder ``samples/<id>_epoch_<n>/`` with a ``sample.json`` shell
whose ``message_refs`` are ranges into the chunked ``messages/<start>.json`` pool, plus ``events/<start>.json`` and
``attachments/<start>.json`` (strings addressed as ``attachment://<index>``); it is assembled, then read the same way.

Usage comes from the ``model`` events (``output.usage``), each attached to the assistant message it produced
(``output.choices[0].message.id``); events whose message is not in ``messages`` become usage-only turns. Only when no
model event carries usage is the sample's ``model_usage`` aggregate used instead (one level only, never both).
``input_tokens`` excludes cached input in current logs; older OpenAI logs included it (their ``total_tokens`` is
``input + output``), which is detected and corrected.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.base import LOCAL, FileContext, Files, parse_arguments, text_of
from analyzer.ingest.cost import Usage
from analyzer.ingest.rows import SessionBuilder, as_int

FORMAT = "inspect"
ALIASES = ("inspect-ai", "inspect_ai")
SNIFF_RANK = 50
_ZIP_MAGIC = b"PK\x03\x04"
_ATTACHMENT = "attachment://"


def sniff_document(doc: Any) -> bool:
    """A ``.json`` eval log: an EvalLog with its ``eval`` spec (``samples`` may be absent in a header-only log)."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("eval"), dict)
        and "task" in doc["eval"]
        and ("samples" in doc or "plan" in doc or "results" in doc)
    )


def sniff_file(path: Path, head: bytes, files: Files = LOCAL) -> bool:
    """A ``.eval`` zip: it has ``header.json`` or a ``_journal/`` (a log still being written)."""
    if not head.startswith(_ZIP_MAGIC):
        return False
    try:
        with files.open(str(path)) as f, zipfile.ZipFile(f) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    return any(n == "header.json" or n.startswith("_journal/") for n in names) and any(
        n.startswith("samples/") or n == "header.json" for n in names
    )


def usage_of(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    inp, out = as_int(u.get("input_tokens")), as_int(u.get("output_tokens"))
    cr, cw = as_int(u.get("input_tokens_cache_read")), as_int(u.get("input_tokens_cache_write"))
    total = u.get("total_tokens")
    if total is not None and (cr or cw) and as_int(total) == inp + out:
        inp = max(inp - cr - cw, 0)  # an older log whose input_tokens included the cached input
    cost = u.get("total_cost")
    return Usage(
        inp,
        out,
        cr,
        cw,
        total=as_int(total) if total is not None else None,
        cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
    )


_ZIP_ZSTANDARD = 93  # current inspect_ai writes .eval members with zstd, which zipfile reads natively from 3.14 only


def _zstd_decoder() -> Callable[[bytes], bytes] | None:
    """A decompressor for (possibly multi-frame) zstd data: the standard library's (3.14+) or the ``zstandard``
    package's (installed with inspect_ai); ``None`` when neither is available."""
    try:
        from compression import zstd  # type: ignore[import-not-found]

        return zstd.decompress  # type: ignore[no-any-return]
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError:
        return None
    return lambda raw: zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()


def _member(z: zipfile.ZipFile, name: str) -> bytes:
    """One zip member's bytes; zstd members are decompressed here when zipfile cannot."""
    info = z.getinfo(name)
    if info.compress_type != _ZIP_ZSTANDARD or _native_zstd():
        return z.read(name)
    decode = _zstd_decoder()
    if decode is None:
        raise NotImplementedError(
            "zstd-compressed member; install the zstandard package (or use Python 3.14+) to read it"
        )
    fp = z.fp
    if fp is None:
        raise zipfile.BadZipFile("zip file is closed")
    fp.seek(info.header_offset)
    head = fp.read(30)
    if head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local file header for {name}")
    n_name, n_extra = struct.unpack("<HH", head[26:30])
    fp.seek(info.header_offset + 30 + n_name + n_extra)
    try:
        data = decode(fp.read(info.compress_size))
    except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError and friends: a corrupt member
        raise zipfile.BadZipFile(f"zstd data of {name} cannot be decompressed ({exc})") from exc
    if zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"bad CRC-32 for {name}")
    return data


def _native_zstd() -> bool:
    """Whether this Python's zipfile reads zstd members itself (3.14+)."""
    import sys

    return sys.version_info >= (3, 14)


def _assemble(z: zipfile.ZipFile, shell: Any, seqs: dict[str, list[tuple[int, str]]]) -> dict[str, Any]:
    """A chunked sample made whole: ``messages`` (the message pool, chunked; the sample's own messages are the
    shell's ``message_refs`` ranges into it), ``events`` and ``attachments`` (strings addressed by index)."""
    if not isinstance(shell, dict):
        raise TypeError("sample.json is not an object")

    def seq(name: str) -> list[Any]:
        out: list[Any] = []
        for _, entry in sorted(seqs.get(name, [])):
            part = orjson.loads(_member(z, entry))
            if not isinstance(part, list):
                raise TypeError(f"{entry} is not a list")
            out.extend(part)
        return out

    sample = dict(shell)
    pool = seq("messages")
    refs = shell.get("message_refs")
    if isinstance(refs, list):
        sample["messages"] = [m for a, b in refs for m in pool[a:b]]
    else:
        sample["messages"] = pool
    sample["events"] = seq("events")
    sample["attachments"] = {str(i): a for i, a in enumerate(seq("attachments"))}
    return sample


def _add(a: Usage | None, b: Usage) -> Usage:
    if a is None:
        return b
    return Usage(
        a.input + b.input,
        a.output + b.output,
        a.cache_read + b.cache_read,
        a.cache_write + b.cache_write,
        None if a.total is None or b.total is None else a.total + b.total,
        None if a.cost is None or b.cost is None else a.cost + b.cost,
    )


def _resolve(value: Any, attachments: dict[str, Any]) -> Any:
    """Replace ``attachment://<hash>`` strings by the attachment's content, anywhere in a JSON value."""
    if not attachments:
        return value
    if isinstance(value, str):
        if value.startswith(_ATTACHMENT):
            got = attachments.get(value[len(_ATTACHMENT) :])
            return got if isinstance(got, str) else value
        return value
    if isinstance(value, list):
        return [_resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments) for k, v in value.items()}
    return value


def _content_text(content: Any) -> str:
    return text_of(content, ("text",))


def _result_text(value: Any) -> str:
    if isinstance(value, (str, list)) or value is None:
        return text_of(value, ("text",))
    if isinstance(value, dict) and "text" in value:
        return text_of(value, ("text",))
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or "")
    return str(err) if err is not None else ""


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.sessions = 0

    # -- the two containers --------------------------------------------------------------------------------------------
    def feed(self, doc: Any, line: int) -> None:
        if not isinstance(doc, dict):
            self.ctx.error(line, "Inspect log that is not a JSON object", doc)
            return
        samples = doc.get("samples") or []
        if not isinstance(samples, list):
            self.ctx.error(line, "Inspect log whose samples is not a list", doc.get("samples"))
            return
        for i, s in enumerate(samples):
            self._guarded(doc, s, i + 1, f"samples[{i}]")

    def read(self, path: Path) -> None:
        with self.ctx.files.open(str(path)) as f, zipfile.ZipFile(f) as z:
            names = z.namelist()
            header: Any = None
            for name in ("header.json", "_journal/start.json"):
                if name in names:
                    try:
                        header = orjson.loads(_member(z, name))
                        break
                    except (
                        zipfile.BadZipFile,
                        zlib.error,
                        orjson.JSONDecodeError,
                        OSError,
                        EOFError,
                        NotImplementedError,
                        RuntimeError,
                        ValueError,
                    ) as exc:
                        self.ctx.error(None, f"{name}: cannot be read ({type(exc).__name__}: {exc})")
            if not isinstance(header, dict):
                header = {}
            # A sample is one entry ``samples/<id>_epoch_<n>.json`` (monolith), or a folder of that name holding a
            # ``sample.json`` shell and chunked sequences (the chunked shape of newer inspect_ai).
            chunks: dict[str, dict[str, list[tuple[int, str]]]] = {}
            samples: list[tuple[str, str | None]] = []
            for n in names:
                if not n.startswith("samples/") or not n.endswith(".json"):
                    continue
                rest = n[len("samples/") :]
                if "/" not in rest:
                    samples.append((n, None))
                    continue
                prefix, _, tail = rest.partition("/")
                if tail == "sample.json":
                    samples.append((n, prefix))
                seq, _, start = tail.partition("/")
                if start[:-5].isdigit():
                    chunks.setdefault(prefix, {}).setdefault(seq, []).append((int(start[:-5]), n))
            for i, (name, prefix) in enumerate(samples):
                try:
                    sample = orjson.loads(_member(z, name))  # one sample in memory at a time
                    if prefix is not None:
                        sample = _assemble(z, sample, chunks.get(prefix, {}))
                except (
                    zipfile.BadZipFile,
                    zlib.error,
                    orjson.JSONDecodeError,
                    OSError,
                    EOFError,
                    NotImplementedError,
                    RuntimeError,
                    TypeError,
                    ValueError,
                ) as exc:
                    self.ctx.error(
                        i + 1, f"{name}: sample cannot be read ({type(exc).__name__}: {exc}); other samples kept"
                    )
                    continue
                self._guarded(header, sample, i + 1, name)
                del sample

    # -- one sample ----------------------------------------------------------------------------------------------------
    def _guarded(self, header: dict[str, Any], s: Any, line: int, where: str) -> None:
        if not isinstance(s, dict):
            self.ctx.error(line, f"{where}: sample is not a JSON object", s)
            return
        box: list[SessionBuilder] = []
        try:
            self._sample(header, s, line, box)
        except Exception as exc:  # noqa: BLE001 - one bad sample must not lose the others
            self.ctx.error(
                line,
                f"{where}: sample could not be read whole ({type(exc).__name__}: {exc}); rows up to there kept",
                {k: s.get(k) for k in ("id", "epoch", "uuid")},
            )
            if box:
                try:
                    box[0].finish()
                    self.sessions += 1
                except Exception:  # noqa: BLE001
                    pass

    def _sample(self, header: dict[str, Any], s: dict[str, Any], line: int, box: list[SessionBuilder]) -> None:
        spec = header.get("eval") if isinstance(header.get("eval"), dict) else {}
        run = spec.get("run_id") or spec.get("eval_id") or self.ctx.path.stem
        sid = (
            s.get("uuid")
            if isinstance(s.get("uuid"), str) and s.get("uuid")
            else f"{run}:{s.get('id')}:{s.get('epoch', 1)}"
        )
        version = header.get("version")
        b = self.ctx.builder(FORMAT, sid, agent_version=f"inspect log v{version}" if version is not None else None)
        box.append(b)
        attachments = s.get("attachments") if isinstance(s.get("attachments"), dict) else {}
        messages = s.get("messages") if isinstance(s.get("messages"), list) else []
        events = s.get("events") if isinstance(s.get("events"), list) else []
        b.see_ts(s.get("started_at"))
        msg_ids = {m.get("id") for m in messages if isinstance(m, dict) and m.get("role") == "assistant"}

        usage_by_msg: dict[str, Usage] = {}
        model_by_msg: dict[str, str] = {}
        ts_by_msg: dict[str, Any] = {}
        stamps = [e.get("timestamp") for e in events if isinstance(e, dict) and e.get("timestamp")]
        if stamps:  # messages carry no time: the events bound the sample
            b.see_ts(stamps[0])
        leftover: list[tuple[str | None, Usage, Any]] = []
        tool_events: dict[str, dict[str, Any]] = {}
        for e in events:
            if not isinstance(e, dict):
                continue
            kind = e.get("event")
            if kind == "model":
                out = e.get("output") if isinstance(e.get("output"), dict) else {}
                u = usage_of(out.get("usage"))
                if u is None:
                    continue
                choices = out.get("choices")
                msg = (
                    choices[0].get("message")
                    if isinstance(choices, list) and choices and isinstance(choices[0], dict)
                    else None
                )
                mid = msg.get("id") if isinstance(msg, dict) else None
                model = e.get("model") if isinstance(e.get("model"), str) else None
                if mid is not None:
                    ts_by_msg.setdefault(mid, e.get("timestamp"))
                if mid is not None and mid in msg_ids:
                    usage_by_msg[mid] = _add(usage_by_msg.get(mid), u)
                    if model:
                        model_by_msg.setdefault(mid, model)
                else:
                    leftover.append((out.get("model") or model, u, e.get("timestamp")))
            elif kind == "tool" and isinstance(e.get("id"), str):
                tool_events.setdefault(e["id"], e)
        if not usage_by_msg and not leftover and isinstance(s.get("model_usage"), dict):
            for model, mu in s["model_usage"].items():
                u = usage_of(mu)
                if u is not None:
                    leftover.append((model, u, None))

        called: set[str] = set()
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                self.ctx.error(line, f"message {i} of sample {s.get('id')} is not an object", m)
                continue
            role = m.get("role")
            if role == "user":
                b.user_prompt(_content_text(_resolve(m.get("content"), attachments)), None, line, turn_id=m.get("id"))
            elif role == "assistant":
                mid = m.get("id") if isinstance(m.get("id"), str) else None
                model = m.get("model") if isinstance(m.get("model"), str) else model_by_msg.get(mid or "")
                tid = b.assistant(
                    mid or f"m{i}",
                    _content_text(_resolve(m.get("content"), attachments)),
                    ts_by_msg.get(mid) if mid else None,
                    line,
                    model=model,
                    usage=usage_by_msg.get(mid) if mid else None,
                )
                for tc in m.get("tool_calls") or []:
                    if not isinstance(tc, dict) or not isinstance(tc.get("function"), str):
                        self.ctx.error(line, f"tool call without a function in sample {s.get('id')}", tc)
                        continue
                    cid = tc.get("id") if isinstance(tc.get("id"), str) else None
                    ev = tool_events.get(cid or "")
                    b.call(
                        cid,
                        tc["function"],
                        _resolve(parse_arguments(tc.get("arguments")), attachments),
                        ev.get("timestamp") if ev else None,
                        line,
                        turn_id=tid,
                    )
                    if cid:
                        called.add(cid)
            elif role == "tool":
                cid = m.get("tool_call_id")
                err = m.get("error")
                ev = tool_events.get(cid) if isinstance(cid, str) else None
                text = _result_text(_resolve(m.get("content"), attachments))
                if err is not None and not text:
                    text = _error_text(err)
                if not b.result(cid, text, err is not None, ev.get("completed") if ev else None):
                    self.ctx.error(line, f"tool message for a call not in sample {s.get('id')} ({cid})", m)
            # system messages carry no turn

        for cid, e in tool_events.items():  # tool events: results the messages lack, calls they never showed
            if cid not in called:
                b.call(
                    cid,
                    str(e.get("function") or "?"),
                    _resolve(parse_arguments(e.get("arguments")), attachments),
                    e.get("timestamp"),
                    line,
                )
            if b.has_pending(cid) and (e.get("result") is not None or e.get("error") is not None):
                err = e.get("error")
                text = _result_text(_resolve(e.get("result"), attachments))
                if err is not None and not text:
                    text = _error_text(err)
                b.result(cid, text, err is not None or bool(e.get("failed")), e.get("completed"))
        for k, (model, u, ts) in enumerate(leftover):
            b.assistant(f"usage{k}", None, ts, line, model=model, usage=u)
        if stamps:
            b.see_ts(stamps[-1])
        b.see_ts(s.get("completed_at"))
        b.finish()
        self.sessions += 1

    def close(self) -> int:
        return self.sessions
