"""Write the report: one Jinja environment (autoescape on), versioned static assets, one file per page — or, with
``single_file``, one self-contained document whose pages are sections reached by fragment links.

Safety model, in one place:
- every value reaches HTML through Jinja's autoescape; nothing from a transcript is marked safe;
- data reaches JavaScript only as ``tojson`` inside ``<script type="application/json">`` blocks, which are never
  executed; static/loopscope.js reads them and calls ``Plotly.newPlot``;
- a Content-Security-Policy meta tag allows scripts only from the report's own files (or, in a single file, only
  the two inline scripts whose hashes it lists), no network connections, no plugins, no forms; styles may be inline
  because plotly.js injects its own stylesheet at run time;
- transcript text is redacted (reports/redact.py) unless ``redact=False``; session ids become file names only
  through ``paths.session_slug``.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from analyzer import __version__
from analyzer.errors import LoopscopeError, ReportError
from analyzer.machine import cores, run_chunks
from analyzer.results import Calibration, Replay
from reports import fmt, pages
from reports.context import Link, PageMeta, ReportSource
from reports.paths import HOME, Links, inside, page_path, section_id, session_page_path
from reports.redact import MARKER, identity
from reports.redact import redact as redact_text
from reports.site import NAV, ReportPage, nav_of, pages_of

if TYPE_CHECKING:
    from analyzer.evaluate.evaluation import Evaluation

HERE = Path(__file__).resolve().parent
MANIFEST = ".loopscope-report.json"
BATCH = 50
"""Sessions per job of a worker process (and per section of a single-file report)."""
READ_GROUP = 4
"""Batches read from the source in one go, then split by session: each of the source's queries costs about the same
for 50 sessions as for 200 (it scans the store's session column whatever the batch), so reading four batches at once
cut the page reads of the 2,400-session benchmark from 4.4 to 1.9 s; the extra frames held are those of 150 sessions'
pages, clipped text only."""

Progress = Callable[[int, int], None]


# ---- environment and assets ----------------------------------------------------------------------------------------


def _dumps(obj: Any, **_: Any) -> str:
    # orjson writes NaN as null (JSON.parse rejects NaN) and is fast on the large figure dicts.
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()


def redaction_marks(text: str | None) -> Markup:
    """Escape ``text``, then highlight the redaction markers in it. Safe because escaping comes first and a marker
    holds no character HTML treats specially."""
    escaped = str(escape(text or ""))
    return Markup(MARKER.sub(lambda m: f'<mark class="redacted">{m.group(0)}</mark>', escaped))


@lru_cache(maxsize=1)
def environment() -> Environment:
    # auto_reload off: the templates do not change while loopscope runs, and checking costs a stat of each template
    # every time a page asks for it (five a session page).
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.policies["json.dumps_function"] = _dumps
    env.policies["json.dumps_kwargs"] = {}
    env.filters.update(
        num=fmt.num, usd=fmt.usd, pct=fmt.pct, when=fmt.when, compact=fmt.compact, redmarks=redaction_marks
    )
    env.tests["link"] = lambda v: isinstance(v, Link)
    return env


def _static(name: str) -> bytes:
    return (HERE / "static" / name).read_bytes()


def _plotly_js() -> tuple[str, Path]:
    from plotly.offline import get_plotlyjs_version

    path = Path(str(resources.files("plotly").joinpath("package_data", "plotly.min.js")))
    if not path.is_file():
        raise ReportError(f"plotly.js not found in the installed plotly package ({path})")
    return get_plotlyjs_version(), path


def _sha(data: bytes) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode() + "'"


@dataclass(frozen=True)
class Assets:
    """The static files every page uses, named by version or content hash so a browser cache never mixes two
    reports' copies."""

    css: bytes
    js: bytes
    plotly_version: str
    plotly_path: Path

    @classmethod
    def load(cls) -> Assets:
        version, path = _plotly_js()
        return cls(_static("loopscope.css"), _static("loopscope.js"), version, path)

    @property
    def names(self) -> dict[str, str]:
        short = lambda b: hashlib.blake2b(b, digest_size=5).hexdigest()  # noqa: E731
        return {
            "css": f"assets/loopscope-{short(self.css)}.css",
            "js": f"assets/loopscope-{short(self.js)}.js",
            "plotly": f"assets/plotly-{self.plotly_version}.min.js",
        }

    def write(self, out: Path) -> list[str]:
        names = self.names
        (out / "assets").mkdir(parents=True, exist_ok=True)
        (out / names["css"]).write_bytes(self.css)
        (out / names["js"]).write_bytes(self.js)
        target = out / names["plotly"]
        if not target.exists() or target.stat().st_size != self.plotly_path.stat().st_size:
            shutil.copyfile(self.plotly_path, target)
        return list(names.values())

    def inline(self) -> dict[str, Markup]:
        """The assets' text for a single-file report. Our own files and the plotly package are trusted, but a
        ``</script`` inside them would end the inline element early, so that is refused rather than escaped."""
        plotly = self.plotly_path.read_bytes()
        for name, blob in (("plotly.js", plotly), ("loopscope.js", self.js), ("loopscope.css", self.css)):
            if b"</script" in blob.lower() or b"</style" in blob.lower():
                raise ReportError(f"{name} cannot be inlined: it contains a closing tag")
        return {
            "css": Markup(self.css.decode()),
            "js": Markup(self.js.decode()),
            "plotly": Markup(plotly.decode()),
            "csp": Markup(self.csp(single=True, plotly=plotly)),
        }

    def csp(self, single: bool, plotly: bytes | None = None) -> str:
        scripts = f"{_sha(plotly or self.plotly_path.read_bytes())} {_sha(self.js)}" if single else "'self'"
        images = "data:" if single else "'self' data:"
        return (
            f"default-src 'none'; script-src {scripts}; style-src 'self' 'unsafe-inline'; img-src {images}; "
            f"font-src 'self'; connect-src 'none'; media-src 'none'; object-src 'none'; base-uri 'none'; "
            f"form-action 'none'"
        )


# ---- pages ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One page to write: its path in a multi-file report, its template and its context."""

    path: str
    template: str
    context: Any


@dataclass
class ReportResult:
    """What ``render_report`` wrote: the file to open, how many files and bytes, and how long it took."""

    index: Path
    files: list[Path] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0
    session_pages: int = 0
    session_pages_written: int = 0  # the rest were unchanged and kept
    has_findings: bool = False
    kept: bool = False  # nothing was written: the report already there was made from the same store state
    generated_at: datetime | None = None


def _scope_text(flt: Any, n: int) -> str:
    parts = []
    if flt.since:
        parts.append(f"from {flt.since}")
    if flt.until:
        parts.append(f"until {flt.until}")
    if flt.agent:
        parts.append(f"agent {flt.agent}")
    if flt.project:
        parts.append(f"project contains “{flt.project}”")
    what = f"{n:,} session{'s' if n != 1 else ''}"
    return f"{what}, {', '.join(parts)}" if parts else f"{what}, all in the store"


def _scope_meta(
    generated_at: datetime,
    redact: bool,
    links: Links,
    scope: str,
    store_id: str = "",
    nav: tuple[ReportPage, ...] = NAV,
) -> Callable[..., PageMeta]:
    """The ``PageMeta`` factory of one report: every page shares the time, the redaction flag, the nav and the
    store's id (labels made on any page are kept under it)."""

    def meta(
        title: str, page_id: str, depth: int, current: str = "", charts: bool = True, scope_text: str = scope
    ) -> PageMeta:
        lk = links.at(depth)
        return PageMeta(
            title=title,
            generated_at=generated_at,
            version=__version__,
            scope=scope_text,
            redacted=redact,
            nav=tuple(Link(p.nav, lk.page(p.id)) for p in nav),
            page_id=page_id,
            current=current,
            charts=charts,
            store_id=store_id,
        )

    return meta


@dataclass(frozen=True)
class SessionJob:
    """What writing session pages needs besides their own frames; small and picklable, so a worker process gets it
    with each batch. A session page depends on nothing else: no report-wide figure (scope, totals) appears on it,
    which is what lets an unchanged session keep its page."""

    redact: bool
    single: bool
    generated_at: datetime
    out: str = ""  # the report folder (multi-file)
    hrefs: dict[str, str] = field(default_factory=dict)  # asset links from sessions/*.html
    csp: str = ""
    store_id: str = ""  # the store's id, which the labels made on the pages are kept under


def _session_pages(
    job: SessionJob, ids: list[str], frames: dict[str, pl.DataFrame], replay_rows: pl.DataFrame | None
) -> Iterator[Page]:
    """The pages of the sessions ``ids`` from one batch of frames (``ReportSource.session_batch``); ``replay_rows``:
    the batch's guard replay rows, None when replay was not computed."""
    redactor = redact_text if job.redact else identity
    meta = _scope_meta(job.generated_at, job.redact, Links(job.single), "", job.store_id)
    parts = {k: _by_session(v) for k, v in frames.items()}
    rp = _by_session(replay_rows) if replay_rows is not None else {}
    for sid in ids:
        per = {k: v.get(sid, frames[k].head(0)) for k, v in parts.items()}
        if per["sessions"].height == 0:
            continue
        rows = rp.get(sid, replay_rows.head(0)) if replay_rows is not None else None
        ctx = pages.session_page(
            meta(f"Session {redactor(sid)}", section_id(sid), 1),
            per,
            rows,
            redactor,
            call_prefix=f"{section_id(sid)}-" if job.single else "",
        )
        yield Page(session_page_path(sid), "session.html", ctx)


def write_session_batch(
    job: SessionJob,
    ids: list[str],
    frames: dict[str, pl.DataFrame],
    replay_rows: pl.DataFrame | None,
    on_page: Callable[[int], None] | None = None,
) -> list[str]:
    """Render and write one batch of session pages (in a worker process, or in this one); the paths written.
    ``on_page(1)`` after each page (in this process only)."""
    written = []
    out = Path(job.out)
    for page in _session_pages(job, ids, frames, replay_rows):
        inside(out, page.path).write_text(_render(page, "base.html", job.hrefs, job.csp), encoding="utf-8")
        written.append(page.path)
        if on_page is not None:
            on_page(1)
    return written


def _warm() -> None:
    """Worker start-up: load the templates once, before the first batch arrives."""
    for name in ("base.html", "session.html"):
        environment().get_template(name)


def _paged_sessions(
    data: ReportSource, replay: Replay | None
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, list[str]]:
    """The sessions with findings (worst first; None before a scan), the replay rows in scope, and the sessions that
    get a page: once the store is scanned, every session in scope, those with findings first (worst first), then
    the others by id. A loop-free session's page shows its whole conversation, where a person can read it and label
    a loop the scan missed."""
    sessions = data.loop_sessions() if data.scope.has_findings else None
    every = data.session_ids()
    in_scope = replay.frame.join(every, on="session_id", how="semi") if replay is not None else None
    if sessions is None:
        return None, in_scope, []
    worst = sessions["session_id"].to_list()
    found = set(worst)
    return sessions, in_scope, worst + sorted(s for s in every["session_id"].to_list() if s not in found)


def _aggregate_pages(
    data: ReportSource,
    sessions: pl.DataFrame | None,
    in_scope: pl.DataFrame | None,
    calibration: Calibration | None,
    single: bool,
    redact: bool,
    generated_at: datetime,
    evaluation: Evaluation | None = None,
) -> Iterator[Page]:
    """The pages over the whole scope (``site.PAGES``; those that need ``evaluation`` only with it), always rebuilt,
    each built when it is asked for; ``sessions`` and ``in_scope`` as ``_paged_sessions`` gives them. Their nav links
    the optional pages this report has; a session page's links the pages every report has (``site.NAV``)."""
    links = Links(single)
    inputs = pages.ReportInputs(
        data, sessions, in_scope, calibration, links, redact_text if redact else identity, evaluation
    )
    shown = _report_pages(evaluation)
    meta = _scope_meta(
        generated_at, redact, links, _scope_text(data.filter, data.scope.sessions), data.store_id(), nav_of(shown)
    )
    for p in shown:
        yield Page(p.path, p.template, p.context(meta(p.title, p.id, 0, p.nav, p.charts), inputs))


def _report_pages(evaluation: Evaluation | None) -> tuple[ReportPage, ...]:
    """The pages over the whole scope this report has."""
    return pages_of({"evaluation"} if evaluation is not None else ())


def _replay_of(in_scope: pl.DataFrame | None, ids: list[str]) -> pl.DataFrame | None:
    return in_scope.filter(pl.col("session_id").is_in(ids)) if in_scope is not None else None


def _by_session(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    if df.height == 0:
        return {}
    return {key[0]: part for key, part in df.partition_by("session_id", as_dict=True, maintain_order=True).items()}


def _render(page: Page, layout: str, assets: dict[str, Any], csp: str) -> str:
    tpl = environment().get_template(page.template)
    return tpl.render(page=page.context, layout=layout, assets=assets, csp=csp)


# ---- incremental rebuilds ------------------------------------------------------------------------------------------


def _code_digest() -> str:
    """What a page's look depends on besides its data: this version of loopscope, the templates and the code that
    shapes pages (a development checkout changes these without a new version number), polars (replay digests)."""
    h = hashlib.blake2b(f"{__version__} {pl.__version__}".encode(), digest_size=10)
    root = HERE.parent
    files = (
        sorted(HERE.glob("*.py")) + sorted((HERE / "templates").glob("*.html")) + [root / "analyzer" / "calltext.py"]
    )
    for f in files:
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _folder_job(out: Path, assets: Assets, redact: bool, generated_at: datetime, store_id: str = "") -> SessionJob:
    """What a folder report's session pages share: where they go, the options, the assets' links and policy, the
    store's id."""
    return SessionJob(
        redact,
        False,
        generated_at,
        str(out),
        {k: "../" + v for k, v in assets.names.items()},
        assets.csp(single=False),
        store_id,
    )


def kept_report(out: Path, state: str, redact: bool) -> ReportResult | None:
    """The folder report already in ``out``, when it was written from the same ``state`` of its source (a digest of
    everything its pages read, ``reports.data.store_state``), under the same options and code, and every file
    it lists is still there: writing it again would give the same pages, all but their generation time. None
    otherwise (write it)."""
    old = _read_manifest(out)
    files = old.get("files")
    if not state or old.get("state") != state or not isinstance(files, list) or not files:
        return None
    when = old.get("generated_at")
    try:
        generated_at = datetime.fromisoformat(when) if isinstance(when, str) else None
    except ValueError:
        generated_at = None
    if generated_at is None or old.get("options") != _options_key(
        _folder_job(out, Assets.load(), redact, generated_at)
    ):
        return None
    if not all(isinstance(rel, str) for rel in files):
        return None
    try:
        base = out.resolve()
        paths = [inside(out, rel, base) for rel in files]
    except LoopscopeError:  # a manifest naming a file outside the folder
        return None
    if not all(p.is_file() for p in paths):
        return None
    pages = old.get("pages")
    n_pages = len(pages) if isinstance(pages, dict) else 0
    return ReportResult(
        index=out / page_path(HOME),
        files=paths,
        bytes=sum(p.stat().st_size for p in paths),
        session_pages=n_pages,
        has_findings=bool(old.get("has_findings")),
        kept=True,
        generated_at=generated_at,
    )


def _options_key(job: SessionJob) -> str:
    """Everything every session page shares; when it changes (``--no-redact``, a new version, new assets) every page
    is rebuilt."""
    return orjson.dumps({"code": _code_digest(), "redact": job.redact, "assets": job.hrefs, "csp": job.csp}).decode()


def _replay_digests(in_scope: pl.DataFrame | None) -> dict[str, str]:
    """A digest of each session's guard replay rows: a page shows them, so a change in them rebuilds it."""
    if in_scope is None or in_scope.height == 0:
        return {}
    hashed = in_scope.select("session_id", in_scope.hash_rows().alias("_h"))
    agg = hashed.group_by("session_id").agg(pl.col("_h").sort())
    return {
        sid: hashlib.blake2b(str(hs).encode(), digest_size=8).hexdigest()
        for sid, hs in zip(agg["session_id"].to_list(), agg["_h"].to_list())
    }


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        doc = orjson.loads((out / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _grouped_reads(data: ReportSource, chunks: list[list[str]]) -> Callable[[int], dict[str, pl.DataFrame]]:
    """``frames(i)``: the source's frames of ``chunks[i]`` (``session_batch``), read ``READ_GROUP`` chunks at a time
    and split by session; each chunk's frames are handed out once, in any order."""
    group = READ_GROUP
    ready: dict[int, dict[str, pl.DataFrame]] = {}

    def frames(i: int) -> dict[str, pl.DataFrame]:
        if i not in ready:
            first = i - i % group
            members = range(first, min(first + group, len(chunks)))
            read = data.session_batch([sid for j in members for sid in chunks[j]])
            for j in members:
                ready[j] = {name: f.filter(pl.col("session_id").is_in(chunks[j])) for name, f in read.items()}
        return ready.pop(i)

    return frames


POOL_MIN_PAGES = 64
"""Fewer pages to write than this and they are written in this process: starting workers costs about a second."""


def _write_sessions(
    data: ReportSource,
    job: SessionJob,
    todo: list[str],
    in_scope: pl.DataFrame | None,
    batch: int,
    workers: int | None,
    tick: Callable[[int], None],
) -> list[str]:
    """Write the pages of ``todo`` a batch at a time: the main process reads each batch's frames from the source,
    a pool of worker processes renders and writes them, with a bounded number of batches in flight so memory stays
    flat however many sessions there are (``run_chunks``)."""
    n = workers if workers is not None else (cores() if len(todo) >= POOL_MIN_PAGES else 1)
    # A page depends on its session alone, so which batch renders it changes nothing written; batches of sessions
    # whose rows are neighbours read a few row groups, where batches of the worst sessions read all of them.
    todo = data.read_order(todo)
    chunks = [todo[i : i + batch] for i in range(0, len(todo), batch)]
    frames = _grouped_reads(data, chunks)
    written: list[str] = []

    def args(i: int) -> tuple[Any, ...]:
        return job, chunks[i], frames(i), _replay_of(in_scope, chunks[i])

    def pooled(i: int, paths: list[str]) -> None:
        written.extend(paths)
        tick(len(chunks[i]))

    def here(i: int) -> None:
        written.extend(write_session_batch(*args(i), tick))  # ticks page by page

    # One polars thread per worker: the workers already fill the cores, and a page's frames are small.
    run_chunks(
        write_session_batch,
        args,
        len(chunks),
        n,
        pooled,
        here,
        initializer=_warm,
        worker_env={"POLARS_MAX_THREADS": "1"},
    )
    return written


def _clean_stale(out: Path, old: Any, written: set[str]) -> None:
    """Remove what an earlier report in ``out`` wrote and this one did not (pages of sessions gone or now filtered
    out, old asset versions); only files named in the earlier manifest (``old``) are touched."""
    for rel in old if isinstance(old, list) else []:
        if not isinstance(rel, str) or rel in written:
            continue
        try:
            target = inside(out, rel)
        except LoopscopeError:
            continue
        if target.is_file():
            target.unlink()


def render_report(
    data: ReportSource,
    out: Path,
    *,
    replay: Replay | None = None,
    calibration: Calibration | Callable[[], Calibration | None] | None = None,
    single_file: bool = False,
    redact: bool = True,
    generated_at: datetime | None = None,
    batch: int = BATCH,
    progress: Progress | None = None,
    workers: int | None = None,
    state: str | None = None,
    evaluation: Evaluation | None = None,
) -> ReportResult:
    """Write the report of what ``data`` holds (``reports.data.ReportData``: the store's sessions that its
    filter selects). With ``evaluation`` (``analyze --labels``), it has an Evaluation page too.

    ``out`` is a folder (``index.html`` and the other pages of ``site.PAGES``, ``sessions/*.html``, ``assets/``);
    with ``single_file`` it is the ``.html`` file to write, or a folder that gets one ``index.html``. ``replay`` and
    ``calibration`` are optional: without them the pages say those sections were not computed. ``calibration`` may
    be a function that computes it: a folder report calls it after the session pages are written, so its memory
    (a sweep over every session) never adds to the page workers'. Findings come from
    the source's findings; without them the index says to run ``loopscope scan``. ``progress(done, total)``
    is called as session pages are done.

    A folder report is incremental: its manifest records what each session page was made from (the session's
    scan fingerprint, its guard replay, the options and the code), and a page whose inputs did not change is kept
    as it is. The pages over the whole scope (``site.PAGES``) are always rebuilt. ``state`` (a digest of the
    source's state, ``reports.data.store_state``) is recorded so that ``kept_report`` can tell, next time, that nothing
    changed at all. Session pages are written by
    ``workers`` processes (default: one per core when there are enough pages to write; 1: in this process). They
    are spawned, so a script that calls this needs the usual ``if __name__ == "__main__":`` guard (without it the
    workers fail and the pages are written in this process).
    """
    t0 = time.perf_counter()
    generated_at = generated_at or datetime.now(UTC).replace(microsecond=0)
    assets = Assets.load()
    result = ReportResult(index=out, has_findings=data.scope.has_findings, generated_at=generated_at)
    sessions, in_scope, ids = _paged_sessions(data, replay)
    store_id = data.store_id()

    def aggregate() -> Iterator[Page]:
        cal = calibration() if callable(calibration) else calibration
        return _aggregate_pages(data, sessions, in_scope, cal, single_file, redact, generated_at, evaluation)

    result.session_pages = len(ids)
    written: list[Path] = []
    if single_file:
        target = out if out.suffix.lower() in (".html", ".htm") else out / page_path(HOME)
        folder = target.parent
        _mkdir(folder)
        inline = assets.inline()
        tpl = environment().get_template("single.html")
        job = SessionJob(redact, True, generated_at, store_id=store_id)

        def every_page() -> Iterator[Page]:
            yield from aggregate()
            n = 0
            chunks = [ids[start : start + batch] for start in range(0, len(ids), batch)]
            frames = _grouped_reads(data, chunks)
            for i, chunk in enumerate(chunks):
                for page in _session_pages(job, chunk, frames(i), _replay_of(in_scope, chunk)):
                    yield page
                    n += 1
                    if progress is not None:
                        progress(n, len(ids))

        sections = (Markup(_render(p, "_section.html", {}, "")) for p in every_page())
        with open(target, "w", encoding="utf-8") as fh:
            for chunk in tpl.generate(
                sections=sections, assets=inline, csp=inline["csp"], generated_at=generated_at, version=__version__
            ):
                fh.write(chunk)
        result.session_pages_written = len(ids)
        written.append(target)
        index = target
        if target.name == page_path(HOME):
            _finish(folder, [target.name], {}, "", _read_manifest(folder))
    else:
        _mkdir(out)
        names = assets.names
        csp = assets.csp(single=False)
        rels = assets.write(out) + [p.path for p in _report_pages(evaluation)]
        (out / "sessions").mkdir(exist_ok=True)
        job = _folder_job(out, assets, redact, generated_at, store_id)
        options = _options_key(job)
        old = _read_manifest(out)
        before = old.get("pages") if old.get("options") == options and isinstance(old.get("pages"), dict) else {}
        fingerprints = data.fingerprints()
        digests = _replay_digests(in_scope)
        inputs: dict[str, str] = {}
        todo: list[str] = []
        for sid in ids:
            rel = session_page_path(sid)
            fp = fingerprints.get(sid)
            if fp is not None:  # the store's id too: the page keeps its labels under it
                inputs[rel] = f"{fp}|{digests.get(sid, '')}|{store_id}"
            if fp is None or before.get(rel) != inputs[rel] or not (out / rel).is_file():
                todo.append(sid)
            rels.append(rel)
        done = len(ids) - len(todo)

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, len(ids))

        if progress is not None and done:
            progress(done, len(ids))
        result.session_pages_written = len(_write_sessions(data, job, todo, in_scope, batch, workers, tick))
        # After the session pages: the pool is gone, and what the calibration holds never adds to its workers'.
        for page in aggregate():
            hrefs = {k: "../" * page.path.count("/") + v for k, v in names.items()}
            inside(out, page.path).write_text(_render(page, "base.html", hrefs, csp), encoding="utf-8")
        written = [out / r for r in rels]
        index = out / page_path(HOME)
        _finish(
            out,
            rels,
            inputs,
            options,
            old,
            {"state": state, "generated_at": generated_at.isoformat(), "has_findings": data.scope.has_findings},
        )
    result.index = index
    result.files = written
    result.bytes = sum(p.stat().st_size for p in written if p.is_file())
    result.seconds = time.perf_counter() - t0
    return result


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the report folder {folder}: {exc.strerror}") from None
    if not folder.is_dir():
        raise ReportError(f"{folder} is not a folder")


def _finish(
    out: Path,
    rels: list[str],
    inputs: dict[str, str],
    options: str,
    old: dict[str, Any],
    made: dict[str, Any] | None = None,
) -> None:
    """Remove what the last report wrote and this one did not, then record this one: its files, what each session
    page was made from (``pages``) under the options they share, and (``made``) the source state it was written
    from, when and whether it had findings (``kept_report``)."""
    _clean_stale(out, old.get("files"), set(rels))
    (out / MANIFEST).write_bytes(
        orjson.dumps(
            {
                "generator": f"loopscope {__version__}",
                "files": sorted(rels),
                "options": options,
                "pages": inputs,
                **(made or {}),
            },
            option=orjson.OPT_INDENT_2,
        )
    )
