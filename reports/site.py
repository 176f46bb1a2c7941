"""The report's pages over the whole scope, declared once: each is a row of ``PAGES``, and whatever lists pages reads
that table. The renderer writes them (a folder report rewrites them every time, where an unchanged session keeps its
page), a single-file report holds them first and in this order, the nav links those that have an entry.

A new page is a row here, its template (``templates/<id>.html``, which extends ``layout``) and its context function
in ``pages.py``, ``(meta, inputs) -> context``. Session pages are not rows: each shows one session, with loops or
without (``render._session_pages``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from reports import pages
from reports.context import PageMeta
from reports.paths import ALL_SESSIONS, HOME, page_path


@dataclass(frozen=True)
class ReportPage:
    """One page over the whole scope. Its ``id`` names it everywhere: its file in a folder report
    (``paths.page_path``), its template (``templates/<id>.html``), its element id and, in a single-file report, its
    section's fragment."""

    id: str
    title: str  # the document's title
    context: Callable[[PageMeta, pages.ReportInputs], Any]  # what its template shows
    nav: str = ""  # its entry in the nav ("": none)
    nav_at: int = 0  # where that entry sits in the nav, whose order is not the table's
    charts: bool = True  # whether it draws charts (loads plotly.js)
    needs: str = ""  # the ``ReportInputs`` field the page exists only with ("": always there)

    @property
    def path(self) -> str:
        return page_path(self.id)

    @property
    def template(self) -> str:
        return f"{self.id}.html"


PAGES: tuple[ReportPage, ...] = (
    ReportPage(HOME, "loopscope report", pages.index_context, nav="Overview", nav_at=0),
    ReportPage("calibration", "Calibration", pages.calibration_context, nav="Calibration", nav_at=2),
    ReportPage(ALL_SESSIONS, "All sessions", pages.all_sessions_context, nav="Sessions", nav_at=1, charts=False),
    ReportPage(
        "evaluation",
        "Evaluation",
        pages.evaluation_context,
        nav="Evaluation",
        nav_at=3,
        charts=False,
        needs="evaluation",
    ),
)
"""Every page over the whole scope, in the order a single-file report holds them."""


def pages_of(given: Collection[str] = ()) -> tuple[ReportPage, ...]:
    """The pages of a report whose optional inputs ``given`` (``ReportInputs`` field names, e.g. ``evaluation``: the
    labels of ``analyze --labels``) were computed."""
    return tuple(p for p in PAGES if not p.needs or p.needs in given)


def nav_of(shown: Collection[ReportPage]) -> tuple[ReportPage, ...]:
    """The pages of ``shown`` the nav links, in its order."""
    return tuple(sorted((p for p in shown if p.nav), key=lambda p: p.nav_at))


NAV: tuple[ReportPage, ...] = nav_of(pages_of())
"""The nav of every report: the pages it always has, in the nav's order, beginning with the home page
(``PageMeta.home``). Session pages link these; the pages over the whole scope link their report's optional pages too
(``nav_of(pages_of(...))``)."""
