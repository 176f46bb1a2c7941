"""Placeholder: being written."""
from __future__ import annotations
from typing import Any
from .base import FileContext

FORMAT = "claude_code"


def sniff(rec: Any) -> bool:
    return False


class Parser:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    def feed(self, rec: Any, line: int) -> None:
        pass

    def close(self) -> int:
        return 0
