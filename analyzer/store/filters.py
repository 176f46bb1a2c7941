"""The one session filter every command shares: dates, agent (format) and project (cwd substring)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from analyzer.errors import UsageError


def parse_date(value: str | None, option: str) -> date | None:
    if value is None or value == "":
        return None
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    raise UsageError(f"{option}: expected a date like 2026-11-01, got {value!r}")


def parse_agent(value: str | None, agents: Mapping[str, str]) -> str | None:
    """The format ``--agent`` names; ``agents`` maps every accepted name and alias to its format (the ingest's format
    registry, ``ingest.formats.agent_names``)."""
    if not value:
        return None
    v = value.strip().lower()
    if v not in agents:
        choices = ", ".join(sorted(set(agents.values())))
        raise UsageError(f"--agent: unknown agent {value!r}; choose from {choices}")
    return agents[v]


@dataclass(frozen=True)
class SessionFilter:
    since: date | None = None
    until: date | None = None
    agent: str | None = None
    project: str | None = None

    @classmethod
    def parse(
        cls,
        since: str | None = None,
        until: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        agents: Mapping[str, str] | None = None,
    ) -> SessionFilter:
        """From the CLI's option values. ``agents`` (name or alias -> format) is needed only when ``agent`` is set."""
        if agent and agents is None:
            raise ValueError("SessionFilter.parse: pass agents= (ingest.formats.agent_names()) to parse --agent")
        f = cls(
            parse_date(since, "--since"),
            parse_date(until, "--until"),
            parse_agent(agent, agents or {}),
            project or None,
        )
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


@dataclass(frozen=True)
class SessionIds:
    """Sessions named by id, in the shape of ``SessionFilter.where``: one batch of a scope, for the code that reads
    the store a bounded number of sessions at a time (calibrate, the report's replays)."""

    ids: tuple[str, ...]

    def where(self, alias: str = "s") -> tuple[str, list[object]]:
        return f"list_contains(?, {alias}.session_id)", [list(self.ids)]
