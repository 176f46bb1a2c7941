"""The hook's per-session state: one small file per session (and subagent) under the user's cache dir, read and
written under an exclusive lock so parallel tool calls never interleave their updates.

``$LOOPSCOPE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/loopscope/hook``, else ``~/.cache/loopscope/hook``) holds
``<session>[.<agent>].state``: a pickle of the live guard and the few facts the hook keeps between calls (see
``claude_code.State``). A file that cannot be read starts a fresh state. Files untouched for 30 days are removed at
the start of a new session.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from analyzer.errors import LockTimeout

LOCK_TIMEOUT = 2.0  # seconds to wait for a parallel call's update before giving up (the hook then fails open)
STALE_DAYS = 30
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def cache_dir() -> Path:
    env = os.environ.get("LOOPSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "loopscope" / "hook"


def state_path(session_id: str, agent_id: str | None = None) -> Path:
    name = _safe(session_id) + (f".{_safe(agent_id)}" if agent_id else "")
    return cache_dir() / f"{name}.state"


def _safe(text: str) -> str:
    s = _SAFE.sub("_", text)
    if len(s) > 80 or s != text:
        import hashlib  # here only: loading OpenSSL costs every hook process ~3 ms

        s = s[:60] + "-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return s


@contextmanager
def locked(path: Path) -> Iterator[Box]:
    """Open (creating) the state file, lock it, and yield its content in a ``Box``; the box's value is written back
    when the block ends without an exception."""
    new_dir = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(f"{path} stayed locked for {LOCK_TIMEOUT:g} s") from None
                time.sleep(0.005)
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read()
        value: Any = None
        note = None
        if raw:
            try:
                value = pickle.loads(raw)
            except Exception as exc:  # a torn or foreign file: start again
                note = f"state {path.name} unreadable ({type(exc).__name__}); starting fresh"
        box = Box(value, note)
        yield box
        data = pickle.dumps(box.value, protocol=pickle.HIGHEST_PROTOCOL)
        os.lseek(fd, 0, os.SEEK_SET)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if len(raw) > len(data):  # overwritten in place, cut only when shorter (a truncate to 0 costs ~1 ms)
            os.ftruncate(fd, len(data))
    finally:
        os.close(fd)  # releases the lock
    if fresh and not new_dir:
        _sweep(path.parent)


class Box:
    __slots__ = ("value", "note")

    def __init__(self, value: Any, note: str | None) -> None:
        self.value = value
        self.note = note


def _sweep(folder: Path) -> None:
    """Remove state files untouched for ``STALE_DAYS`` (once per new session)."""
    cutoff = time.time() - STALE_DAYS * 86400
    try:
        for p in folder.glob("*.state"):
            try:
                if p.stat().st_mtime < cutoff:
                    p.unlink()
            except OSError:
                pass
    except OSError:
        pass
