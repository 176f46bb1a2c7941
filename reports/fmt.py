"""Number and date formatting shared by page builders and templates, so a figure reads the same everywhere."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any


def num(v: Any) -> str:
    if v is None:
        return "—"
    return f"{int(v):,}"


def compact(v: Any) -> str:
    """1234 -> 1.2k, 3_400_000 -> 3.4M: for KPI cards where the exact figure sits in the tooltip."""
    if v is None:
        return "—"
    n = float(v)
    for unit, div in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:,.1f}{unit}"
    return f"{int(n):,}"


def usd(v: Any) -> str:
    if v is None:
        return "—"
    x = float(v)
    if 0 < abs(x) < 0.005:
        return "<$0.01"  # cents are the resolution a reader compares; a mix of precisions in one column is not
    return f"${x:,.2f}"


def pct(v: Any, digits: int = 1) -> str:
    if v is None:
        return "—"
    return f"{float(v) * 100:.{digits}f}%"


def share(part: float, whole: float) -> float | None:
    return None if not whole else part / whole


def when(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M")
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def project_label(cwd: str | None) -> str:
    """The last two parts of a working directory: enough to tell projects apart in a chart label."""
    if not cwd:
        return "(unknown)"
    parts = [p for p in cwd.replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:]) if parts else cwd
