"""The static HTML report: rendering only. It reads the store's tables (and optional replay/calibration results) and
knows nothing about transcript formats. Entry point: ``render_report``."""

from analyzer.results import Calibration, Recommendation, Replay, ReportInputError
from reports.render import ReportError, ReportResult, render_report

__all__ = [
    "Calibration",
    "Recommendation",
    "Replay",
    "ReportError",
    "ReportInputError",
    "ReportResult",
    "render_report",
]
