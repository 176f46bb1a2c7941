"""The report as written to disk: what it contains, what it refuses to contain, and how it behaves without scan,
replay or calibration results. Browser behaviour is in test_report_browser.py."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

import pytest
import typer
from test_report_corpus import SECRETS, add_findings, all_text, build_store, sample_calibration, sample_replay
from typer.testing import CliRunner

from analyzer.commands.report import report as report_cmd
from analyzer.store import connection
from analyzer.store.filters import SessionFilter
from reports import Calibration, Replay, ReportInputError, render_report
from reports.data import ReportData
from reports.paths import session_slug

WHEN = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("corpus"))


def render(db: Path, out: Path, **kw: object):
    con = connection.connect(db, read_only=True)
    try:
        flt = kw.pop("flt", SessionFilter())
        return render_report(ReportData(con, flt), out, generated_at=WHEN, **kw)  # type: ignore[arg-type]
    finally:
        con.close()


def test_writes_index_calibration_session_pages_and_versioned_assets(corpus: Path, tmp_path: Path) -> None:
    ticks: list[tuple[int, int]] = []
    res = render(corpus, tmp_path / "r", progress=lambda done, total: ticks.append((done, total)))
    out = tmp_path / "r"
    # Every session has a page: the three with loops and the two without.
    assert res.index == out / "index.html" and res.session_pages == 5 and ticks == [(i, 5) for i in range(1, 6)]
    pages = sorted(p.name for p in (out / "sessions").iterdir())
    assert pages == sorted(
        f"{session_slug(s)}.html" for s in ("sess-loop", "../../x", "sess-window", "sess-clean", "sess-broken")
    )
    from plotly.offline import get_plotlyjs_version

    assets = sorted(p.name for p in (out / "assets").iterdir())
    assert len(assets) == 3 and f"plotly-{get_plotlyjs_version()}.min.js" in assets
    assert any(re.fullmatch(r"loopscope-[0-9a-f]{10}\.css", a) for a in assets)
    assert any(re.fullmatch(r"loopscope-[0-9a-f]{10}\.js", a) for a in assets)
    assert (out / "calibration.html").is_file()
    assert res.bytes == sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and p.name[0] != ".")


def test_index_shows_totals_loops_worst_sessions_and_ingest_errors(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r")
    html = (tmp_path / "r" / "index.html").read_text()
    # 5 sessions (one from the broken file), 34 calls, 3 with loops; the worst session links to its page.
    assert re.search(r"Sessions</div>\s*<div class=\"kpi-total\">5</div>", html)
    assert re.search(r"Tool calls</div>\s*<div class=\"kpi-total\">34</div>", html)
    assert "3 with loops" in html
    worst = html[html.index("Worst sessions") : html.index("Ingest errors")]
    assert worst.index("sess-loop") < worst.index("../../x") < worst.index("sess-window")
    assert f'href="sessions/{session_slug("sess-loop")}.html"' in worst
    for chart in ("by-kind", "by-tool", "by-model", "by-agent", "by-project", "by-day", "repeats"):
        assert f'id="{chart}-data"' in html
    errors = html[html.index("Ingest errors") :]
    assert "1 line could not be read" in errors and "broken.jsonl" in errors


def test_hostile_markup_is_text_everywhere(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r", replay=sample_replay(), calibration=sample_calibration())
    text = all_text(tmp_path / "r")
    # No transcript-born element survives: the payloads only appear escaped (HTML) or \u003c-escaped (JSON).
    assert "<script>window.__pwned" not in text and "<img src=x" not in text
    assert "&lt;script&gt;window.__pwned" in text and "&lt;img src=x onerror=" in text
    assert "<b>bold?</b>" not in text and "&lt;b&gt;bold?&lt;/b&gt;" in text
    for page in (tmp_path / "r").rglob("*.html"):
        html = page.read_text()
        # The only <script> elements are the two static files and inert JSON blocks.
        tags = re.findall(r"<script\b[^>]*>", html)
        assert all(('type="application/json"' in t) or re.search(r'src="(\.\./)?assets/', t) for t in tags), tags
        assert "onerror=" not in re.sub(r"&lt;img src=x onerror=", "", html)
        csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', html)
        assert csp and unescape(csp.group(1)).startswith("default-src 'none'; script-src 'self';")


def test_secrets_are_redacted_by_default_and_shown_with_no_redact(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r")
    text = all_text(tmp_path / "r")
    for family, secret in SECRETS.items():
        needle = secret.splitlines()[1] if family == "pem" else secret
        assert needle not in text, family
    assert "[REDACTED anthropic-key]" in text and "[REDACTED slack-token]" in text
    assert '<mark class="redacted">[REDACTED' in text
    render(corpus, tmp_path / "raw", redact=False)
    raw = all_text(tmp_path / "raw")
    assert SECRETS["anthropic"] in raw and SECRETS["aws"] in raw
    assert "Not redacted: this report may contain secrets" in raw


def test_hostile_session_id_stays_inside_the_output_folder(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "r"
    render(corpus, out)
    written = {p.resolve() for p in tmp_path.rglob("*") if p.is_file()}
    assert all(out.resolve() in p.parents for p in written)
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "deep" / "x.html").exists()
    slug = session_slug("../../x")
    assert "/" not in slug and ".." not in slug and (out / "sessions" / f"{slug}.html").is_file()
    # Distinct ids never share a page, even when their safe characters agree.
    assert session_slug("a/b") != session_slug("a?b") and session_slug("A") != session_slug("a")


def test_session_page_shows_timeline_tokens_episodes_diffs_and_guards(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r", replay=sample_replay())
    html = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    prefix = f"s-{session_slug('sess-loop')}"
    assert f'id="{prefix}-timeline-data"' in html and f'id="{prefix}-tokens-data"' in html
    # Four episodes, each with its repeated call; the cycle as a pattern of two calls repeated three times.
    assert html.count('class="card episode"') == 4 and html.count('<details class="card episode"') == 4
    assert "command: npm test" in html and "(A B) ×3" in html and "A ×6" in html
    # Drift: the diff shows the changed number struck out and the new one inserted.
    assert "<del>20</del><ins>30</ins>" in html
    # Text loop: the assistant's repeated sentence, escaped.
    assert "I will check the directory &lt;script&gt;" in html
    guards = html[html.index("What each guard would have done") : html.index("Loop episodes")]
    # Calls are numbered from 1 (the store's seq 2 and 4 are calls #3 and #5), each linked to its anchor.
    assert "open-codesign" in guards and "call #3" in guards and "call #5" in guards and "stuck loop" in guards
    assert "call #2<" not in guards
    assert 'href="#call-3"' in guards and 'id="call-3"' in html and 'id="call-5"' in html


def test_guard_replay_false_halt_and_calibration_page(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r", replay=sample_replay(), calibration=sample_calibration())
    page = (tmp_path / "r" / "sessions" / f"{session_slug('sess-window')}.html").read_text()
    assert "progress (false halt)" in page
    cal = (tmp_path / "r" / "calibration.html").read_text()
    assert 'id="frontier-data"' in cal and 'id="sweep-data"' in cal
    assert "WARN_REPEATS = 3\nHALT_REPEATS = 5" in cal
    presets = cal[cal.index("Guard presets on these sessions") :]
    # open-codesign: 3 sessions, 2 warned, 1 halted on a stuck loop, 0 false halts, 17 calls after halt.
    assert re.search(
        r"<td>open-codesign</td><td class=\"num\">3</td><td class=\"num\">2</td>"
        r"<td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">0</td>"
        r"<td class=\"num\">17</td>",
        presets,
    )
    index = (tmp_path / "r" / "index.html").read_text()
    assert "warn at 3 and halt at 5" in index


def test_without_replay_and_calibration_sections_say_not_computed(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r")
    cal = (tmp_path / "r" / "calibration.html").read_text()
    assert "Threshold calibration: not computed." in cal and "Guard replay: not computed." in cal
    page = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    assert "Guard replay: not computed." in page
    assert "no recommended warn/halt lines" in (tmp_path / "r" / "index.html").read_text()


def test_without_findings_table_the_index_says_run_scan(tmp_path: Path) -> None:
    db = build_store(tmp_path, with_findings=False)
    res = render(db, tmp_path / "r")
    html = (tmp_path / "r" / "index.html").read_text()
    assert "Loop findings: not computed." in html and "loopscope scan" in html
    assert res.session_pages == 0 and not res.has_findings
    assert "Ingest errors" in html and re.search(r"kpi-total\">5<", html)


def test_filters_restrict_every_section(corpus: Path, tmp_path: Path) -> None:
    res = render(corpus, tmp_path / "r", flt=SessionFilter.parse(project="webapp"))
    html = (tmp_path / "r" / "index.html").read_text()
    assert res.session_pages == 1 and "sess-window" not in html and "../../x" not in html
    assert "1 session, project contains “webapp”" in html
    res = render(corpus, tmp_path / "d", flt=SessionFilter.parse(since="2026-03-03", until="2026-03-03"))
    assert res.session_pages == 1 and (tmp_path / "d" / "sessions" / f"{session_slug('../../x')}.html").exists()


def test_a_second_report_removes_pages_the_first_wrote_and_nothing_else(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    render(corpus, out)
    keep = out / "notes.txt"
    keep.write_text("mine")
    render(corpus, out, flt=SessionFilter.parse(project="webapp"))
    assert [p.name for p in (out / "sessions").iterdir()] == [f"{session_slug('sess-loop')}.html"]
    assert keep.read_text() == "mine"


def test_single_file_is_self_contained_with_hashed_scripts(corpus: Path, tmp_path: Path) -> None:
    res = render(
        corpus, tmp_path / "one.html", single_file=True, replay=sample_replay(), calibration=sample_calibration()
    )
    assert res.files == [tmp_path / "one.html"] and sorted(p.name for p in tmp_path.iterdir()) == ["one.html"]
    html = res.index.read_text()
    assert not re.search(r"<(script|img|link|iframe)\b[^>]*\b(src|href)=", html)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    inline = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(inline) == 2
    for body in inline:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "'self'" not in csp.split("script-src")[1].split(";")[0]
    for sid in ("sess-loop", "../../x", "sess-window"):
        assert f'<section class="page" id="s-{session_slug(sid)}">' in html
        assert f'href="#s-{session_slug(sid)}"' in html
    assert '<section class="page" id="index">' in html and '<section class="page" id="calibration">' in html
    assert SECRETS["anthropic"] not in html and "<script>window.__pwned" not in html


def test_bad_replay_or_calibration_frames_are_refused_with_a_clear_message() -> None:
    import polars as pl

    with pytest.raises(ReportInputError, match="replay frame is missing column"):
        Replay(pl.DataFrame({"session_id": ["a"]}))
    with pytest.raises(ReportInputError, match="calibration sweep is missing column"):
        Calibration(pl.DataFrame({"warn": [3]}))


def test_findings_with_unknown_calls_or_no_calls_still_render(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    db.write_bytes(corpus.read_bytes())
    add_findings(db, [{"session_id": "sess-loop", "kind": "streak", "seqs": [0, 1, 2]}])
    con = connection.connect(db)
    con.execute(
        "INSERT INTO findings VALUES ('odd', 'sess-loop', 'nested', NULL, [], [], 3, 4, 2, NULL, 0, NULL, NULL, NULL)"
    )
    con.execute(
        "INSERT INTO findings VALUES ('ghost', 'no-such-session', 'streak', NULL, ['x'], ['zz'], 0, 1, 2, "
        "true, 0, 5, 5, 0.1)"
    )
    con.execute(
        "INSERT INTO findings VALUES ('words', 'sess-loop', 'text', NULL, [], [], NULL, NULL, 3, true, 1, 0, 40, 0)"
    )  # a text loop whose messages issued no calls
    con.close()
    res = render(db, tmp_path / "r")
    html = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    # A page for each of the five sessions, none for the finding whose session is not in the store.
    assert res.session_pages == 5 and "The calls of this episode are not in the store." in html
    assert "none (repeated text only)" in html and "<td>—</td>" in html


def test_cli_report_command(corpus: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("report")(report_cmd)
    app.command("noop")(lambda: None)  # a second command keeps typer from flattening the app
    out = tmp_path / "cli"
    result = CliRunner().invoke(
        app, ["report", "--db", str(corpus), "--out", str(out), "--agent", "pi", "--project", "api"]
    )
    assert result.exit_code == 0, result.output
    assert "2 session pages" in result.output and (out / "index.html").is_file()  # one with loops, one without
    bad = CliRunner().invoke(app, ["report", "--db", str(corpus), "--out", str(out), "--since", "yesterday"])
    assert bad.exit_code == 2 and "--since: expected a date" in bad.output
    missing = CliRunner().invoke(app, ["report", "--db", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 2 and "no store at" in missing.output


def test_money_leads_tokens_split_and_costs_say_where_they_came_from(corpus: Path, tmp_path: Path) -> None:
    render(corpus, tmp_path / "r", replay=sample_replay())
    html = (tmp_path / "r" / "index.html").read_text()
    labels = re.findall(r'<div class="kpi-label">([^<]+)</div>', html)
    assert labels[0] == "Cost"
    # Wasted money is the stuck loops' (not every repeat), and the repeats that made progress are their own figure.
    assert "wasted in stuck loops" in html and "repeated with progress" in html
    for part in ("input", "output", "cache read", "cache write"):
        assert f"<span>{part} <b>" in html
    assert 'href="sessions.html"' in html
    page = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    assert "<dt>cost from</dt><dd>recorded in the transcript</dd>" in page
    assert "<span>cache read <b>" in page


def test_all_sessions_page_carries_every_session(corpus: Path, tmp_path: Path) -> None:
    import json

    render(corpus, tmp_path / "r")
    html = (tmp_path / "r" / "sessions.html").read_text()
    blob = re.search(r'<script type="application/json" id="all-sessions-data">(.*?)</script>', html, re.S)
    assert blob
    data = json.loads(blob.group(1))
    cols = data["columns"]
    ids = {r[cols.index("id")] for r in data["rows"]}
    assert len(ids) == 5 and {"sess-loop", "sess-window", "../../x", "sess-broken"} <= ids
    # Every session links to its page, with loops or without.
    linked = {r[cols.index("id")]: r[cols.index("href")] for r in data["rows"] if r[cols.index("href")]}
    assert set(linked) == ids and all((tmp_path / "r" / href).is_file() for href in linked.values())
    # The only scripts are the report's own (the data block is never executed).
    scripts = [m for m in re.findall(r"<script[^>]*>", html) if "application/json" not in m]
    assert scripts and all(re.fullmatch(r'<script src="assets/loopscope-[0-9a-f]+\.js" defer>', m) for m in scripts)
    assert "plotly" not in html


def test_a_session_without_usage_shows_estimates_labelled(tmp_path: Path) -> None:
    """The OpenAI-messages sample records no usage: its page says so and shows estimated tokens and cost, labelled,
    instead of an empty chart and $0.00."""
    from conftest import SAMPLE_DATA
    from helpers import ingest_paths

    from analyzer.scan.run import scan

    db = tmp_path / "s.duckdb"
    ingest_paths(db, SAMPLE_DATA / "openai_messages")
    scan(db)
    render(db, tmp_path / "r")
    page = (tmp_path / "r" / "sessions" / f"{session_slug('support-7f3a91')}.html").read_text()
    tokens = re.search(r"<dt>tokens</dt><dd>([^<]*)</dd>", page)
    cost = re.search(r"<dt>cost</dt><dd>([^<]*)</dd>", page)
    assert tokens and tokens.group(1).startswith("none recorded; ~") and "estimated" in tokens.group(1)
    assert cost and "$0.00" not in cost.group(1) and ("estimated" in cost.group(1) or "unknown" in cost.group(1))
    assert "records no token usage" in page  # no empty cumulative-token chart


def test_pages_read_several_batches_at_a_time_are_the_pages_read_one_batch_at_a_time(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report reads ``READ_GROUP`` batches of sessions from the store in one go and splits the frames by session:
    every page (folder and single file) is the page a read of its own batch gives, and the store is read once a
    group, not once a batch."""
    from reports import render as render_mod

    reads: list[list[str]] = []
    real = ReportData.session_batch

    def counted(self: ReportData, ids: list[str]) -> dict:
        reads.append(list(ids))
        return real(self, ids)

    monkeypatch.setattr(ReportData, "session_batch", counted)
    pages = {}
    for group in (1, 2):
        monkeypatch.setattr(render_mod, "READ_GROUP", group)
        reads.clear()
        render(corpus, tmp_path / f"g{group}", batch=1, workers=1)
        render(corpus, tmp_path / f"g{group}.html", batch=1, single_file=True)
        assert [len(r) for r in reads] == ([1, 1, 1, 1, 1] if group == 1 else [2, 2, 1]) * 2
        pages[group] = {
            p.relative_to(tmp_path / f"g{group}"): p.read_bytes() for p in (tmp_path / f"g{group}").rglob("*.html")
        }
        pages[group]["single"] = (tmp_path / f"g{group}.html").read_bytes()
    assert sum(1 for p in pages[1] if str(p).startswith("sessions/")) == 5 and pages[1] == pages[2]


def test_a_share_meter_carries_four_decimals_so_equal_figures_write_equal_pages() -> None:
    """The index's meters take their share from sums DuckDB adds up in parallel, whose last digits vary from run to
    run: written to four decimals (a meter shows far less), the same store gives the same page every time."""
    from reports.context import Kpi
    from reports.render import environment

    kpi = environment().get_template("_macros.html").module.kpi  # type: ignore[attr-defined]
    html = lambda share: str(kpi(Kpi("Cost", "$3.00", "$1.00 wasted", share)))  # noqa: E731
    assert 'value="0.3333"' in html(1 / 3)
    assert html(0.33333333333333331) == html(0.33333333333333337)
    assert 'value="0.0000"' in html(None)


def test_the_pages_over_the_scope_are_one_table_and_the_nav_begins_at_home() -> None:
    """The pages over the whole scope are declared once (``site.PAGES``): each has the template its id names, no two
    share an id, the pages other code links to (the home page, all sessions) are rows, and the nav begins with the
    home page, which the brand and a session page's crumbs link to (``PageMeta.home``)."""
    from reports.paths import ALL_SESSIONS, HOME
    from reports.render import HERE
    from reports.site import NAV, PAGES

    ids = [p.id for p in PAGES]
    assert len(set(ids)) == len(ids) and {HOME, ALL_SESSIONS} <= set(ids)
    assert all((HERE / "templates" / p.template).is_file() for p in PAGES)
    assert NAV[0].id == HOME and len({p.nav for p in NAV}) == len(NAV)


def test_a_session_without_findings_has_a_page_with_its_whole_conversation(corpus: Path, tmp_path: Path) -> None:
    """Every session has a page once the store is scanned: one without findings shows its whole conversation (the
    prompt, each call with its result), each call carrying its seq for a label, and says no episode was found."""
    from analyzer.evaluate.labels import session_key

    render(corpus, tmp_path / "r", replay=sample_replay())
    html = (tmp_path / "r" / "sessions" / f"{session_slug('sess-clean')}.html").read_text()
    assert "None found in this session." in html and "<h2>Conversation</h2>" in html
    conv = html[html.index("<h2>Conversation</h2>") :]
    assert '<li class="u">hello</li>' in conv
    assert '<li id="call-1" data-seq="0"><a href="#call-1">#1</a> <code>read</code> <b>README.md</b>' in conv
    assert "<pre># readme</pre>" in conv
    # The timeline links the call to its row, and the page names the session for labels by key, the store by id.
    assert '"linked":[1]' in html.replace(" ", "") or 'href="#call-1"' in html
    assert f'data-session-key="{session_key("sess-clean")}" data-calls="1"' in html
    con = connection.connect(corpus, read_only=True)
    try:
        store_id = connection.store_id(con)
    finally:
        con.close()
    assert f'data-store="{store_id}"' in html
    # A page with findings shows its episodes' conversations, not the whole one.
    loop = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    assert "<h2>Conversation</h2>" not in loop and 'class="conv whole"' not in loop


def test_each_finding_card_names_its_finding_for_the_label_controls(corpus: Path, tmp_path: Path) -> None:
    """Each episode card names its finding and the finding's calls, from which the report's script makes the label
    controls (loop, not a loop, unsure, a note; tests/test_report_labels_browser.py clicks them); hidden where the
    script does not run. Every call row carries its seq, which a label of a span names."""
    render(corpus, tmp_path / "r")
    html = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    boxes = re.findall(
        r'<div class="label-box finding-label" data-finding="([^"]*)" data-first-seq="([^"]*)" '
        r'data-last-seq="([^"]*)" hidden></div>',
        html,
    )
    assert sorted(boxes) == [("f0", "0", "5"), ("f1", "6", "9"), ("f2", "12", "17"), ("f3", "18", "20")]
    assert re.search(
        r'<div class="card session-labels" data-session-key="k_[0-9a-f]{16}" data-calls="21" '
        r"data-episodes hidden></div>",
        html,
    )
    rows = re.findall(r'<li class="conv-call[^"]*" id="call-(\d+)" data-seq="(\d+)"', html)
    assert rows and all(int(number) == int(seq) + 1 for number, seq in rows)


def test_a_session_id_holding_a_secret_reaches_labels_only_as_its_key(tmp_path: Path) -> None:
    """A session whose id holds a token: its page shows the id redacted and names it, for the labels exported from
    it, by its key; the token is nowhere in the report."""
    from helpers import ingest_paths
    from test_report_corpus import PiSession

    from analyzer.evaluate.labels import session_key

    sid = f"run-{SECRETS['github']}"
    s = PiSession(sid, "/srv/app")
    s.user("look")
    s.call("read", {"path": "a.txt"}, "a")
    s.write(tmp_path / "t")
    db = tmp_path / "s.duckdb"
    ingest_paths(db, tmp_path / "t")
    add_findings(db, [])
    render(db, tmp_path / "r")
    assert SECRETS["github"] not in all_text(tmp_path / "r")
    pages = list((tmp_path / "r" / "sessions").glob("*.html"))
    assert len(pages) == 1 and f'data-session-key="{session_key(sid)}"' in pages[0].read_text()


def test_a_long_session_without_findings_shows_its_first_and_last_calls(tmp_path: Path) -> None:
    """A loop-free page stays light: past ``SESSION_CALLS`` calls it shows the first and the last ones, says how many
    it left out, and a label may still name those by number."""
    from helpers import ingest_paths
    from test_report_corpus import PiSession

    from reports.episodes import SESSION_CALLS, SESSION_HEAD

    n = SESSION_CALLS + 100
    s = PiSession("long-clean", "/srv/app")
    s.user("read them all")
    for i in range(n):
        s.call("read", {"path": f"src/m{i}.py"}, f"module {i}\n" * 20, text=f"Reading module {i}.")
    s.write(tmp_path / "t")
    db = tmp_path / "s.duckdb"
    ingest_paths(db, tmp_path / "t")
    add_findings(db, [])
    render(db, tmp_path / "r")
    html = (tmp_path / "r" / "sessions" / f"{session_slug('long-clean')}.html").read_text()
    conv = html[html.index('<ol class="conv whole">') :]
    seqs = [int(x) for x in re.findall(r'data-seq="(\d+)"', conv)]
    assert seqs == list(range(SESSION_HEAD)) + list(range(SESSION_HEAD + 100, n))
    assert "… 100 more calls of this session, not shown …" in conv and "100 calls in the middle are not shown" in conv
    # The messages among the calls left out are left out with them.
    assert "Reading module 399." in conv and "Reading module 450." not in conv and "Reading module 500." in conv
    assert f'data-calls="{n}"' in html


def test_a_waiting_finding_shows_under_its_kind_and_stays_out_of_the_loop_totals(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    db.write_bytes(corpus.read_bytes())
    add_findings(
        db,
        [
            {"session_id": "sess-loop", "kind": "waiting", "seqs": [0, 1, 2], "stuck": False},
            {"session_id": "sess-window", "kind": "streak", "seqs": [0, 1, 2]},
        ],
    )
    con = connection.connect(db, read_only=True)
    try:
        data = ReportData(con, SessionFilter())
        t = data.totals()
    finally:
        con.close()
    assert t.loop_sessions == 1  # the wait is no loop: only the streak's session has one
    render(db, tmp_path / "r")
    page = (tmp_path / "r" / "sessions" / f"{session_slug('sess-loop')}.html").read_text()
    assert "Waiting on a running process" in page and "<script>waiting" not in page
    assert '<span class="badge progress">not a loop: waiting</span>' in page  # not "made progress": it waited
    listing = all_text(tmp_path / "r")
    assert "Waiting on a running process" in listing
