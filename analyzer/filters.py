"""The one session filter every command shares: dates, agent (format) and project (cwd substring)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from .errors import UsageError

FORMATS = ("pi", "claude_code", "codex", "openai_messages", "gemini_cli", "inspect", "opencode")
KINDS = ("streak", "cycle", "window", "drift", "failure", "text", "nested")  # kinds of loop episode (findings.kind)
_ALIASES = {
    "claude": "claude_code", "claude-code": "claude_code", "cc": "claude_code",
    "openai": "openai_messages", "openai-messages": "openai_messages", "messages": "openai_messages",
    "codex-cli": "codex", "pi-agent": "pi",
    "gemini": "gemini_cli", "gemini-cli": "gemini_cli", "inspect_ai": "inspect", "inspect-ai": "inspect",
    "open-code": "opencode",
}


def parse_date(value: str | None, option: str) -> date | None:
    if value is None or value == "":
        return None
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    raise UsageError(f"{option}: expected a date like 2026-11-01, got {value!r}")


def parse_agent(value: str | None) -> str | None:
    if not value:
        return None
    v = value.strip().lower()
    v = _ALIASES.get(v, v)
    if v not in FORMATS:
        raise UsageError(f"--agent: unknown agent {value!r}; choose from {', '.join(FORMATS)}")
    return v


@dataclass(frozen=True)
class SessionFilter:
    since: date | None = None
    until: date | None = None
    agent: str | None = None
    project: str | None = None

    @classmethod
    def parse(cls, since: str | None = None, until: str | None = None, agent: str | None = None,
              project: str | None = None) -> "SessionFilter":
        f = cls(parse_date(since, "--since"), parse_date(until, "--until"), parse_agent(agent), project or None)
        if f.since and f.until and f.since > f.until:
            raise UsageError(f"--since {f.since} is after --until {f.until}")
        return f

    @property
    def active(self) -> bool:
        return any((self.since, self.until, self.agent, self.project))

    def where(self, alias: str = "s") -> tuple[str, list[object]]:
        """A SQL condition over the ``sessions`` table (aliased ``alias``) and its parameters. Dates are inclusive
        and compare against the session's start, in UTC."""
        conds: list[str] = []
        params: list[object] = []
        if self.since:
            conds.append(f"{alias}.started_at >= ?")
            params.append(datetime.combine(self.since, datetime.min.time()))
        if self.until:
            conds.append(f"{alias}.started_at < ?")
            params.append(datetime.combine(self.until + timedelta(days=1), datetime.min.time()))
        if self.agent:
            conds.append(f"{alias}.format = ?")
            params.append(self.agent)
        if self.project:
            conds.append(f"contains(lower(coalesce({alias}.cwd, '')), lower(?))")
            params.append(self.project)
        return (" AND ".join(conds) if conds else "TRUE"), params
