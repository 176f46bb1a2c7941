"""Where each page lives, and how one page links to another.

A session id is whatever the transcript says (``../../x``, ``CON``, 300 characters of emoji): it never becomes a path
as is. ``session_slug`` keeps letters, digits, ``_`` and ``-`` (no dot, so no ``..``), cuts the length, and appends a
short hash of the full id, so two ids that differ only in dropped characters (or in case, on a case-insensitive disk)
still get two pages. An id that holds a secret (``redact`` would change it) gets a name that is a hash alone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from analyzer.errors import LoopscopeError
from reports.redact import has_secret

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def session_slug(session_id: str) -> str:
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    if has_secret(session_id):  # an id that holds a key must not put it in a file name or a link
        return f"session-{hashlib.blake2b(session_id.encode('utf-8', 'surrogatepass'), digest_size=8).hexdigest()}"
    base = _UNSAFE.sub("-", session_id).strip("-_")[:48] or "session"
    return f"{base}-{digest}"


def inside(root: Path, rel: str, resolved: Path | None = None) -> Path:
    """``root / rel``, refusing anything that would resolve outside ``root`` (a last check, should a name ever get
    past ``session_slug``). ``resolved``: ``root.resolve()``, when the caller checks many names under one root."""
    base = resolved or root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise LoopscopeError(f"refusing to write {rel!r} outside the report folder {root}")
    return target


HOME = "index"
"""The id of the page a report opens at: a folder's ``index.html`` (the name a single-file report gets in a folder
too), and the section a single file shows when its address names none (static/loopscope.css). Page ids are declared
with their pages (``site.PAGES``); this one and ``ALL_SESSIONS`` are named here because other code links to them."""
ALL_SESSIONS = "sessions"
"""The id of the all-sessions page, which the index links to."""


def page_path(page_id: str) -> str:
    """The file of a page over the whole scope (``site.PAGES``) in a folder report."""
    return f"{page_id}.html"


@dataclass(frozen=True)
class Links:
    """Hrefs from one page: to a page over the whole scope, a session page, an episode, and the assets.
    ``single`` reports link by fragment inside one document."""

    single: bool = False
    depth: int = 0  # 0 for pages at the report root, 1 for sessions/*.html

    @property
    def root(self) -> str:
        return "../" * self.depth

    def page(self, page_id: str) -> str:
        """The page ``page_id`` of ``site.PAGES``: its file, or in a single file its section (the same id)."""
        return f"#{page_id}" if self.single else f"{self.root}{page_path(page_id)}"

    def session(self, session_id: str) -> str:
        slug = session_slug(session_id)
        return f"#s-{slug}" if self.single else f"{self.root}sessions/{slug}.html"

    def at(self, depth: int) -> Links:
        return Links(self.single, depth)


def session_page_path(session_id: str) -> str:
    return f"sessions/{session_slug(session_id)}.html"


def section_id(session_id: str) -> str:
    """The element id of a session's section (single-file) and the prefix of its episode anchors."""
    return f"s-{session_slug(session_id)}"
