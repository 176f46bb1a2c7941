"""Labels made in the report, in a real headless Chromium on file:// (issue 31): a person marks two findings "not a
loop" and a loop the scan missed on a loop-free session's page, reloads (the labels are still there), exports
``loopscope-labels.json``, and ``loopscope eval --labels`` on that file reports exactly those: two false findings and
one missed loop; ``calibrate --labels`` on it moves the recommendation. Then the file is imported back after a clear,
and the single-file report (its one script allowed by hash) keeps labels the same way.

Runs the sample data through ``loopscope analyze`` as a user does; Debian's Chromium, never a downloaded browser.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CHROMIUM, ROOT, SAMPLE_DATA

from analyzer.evaluate.labels import session_key
from analyzer.store import connection
from reports.paths import session_page_path, session_slug

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (Debian package `chromium`)"),
]

STREAK = "5d0e9a41-7c3b-4f6a-8e2d-0c4b9f3a7e25"  # pi: `npm test -- checkout` seven times, the same error: stuck
DRIFT = "8f41c7d2-3b9e-4a05-b6f1-d27e5c0a9b38"  # pi: a command drifting by a flag, stuck
LOOP_FREE = "0b6c2f0e-5a7d-4c1e-9d39-2f7f1a8e4c11"  # pi: no finding; `npm run build` at calls #4, #6 and #8
MISSED = (3, 7)  # the seqs of calls #4 and #8, the loop the person marks


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    if check:
        assert res.returncode == 0, res.stderr[-3000:]
    return res


def has_command(name: str) -> bool:
    return cli(name, "--help", check=False).returncode == 0


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("labels")
    db, out, single = tmp / "s.duckdb", tmp / "report", tmp / "single" / "report.html"
    cli("analyze", str(SAMPLE_DATA), "--db", str(db), "--out", str(out), "--quiet")
    cli("report", "--db", str(db), "--out", str(single), "--single-file", "--quiet")
    return {"db": db, "out": out, "single": single, "tmp": tmp}


def store_facts(db: Path) -> tuple[str, dict[str, list[str]]]:
    """The store's id and each session's finding ids (what the labels must name)."""
    con = connection.connect(db, read_only=True)
    try:
        sid = connection.store_id(con)
        rows = con.execute("SELECT session_id, list(finding_id ORDER BY first_seq) FROM findings GROUP BY 1").fetchall()
    finally:
        con.close()
    return sid, {s: list(f) for s, f in rows}


class Tab:
    """One page of the report, with its console errors and the requests it made. Waits are selectors, never
    JavaScript strings: the report's CSP forbids eval, which ``wait_for_function`` needs."""

    def __init__(self, ctx: Any, url: str) -> None:
        self.page = ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.open(url)

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-labels-ready]", state="attached", timeout=20_000)

    def reload(self) -> None:
        self.page.reload()
        self.page.wait_for_selector("body[data-labels-ready]", state="attached", timeout=20_000)

    def count(self) -> int:
        return int(self.page.locator(".labels-count").first.get_attribute("data-count") or -1)

    def clean(self) -> None:
        """No console error (a CSP violation is one) and no request but for the report's own files and downloads."""
        assert self.errors == []
        assert [u for u in self.requests if not u.startswith(("file://", "blob:"))] == []

    def close(self) -> None:
        self.page.close()


def test_labels_made_in_the_report_are_what_eval_and_calibrate_read(sample: dict[str, Path], browser: Any) -> None:
    out, db, tmp = sample["out"], sample["db"], sample["tmp"]
    store_id, findings = store_facts(db)
    assert LOOP_FREE not in findings and len(findings[STREAK]) == 1 and len(findings[DRIFT]) == 1

    # Every session of the sessions table links to its page, the loop-free ones too.
    tab = Tab(browser, (out / "sessions.html").as_uri())
    try:
        tab.page.wait_for_selector("#all-sessions[data-ready]", state="attached")
        tab.page.select_option("select[name=loops]", "no")
        tab.page.wait_for_selector('#all-sessions-status[data-matching="10"]', state="attached")
        assert tab.page.locator("#all-sessions tbody td.sid a").count() == 10
        assert tab.count() == 0 and tab.page.locator(".labels-count").first.inner_text() == "No labels yet"
        tab.clean()
    finally:
        tab.close()

    # Two findings: "not a loop", one with a note.
    for sid, note in ((STREAK, "the test server was down: not the agent's loop"), (DRIFT, "")):
        tab = Tab(browser, (out / session_page_path(sid)).as_uri())
        try:
            box = tab.page.locator(f'.finding-label[data-finding="{findings[sid][0]}"]')
            if note:
                box.locator(".label-note").fill(note)
            box.locator("button[data-label=not_loop]").click()
            assert box.locator("button[data-label=not_loop]").get_attribute("aria-pressed") == "true"
            tab.clean()
        finally:
            tab.close()

    # A missed loop on a loop-free session's page, from its first call to its last; then a reload keeps all three.
    tab = Tab(browser, (out / session_page_path(LOOP_FREE)).as_uri())
    try:
        assert tab.page.locator("h2", has_text="Conversation").count() == 1
        assert tab.page.locator("ol.conv.whole li[data-seq]").count() == 9
        assert tab.count() == 2
        tab.page.locator(f'li[data-seq="{MISSED[0]}"] button[data-mark=from]').click()
        assert "Missed loop from call #4" in tab.page.locator(".labels-pending").inner_text()
        tab.page.locator(f'li[data-seq="{MISSED[1]}"] button[data-mark=to]').click()
        assert tab.count() == 3
        # A loop-free label would contradict it: refused, saying why.
        tab.page.locator("button[data-session-label=loop-free]").click()
        assert tab.count() == 3 and "contradicts" in tab.page.locator(".labels-status").first.inner_text()
        tab.reload()
        assert tab.count() == 3
        assert tab.page.locator(".span-labels li").first.inner_text().startswith("Loop: calls #4–#8")
        marked = tab.page.locator("li[data-seq].marked-loop")
        assert [int(marked.nth(i).get_attribute("data-seq") or -1) for i in range(marked.count())] == [3, 4, 5, 6, 7]
        with tab.page.expect_download() as dl:
            tab.page.locator("button[data-labels=export]").first.click()
        download = dl.value
        assert download.suggested_filename == "loopscope-labels.json"
        exported = tmp / "loopscope-labels.json"
        download.save_as(exported)
        tab.clean()
    finally:
        tab.close()

    text = exported.read_text()
    doc = json.loads(text)
    assert doc["loopscope_labels"] == 1 and doc["store_id"] == store_id
    assert sorted(doc["labels"], key=lambda lb: lb["session_key"]) == sorted(
        [
            {
                "session_key": session_key(STREAK),
                "label": "not_loop",
                "finding_id": findings[STREAK][0],
                "note": "the test server was down: not the agent's loop",
            },
            {"session_key": session_key(DRIFT), "label": "not_loop", "finding_id": findings[DRIFT][0]},
            {"session_key": session_key(LOOP_FREE), "label": "loop", "first_seq": MISSED[0], "last_seq": MISSED[1]},
        ],
        key=lambda lb: lb["session_key"],
    )
    assert not any(sid in text for sid in (STREAK, DRIFT, LOOP_FREE))  # sessions are named by key, never by id

    if not has_command("eval"):
        pytest.skip("`loopscope eval` is not in this checkout yet: the exported file was checked, not scored")
    res = cli("eval", "--labels", str(exported), "--db", str(db), "--format", "json", "--no-guards")
    ev = json.loads(res.stdout)
    overall = next(r for r in ev["figures"] if r["group"] == "all")
    assert (overall["false_findings"], overall["missed"]) == (2, 1)
    kinds = sorted(d["disagreement"] for d in ev["disagreements"] if d["disagreement"] != "unlabelled")
    assert kinds == ["false finding", "false finding", "missed loop"]

    def recommendation(*extra: str) -> dict[str, Any]:
        res = cli("calibrate", "--db", str(db), "--format", "json", "--no-save", "--force-recommendation", *extra)
        return json.loads(res.stdout)["recommendation"]

    without, labelled = recommendation(), recommendation("--labels", str(exported))
    assert labelled != without


def test_a_cleared_browser_gets_the_labels_back_by_import(sample: dict[str, Path], browser: Any) -> None:
    out, tmp = sample["out"], sample["tmp"]
    exported = tmp / "loopscope-labels.json"
    if not exported.is_file():
        pytest.skip("needs the file the first test exports")
    tab = Tab(browser, (out / session_page_path(STREAK)).as_uri())
    try:
        tab.page.once("dialog", lambda d: d.accept())
        tab.page.locator("button[data-labels=clear]").first.click()
        assert tab.count() == 0
        assert tab.page.locator(".finding-label button[aria-pressed=true]").count() == 0
        tab.page.set_input_files("input[data-labels=import]", str(exported))
        tab.page.wait_for_selector('.labels-count[data-count="3"]', state="attached")
        assert "Imported 3 labels" in tab.page.locator(".labels-status").first.inner_text()
        box = tab.page.locator(".finding-label")
        assert box.locator("button[data-label=not_loop]").get_attribute("aria-pressed") == "true"
        assert box.locator(".label-note").input_value() == "the test server was down: not the agent's loop"
        # A file of another store's labels is refused whole.
        other = tmp / "other-store.json"
        other.write_text(json.dumps({**json.loads(exported.read_text()), "store_id": "another-store"}))
        tab.page.set_input_files("input[data-labels=import]", str(other))
        tab.page.wait_for_selector(".labels-status:has-text('another store')", state="attached")
        assert tab.count() == 3
        tab.clean()
    finally:
        tab.close()


def test_the_single_file_report_keeps_labels_under_its_hashed_script(sample: dict[str, Path], browser: Any) -> None:
    """The single file's CSP allows its one inline script by hash: the labels work there as in the folder, under the
    same store id, so labels made in one show in the other."""
    single = sample["single"]
    tab = Tab(browser, single.as_uri() + f"#s-{session_slug(DRIFT)}")
    try:
        section = tab.page.locator(f"section#s-{session_slug(DRIFT)}")
        assert section.is_visible()
        box = section.locator(".finding-label")
        before = tab.count()
        pressed = box.locator("button[data-label=not_loop]").get_attribute("aria-pressed")
        assert (before, pressed) in ((3, "true"), (0, "false"))  # the folder report's labels, when run after it
        box.locator("button[data-label=unsure]").click()
        assert box.locator("button[data-label=unsure]").get_attribute("aria-pressed") == "true"
        assert tab.count() == max(before, 1)
        # Every section's bar counts the same labels.
        counts = tab.page.locator(".labels-count")
        assert {counts.nth(i).get_attribute("data-count") for i in range(counts.count())} == {str(max(before, 1))}
        tab.clean()
    finally:
        tab.close()
