"""The format contract (``analyzer.ingest.base``): every module of ``analyzer/ingest/formats/`` satisfies it, so a new
format is one module plus its tests, and one that does not is refused by the registry with what it lacks."""

from __future__ import annotations

import pkgutil
import types
from pathlib import Path
from typing import Any

import pytest

from analyzer.ingest import base, formats


@pytest.mark.parametrize("module", formats.modules(), ids=lambda m: m.FORMAT)
def test_every_registered_format_satisfies_the_contract(module: types.ModuleType) -> None:
    assert base.contract_problems(module) == []
    assert isinstance(module, base.Format)
    assert any(isinstance(module, r) for r in base.RECOGNISERS)
    assert issubclass(module.Parser, base.RecordParser)
    if isinstance(module, base.SniffsFiles):
        assert issubclass(module.Parser, base.FileParser)


def test_the_registry_lists_every_module_of_the_folder_once() -> None:
    listed = {m.name for m in pkgutil.iter_modules(formats.__path__)}
    assert {m.__name__.rsplit(".", 1)[-1] for m in formats.modules()} == listed
    names = [m.FORMAT for m in formats.modules()]
    assert len(names) == len(set(names))
    every_alias = [a for m in formats.modules() for a in (m.FORMAT, *m.ALIASES)]
    assert len(every_alias) == len(set(every_alias)), "an --agent name points at two formats"


def _module(**attrs: Any) -> types.ModuleType:
    mod = types.ModuleType("analyzer.ingest.formats.made_up")
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


class _Parser:
    def __init__(self, ctx: base.FileContext) -> None:
        self.ctx = ctx

    def feed(self, record: Any, line: int) -> None:
        pass

    def close(self) -> int:
        return 0


class _FileParser(_Parser):
    def read(self, path: Path) -> None:
        pass


def test_a_module_that_breaks_the_contract_is_told_what_it_lacks() -> None:
    names = {"FORMAT": "made_up", "ALIASES": (), "SNIFF_RANK": 99}
    assert base.contract_problems(_module(FORMAT="made_up")) == ["it lacks ALIASES, SNIFF_RANK, Parser (``Format``)"]
    assert "no way to recognise" in base.contract_problems(_module(**names, Parser=_Parser))[0]
    assert base.contract_problems(_module(**names, Parser=_Parser, sniff=lambda rec: False)) == []
    assert "lacks feed" in base.contract_problems(_module(**names, Parser=object, sniff=lambda rec: False))[0]
    file_format = {**names, "sniff_file": lambda path, head: False}
    assert "lacks read(path)" in base.contract_problems(_module(**file_format, Parser=_Parser))[0]
    assert base.contract_problems(_module(**file_format, Parser=_FileParser)) == []


def test_hooks_are_picked_by_their_protocol() -> None:
    """``with_hook`` selects by protocol what the parse step and discovery call; each formats' optional hooks exist
    exactly where a module defines them."""
    for proto, hook in (
        (base.SniffsRecords, "sniff"),
        (base.SniffsDocuments, "sniff_document"),
        (base.SniffsFiles, "sniff_file"),
        (base.HasDefaultRoots, "default_roots"),
        (base.ReadsNamedFiles, "reads_named"),
        (base.HasCompanions, "companion_state"),
        (base.HasCompanionFiles, "companions_among"),
        (base.DescribesFiles, "describe_file"),
    ):
        assert formats.with_hook(proto) == tuple(m for m in formats.modules() if callable(getattr(m, hook, None)))
