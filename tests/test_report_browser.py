"""The report in a real headless Chromium (Debian's /usr/bin/chromium; never a downloaded browser), opened from
disk: no console error, no request outside the report folder, every chart drawn, links that work, and hostile
transcript content shown as text without running.

Screenshots of the index and a session page land in the test's tmp folder, in benchmarks/out/screens/ (git-ignored)
and in $LOOPSCOPE_SCREENSHOTS when set, for a person to look at.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import CHROMIUM
from test_report_corpus import IMG, LINK_TOOL, SCRIPT

from reports.paths import session_slug

SCREENS = Path(__file__).resolve().parents[1] / "benchmarks" / "out" / "screens"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (Debian package `chromium`)"),
]


class Visit:
    """One page load with everything the page did: console errors, uncaught exceptions, requests."""

    def __init__(self, ctx: Any, url: str) -> None:
        self.page = ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url)
        self.wait_for_charts()

    def wait_for_charts(self) -> None:
        self.page.wait_for_selector("body[data-charts-ready]", state="attached", timeout=20_000)

    def charts(self) -> tuple[int, int]:
        """Visible chart elements, and how many of them hold plotly's SVG."""
        return tuple(
            self.page.evaluate("""() => {
            const els = [...document.querySelectorAll('.chart')].filter(e => e.offsetParent !== null);
            const drawn = e => e.classList.contains('js-plotly-plot') && e.querySelector('svg.main-svg .trace, '
                                                                                         + 'svg.main-svg .hm');
            return [els.length, els.filter(drawn).length];
        }""")
        )  # type: ignore[return-value]

    def check_clean(self, folder: Path) -> None:
        assert self.errors == []
        root = folder.resolve().as_uri() + "/"
        outside = [u for u in self.requests if not u.startswith(root)]
        assert outside == []

    def close(self) -> None:
        self.page.close()


def screenshot(visit: Visit, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    visit.page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    for dest in [SCREENS] + (
        [Path(os.environ["LOOPSCOPE_SCREENSHOTS"])] if os.environ.get("LOOPSCOPE_SCREENSHOTS") else []
    ):
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / path.name)


def test_every_page_loads_clean_and_draws_every_chart(site: Path, browser: Any) -> None:
    out = site / "report"
    pages = [out / "index.html", out / "calibration.html", *sorted((out / "sessions").glob("*.html"))]
    assert len(pages) == 7  # a page for each of the five sessions, those without loops too
    v = Visit(browser, (out / "sessions.html").as_uri())  # the all-sessions index: no chart, no plotly.js
    try:
        v.check_clean(out)
        assert v.page.locator("#all-sessions tbody tr").count() == 5  # with the ones without loops
        assert v.page.locator("#all-sessions tbody td.sid a").count() == 5  # each linked to its page
    finally:
        v.close()
    # A session without calls (one line of it could not be read, the other is a prompt) draws no chart.
    no_calls = f"{session_slug('sess-broken')}.html"
    for page in pages:
        v = Visit(browser, page.as_uri())
        try:
            v.check_clean(out)
            assert v.page.locator("svg a").count() == 0, page.name
            shown, drawn = v.charts()
            assert (shown == 0 if page.name == no_calls else shown >= 2) and drawn == shown, page.name
        finally:
            v.close()


def test_index_links_to_a_session_page(site: Path, browser: Any, tmp_path: Path) -> None:
    out = site / "report"
    v = Visit(browser, (out / "index.html").as_uri())
    try:
        screenshot(v, tmp_path, "index")
        v.page.get_by_role("link", name="sess-loop", exact=True).click()
        v.page.wait_for_url(f"**/sessions/{session_slug('sess-loop')}.html")
        v.wait_for_charts()
        assert v.page.locator("h1").inner_text() == "sess-loop"
        assert v.charts() == (2, 2)
        screenshot(v, tmp_path, "session")
        v.check_clean(out)
    finally:
        v.close()


def test_hostile_transcript_content_is_shown_as_text_and_runs_nothing(site: Path, browser: Any) -> None:
    out = site / "report"
    for sid, payloads in (("sess-loop", [SCRIPT, IMG]), ("../../x", [IMG, LINK_TOOL])):
        v = Visit(browser, (out / "sessions" / f"{session_slug(sid)}.html").as_uri())
        try:
            body = v.page.locator("body").inner_text()
            for payload in payloads:
                assert payload in body
            assert v.page.evaluate("typeof window.__pwned") == "undefined"
            assert "PWNED" not in v.page.title()
            # No element came out of the transcript: the only images are none, the only scripts our own.
            assert v.page.locator("img").count() == 0
            # Transcript text inside charts stays text too: plotly turns <a> in labels into SVG links otherwise.
            assert v.page.locator("svg a").count() == 0
            assert v.page.evaluate(
                "[...document.scripts].every(s => s.type === 'application/json' || s.src.includes('/assets/'))"
            )
            v.check_clean(out)
        finally:
            v.close()


def test_single_file_report_works_offline_with_its_hashed_inline_scripts(
    site: Path, browser: Any, tmp_path: Path
) -> None:
    folder = site / "single"
    assert [p.name for p in folder.iterdir()] == ["report.html"]
    v = Visit(browser, (folder / "report.html").as_uri())
    try:
        assert v.page.locator("section#index").is_visible()
        assert v.charts()[0] >= 7 and v.charts()[0] == v.charts()[1]
        v.page.get_by_role("link", name="sess-loop", exact=True).click()
        v.wait_for_charts()
        section = v.page.locator(f"section#s-{session_slug('sess-loop')}")
        assert section.is_visible() and not v.page.locator("section#index").is_visible()
        assert v.charts() == (2, 2)
        # An episode link keeps its session in view.
        v.page.get_by_role("link", name="cycle", exact=True).click()
        assert section.is_visible()
        v.page.get_by_role("link", name="Calibration", exact=True).first.click()
        v.wait_for_charts()
        assert v.page.locator("section#calibration").is_visible() and v.charts() == (2, 2)
        assert v.page.evaluate("typeof window.__pwned") == "undefined"
        screenshot(v, tmp_path, "single-calibration")
        v.check_clean(folder)
    finally:
        v.close()
    # Opened straight at a session's fragment (a link someone shared): that section shows, with its charts drawn.
    sid = f"s-{session_slug('sess-window')}"
    v = Visit(browser, (folder / "report.html").as_uri() + "#" + sid)
    try:
        v.page.wait_for_load_state("load")
        v.wait_for_charts()
        assert v.page.locator(f"section#{sid}").is_visible() and v.charts() == (2, 2)
        v.check_clean(folder)
    finally:
        v.close()


def _overlaps(page: Any) -> list[str]:
    """Hover each chart so that plotly shows its modebar, and name the charts whose legend the modebar covers."""
    hit = []
    for i in range(page.locator(".chart.js-plotly-plot").count()):
        chart = page.locator(".chart.js-plotly-plot").nth(i)
        chart.scroll_into_view_if_needed()
        chart.hover(position={"x": 5, "y": 5})
        boxes = chart.evaluate("""el => {
            const box = s => { const e = el.querySelector(s); if (!e) return null;
                               const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
            return [box('.modebar'), box('g.legend')];
        }""")
        bar, legend = boxes
        if bar and legend and bar[0] < legend[2] and legend[0] < bar[2] and bar[1] < legend[3] and legend[1] < bar[3]:
            hit.append(chart.get_attribute("data-figure") or str(i))
    return hit


def test_no_chart_legend_lies_under_its_modebar(site: Path, browser: Any) -> None:
    """Plotly shows its modebar at a chart's top right on hover; a legend placed from the plot's left edge moved
    under it when long axis labels (a model name) pushed the plot right, hiding "made progress"."""
    out = site / "report"
    charted = [p for p in sorted((out / "sessions").glob("*.html")) if p.name != f"{session_slug('sess-broken')}.html"]
    for page in [out / "index.html", *charted]:  # sess-broken made no call: its page draws no chart
        v = Visit(browser, page.as_uri())
        try:
            assert v.page.locator(".chart.js-plotly-plot .modebar").count() > 0
            assert _overlaps(v.page) == [], page.name
        finally:
            v.close()
