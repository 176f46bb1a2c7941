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
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import polars as pl
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from analyzer import __version__
from analyzer.errors import LoopscopeError

from analyzer.results import Calibration, Replay
from reports import fmt, pages
from reports.context import Link, PageMeta, ReportSource
from reports.paths import Links, inside, section_id, session_page_path
from reports.redact import MARKER, identity, redact as redact_text

HERE = Path(__file__).resolve().parent
MANIFEST = ".loopscope-report.json"
BATCH = 200

Progress = Callable[[int, int], None]


class ReportError(LoopscopeError):
    """The report cannot be written where asked."""


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
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.policies["json.dumps_function"] = _dumps
    env.policies["json.dumps_kwargs"] = {}
    env.filters.update(num=fmt.num, usd=fmt.usd, pct=fmt.pct, when=fmt.when, compact=fmt.compact,
                       redmarks=redaction_marks)
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
    def load(cls) -> "Assets":
        version, path = _plotly_js()
        return cls(_static("loopscope.css"), _static("loopscope.js"), version, path)

    @property
    def names(self) -> dict[str, str]:
        short = lambda b: hashlib.blake2b(b, digest_size=5).hexdigest()  # noqa: E731
        return {"css": f"assets/loopscope-{short(self.css)}.css", "js": f"assets/loopscope-{short(self.js)}.js",
                "plotly": f"assets/plotly-{self.plotly_version}.min.js"}

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
        return {"css": Markup(self.css.decode()), "js": Markup(self.js.decode()),
                "plotly": Markup(plotly.decode()), "csp": Markup(self.csp(single=True, plotly=plotly))}

    def csp(self, single: bool, plotly: bytes | None = None) -> str:
        scripts = f"{_sha(plotly or self.plotly_path.read_bytes())} {_sha(self.js)}" if single else "'self'"
        images = "data:" if single else "'self' data:"
        return (f"default-src 'none'; script-src {scripts}; style-src 'self' 'unsafe-inline'; img-src {images}; "
                f"font-src 'self'; connect-src 'none'; media-src 'none'; object-src 'none'; base-uri 'none'; "
                f"form-action 'none'")


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
    has_findings: bool = False


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


def _pages(data: ReportSource, replay: Replay | None,
           calibration: Calibration | None, single: bool, redact: bool, generated_at: datetime,
           batch: int, state: "ReportResult", progress: Progress | None) -> Iterator[Page]:
    """Every page of the report, lazily: session pages are read from the source a batch at a time, so memory stays
    bounded however many sessions there are."""
    redactor = redact_text if redact else identity
    scope, flt = data.scope, data.filter
    totals = data.totals()
    links = Links(single)
    state.has_findings = scope.has_findings

    def meta(title: str, page_id: str, depth: int, current: str = "", charts: bool = True) -> PageMeta:
        lk = links.at(depth)
        return PageMeta(title=title, generated_at=generated_at, version=__version__,
                        scope=_scope_text(flt, scope.sessions), redacted=redact,
                        nav=(Link("Overview", lk.index), Link("Sessions", lk.all_sessions),
                             Link("Calibration", lk.calibration)), page_id=page_id,
                        current=current, charts=charts)

    fdf = sessions = None
    if scope.has_findings:
        fdf = data.findings()
        sessions = data.loop_sessions()
    n_err, errors = data.ingest_errors(pages.LISTED_ERRORS)

    in_scope: pl.DataFrame | None = None
    if replay is not None:
        ids = data.session_ids()
        in_scope = replay.frame.join(ids, on="session_id", how="semi")

    index = pages.index_page(meta("loopscope report", "index", 0, "Overview"), totals, scope.has_findings, fdf,
                             sessions, n_err, errors, calibration, links, redactor,
                             data.skipped_files(pages.LISTED_ERRORS))
    yield Page("index.html", "index.html", index)
    cal = pages.calibration_page(meta("Calibration", "calibration", 0, "Calibration"), calibration, in_scope)
    yield Page("calibration.html", "calibration.html", cal)
    has_page = set(sessions["session_id"].to_list()) if sessions is not None else set()
    every = pages.all_sessions_page(meta("All sessions", "sessions", 0, "Sessions", charts=False),
                                    data.all_sessions(), has_page, links, redactor)
    yield Page("sessions.html", "sessions.html", every)

    if sessions is None:
        return
    ids = sessions["session_id"].to_list()
    for start in range(0, len(ids), batch):
        chunk = ids[start:start + batch]
        frames = data.session_batch(chunk)
        parts = {k: _by_session(v) for k, v in frames.items()}
        rp = _by_session(in_scope.filter(pl.col("session_id").is_in(chunk))) if in_scope is not None else {}
        for sid in chunk:
            per = {k: v.get(sid, frames[k].head(0)) for k, v in parts.items()}
            if per["sessions"].height == 0:
                continue
            replay_rows = rp.get(sid, in_scope.head(0)) if in_scope is not None else None
            ctx = pages.session_page(meta(f"Session {redactor(sid)}", section_id(sid), 1), per, replay_rows,
                                     redactor, call_prefix=f"{section_id(sid)}-" if single else "")
            state.session_pages += 1
            yield Page(session_page_path(sid), "session.html", ctx)
            if progress is not None:
                progress(state.session_pages, len(ids))


def _by_session(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    if df.height == 0:
        return {}
    return {key[0]: part for key, part in df.partition_by("session_id", as_dict=True, maintain_order=True).items()}


def _render(page: Page, layout: str, assets: dict[str, Any], csp: str) -> str:
    tpl = environment().get_template(page.template)
    return tpl.render(page=page.context, layout=layout, assets=assets, csp=csp)


def _clean_stale(out: Path, written: set[str]) -> None:
    """Remove what an earlier report in ``out`` wrote and this one did not (pages of sessions now filtered out,
    old asset versions); only files named in the earlier manifest are touched."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        return
    try:
        old = orjson.loads(manifest.read_bytes()).get("files", [])
    except (orjson.JSONDecodeError, AttributeError):
        return
    for rel in old:
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
    calibration: Calibration | None = None,
    single_file: bool = False,
    redact: bool = True,
    generated_at: datetime | None = None,
    batch: int = BATCH,
    progress: Progress | None = None,
) -> ReportResult:
    """Write the report of what ``data`` holds (``analyzer.reporting.ReportData``: the store's sessions that its
    filter selects).

    ``out`` is a folder (``index.html``, ``calibration.html``, ``sessions/*.html``, ``assets/``); with
    ``single_file`` it is the ``.html`` file to write, or a folder that gets one ``index.html``. ``replay`` and
    ``calibration`` are optional: without them the pages say those sections were not computed. Findings come from
    the source's findings; without them the index says to run ``loopscope scan``. ``progress(done, total)``
    is called after each session page.
    """
    t0 = time.perf_counter()
    generated_at = generated_at or datetime.now(timezone.utc).replace(microsecond=0)
    assets = Assets.load()
    result = ReportResult(index=out)
    pages_iter = _pages(data, replay, calibration, single_file, redact, generated_at, batch, result, progress)
    written: list[Path] = []
    if single_file:
        target = out if out.suffix.lower() in (".html", ".htm") else out / "index.html"
        folder = target.parent
        _mkdir(folder)
        inline = assets.inline()
        tpl = environment().get_template("single.html")
        sections = (Markup(_render(p, "_section.html", {}, "")) for p in pages_iter)
        with open(target, "w", encoding="utf-8") as fh:
            for chunk in tpl.generate(sections=sections, assets=inline, csp=inline["csp"],
                                      generated_at=generated_at, version=__version__):
                fh.write(chunk)
        written.append(target)
        index = target
        if target.name == "index.html":
            _finish(folder, [target.name])
    else:
        _mkdir(out)
        names = assets.names
        csp = assets.csp(single=False)
        rels = assets.write(out)
        (out / "sessions").mkdir(exist_ok=True)
        for page in pages_iter:
            depth = page.path.count("/")
            hrefs = {k: "../" * depth + v for k, v in names.items()}
            path = inside(out, page.path)
            path.write_text(_render(page, "base.html", hrefs, csp), encoding="utf-8")
            rels.append(page.path)
        written = [out / r for r in rels]
        index = out / "index.html"
        _finish(out, rels)
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


def _finish(out: Path, rels: list[str]) -> None:
    _clean_stale(out, set(rels))
    (out / MANIFEST).write_bytes(orjson.dumps({"generator": f"loopscope {__version__}", "files": sorted(rels)},
                                              option=orjson.OPT_INDENT_2))
