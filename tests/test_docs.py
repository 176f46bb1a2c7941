"""Every document the code, the tests and the READMEs cite is in the repository, and so is every section they name.

A fresh clone is all a reader has: a comment sending them to ``DETECTORS.md 2.3`` (a file that lived beside the
project) is a dead end. Citations are read where people cite: Markdown files whole, Python comments and docstrings,
the report's templates. A cited ``*.md`` must exist (relative to the citing file, to the repository root, or, for a
bare name such as ``SOURCES.md``, somewhere in the repository); ``file.md#anchor`` must name a heading of that file,
and ``file.md "Title"`` one of its headings' titles; sections are cited by heading, never by number. Upstream files
cited with their commit (``dev-docs/dag.md@2dc48f5``, ``owner/repo:path.md``) are someone else's and are not checked.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Where citations live. Transcript fixtures, real-data transcripts and report snapshots are data, not prose.
PROSE_GLOBS = (
    "README.md",
    "docs/*.md",
    "benchmarks/*.md",
    "sample_data/*.md",
    "tests/*.md",
    "tests/fixtures/*.md",
    "tests/realdata/*.md",
    "tests/realdata/sources/*.md",
    "reports/templates/**/*.html",
    "reports/static/*.js",
    "pyproject.toml",
)
CODE_GLOBS = (
    "analyzer/**/*.py",
    "reports/**/*.py",
    "tests/*.py",
    "tests/realdata/tools/*.py",
    "sample_data/*.py",
    "benchmarks/*.py",
)
# Files of other projects named as such (a licence at an upstream commit, the instructions file an agent injects).
UPSTREAM_NAMES = frozenset({"LICENSE.md", "AGENTS.md", "CLAUDE.md", "GEMINI.md"})
# Provenance records say where data came from, and what it was checked against, outside the repository (the shared
# folder beside the project, ``../shared/…``, and its list of held-out repositories): those names stay as written.
PROVENANCE_GLOBS = ("tests/fixtures/SOURCES.md", "tests/realdata/sources/*.md")
PROVENANCE_NAMES = frozenset({"HELDOUT-EXCLUDE.md"})

_MD = re.compile(r"(?<![\w/.:-])((?:[\w.<>*-]+/)*[\w<>*-][\w.<>*-]*\.md)(#[\w-]+)?(?![\w@])")
_TITLE = re.compile(r"`?\)?,?[ \t]*\(?\"([^\"\n]+)\"")
_NUMBERED = re.compile(r"`?,?\s*(?:section|sections|§)?\s*\d+(?:\.\d+)*\b")


def _prose_files() -> list[Path]:
    return sorted({p for g in PROSE_GLOBS for p in ROOT.glob(g) if p.is_file()})


def _code_files() -> list[Path]:
    """Modules and tests; not this file, whose docstrings show the citations it rejects."""
    here = Path(__file__).resolve()
    return sorted({p for g in CODE_GLOBS for p in ROOT.glob(g) if p.is_file() and p.resolve() != here})


def _python_prose(path: Path) -> Iterator[str]:
    """The comments and docstrings of a module: where a module cites."""
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc


def _texts() -> Iterator[tuple[Path, str]]:
    for p in _prose_files():
        yield p, p.read_text(encoding="utf-8")
    for p in _code_files():
        for text in _python_prose(p):
            yield p, text


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def headings(path: Path) -> tuple[str, ...]:
    """The titles of a Markdown file's headings (fenced code skipped)."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*(`{3,}|~{3,})[^`]*$", line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            out.append(m.group(1))
    return tuple(out)


@cache
def _basenames() -> frozenset[str]:
    skip = {".git", ".venv", "node_modules"}
    return frozenset(p.name for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts))


def _resolve(cited: str, citing: Path) -> list[Path]:
    """The files of the repository a citation names, relative to the citing file or the root (globs allowed:
    ``sources/*.md``), or anywhere for a bare name (``SOURCES.md``)."""
    for base in (citing.parent, ROOT):
        found = (
            [p for p in base.glob(cited) if p.is_file()]
            if "*" in cited
            else ([base / cited] if (base / cited).is_file() else [])
        )
        found = [p for p in found if p.resolve().is_relative_to(ROOT)]
        if found:
            return found
    return [] if "/" in cited or cited not in _basenames() else [Path(cited)]


def _is_provenance(path: Path) -> bool:
    return any(path.match(str(ROOT / g)) for g in PROVENANCE_GLOBS)


def problems(path: Path, text: str) -> Iterator[str]:
    """What is wrong with the documents and sections ``text`` (from ``path``) cites."""
    for m in _MD.finditer(text):
        cited, anchor = m.group(1), m.group(2)
        after = text[m.end() : m.end() + 60].split("\n")[0]
        name = cited.rsplit("/", 1)[-1]
        if name in UPSTREAM_NAMES or "<" in cited:
            continue
        if _NUMBERED.match(after) and not after.lstrip("`").startswith(")"):
            yield f"`{cited}{after}` cites a numbered section: cite a heading (`file.md#anchor`)"
            continue
        files = _resolve(cited, path)
        if not files:
            if _is_provenance(path) and (cited.startswith(("../", "/")) or name in PROVENANCE_NAMES):
                continue  # a record of where data came from, outside the repository by design
            if "/" not in cited and name.islower() and not anchor:
                continue  # a file of someone's session (``spec.md``), not a document cited
            yield f"`{cited}` names a document that is not in the repository"
            continue
        if len(files) != 1 or not files[0].is_absolute():
            continue  # a glob or a bare name met elsewhere: no one file to look the section up in
        target, titles = files[0], headings(files[0])
        if anchor and anchor[1:] not in {slug(t) for t in titles}:
            yield f"`{cited}{anchor}`: no such heading in {target.relative_to(ROOT)}"
        title = _TITLE.match(after)
        if title and title.group(1).strip().lower() not in {t.strip().lower() for t in titles}:
            yield f'`{cited}` "{title.group(1)}": no such heading in {target.relative_to(ROOT)}'


def test_every_cited_document_and_section_exists() -> None:
    bad = [f"{path.relative_to(ROOT)}: {p}" for path, text in _texts() for p in problems(path, text)]
    assert not bad, "citations of documents or sections that do not exist:\n" + "\n".join(bad)


def test_anchors_inside_the_docs_resolve() -> None:
    """``[text](#anchor)`` and ``[text](other.md#anchor)`` links between the docs land on a heading."""
    bad = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        for m in re.finditer(r"\]\(([\w./-]*?)(#[\w-]+)\)", path.read_text(encoding="utf-8")):
            target = (path.parent / m.group(1)) if m.group(1) else path
            if not target.is_file():
                bad.append(f"{path.name}: link to {m.group(1)} (no such file)")
            elif m.group(2)[1:] not in {slug(t) for t in headings(target)}:
                bad.append(f"{path.name}: link to {m.group(1)}{m.group(2)} (no such heading)")
    assert not bad, "\n".join(bad)


def test_the_checker_catches_what_it_is_for() -> None:
    """The rules above, on made-up text: a document outside the repository, a numbered section, a missing anchor and
    a missing title fail; an existing heading, an upstream file and a file of another project pass."""
    citing = ROOT / "analyzer" / "x.py"
    cases = {
        "see DETECTORS.md 2.3": "numbered section",
        "see FORMATS.md, section 5": "numbered section",
        "see `docs/detectors.md` 2.3": "numbered section",
        "see NOWHERE.md for more": "not in the repository",
        "see ../shared/FORMATS.md": "not in the repository",
        "see docs/formats.md#no-such-format": "no such heading",
        'see `docs/detectors.md` "No such title"': "no such heading",
        "see docs/formats.md#opencode": None,
        'see `docs/detectors.md` "Vocabulary"': None,
        "links [a](detectors.md#vocabulary) and `tests/fixtures/SOURCES.md`": None,
        "upstream `dev-docs/dag.md@2dc48f5`": None,
        "upstream `owner/repo:docs/x.md` too": None,
        "`LICENSE.md` at that commit": None,
        "the agent edited spec.md twice": None,
    }
    for text, problem in cases.items():
        found = list(problems(citing if "](" not in text else ROOT / "docs" / "formats.md", text))
        if problem is None:
            assert not found, (text, found)
        else:
            assert len(found) == 1 and problem in found[0], (text, found)
    assert list(problems(ROOT / "tests/realdata/sources/x.md", "checked against `../shared/HELDOUT-EXCLUDE.md`")) == []
    assert slug("Pitfalls, ranked") == "pitfalls-ranked" and slug("The `kind` column") == "the-kind-column"
