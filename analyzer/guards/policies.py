"""Policies as data: a guard engine (an exact replica of one shipped loop guard, ``analyzer.guards``) plus its settings.

Each preset is its engine with the guard's own defaults. A custom policy starts from a preset (or from
another custom policy) and changes settings, from a TOML file or from flags; the replay and the calibration sweep run
any of them the same way (``Policy.guard()`` builds a fresh simulator per session).

Custom policies in TOML
-----------------------

One table per policy under ``[policies.<name>]``::

    [policies.strict-codesign]
    base = "open-codesign"          # required: a preset, or another policy defined in the same file
    description = "warn at 2, halt at 4, done and todo calls exempt"
    warn = 2
    halt = 4
    exempt_tools = ["done", "todo_write"]

    [policies.pi-wide]
    base = "pi-anti-doom-loop"
    window = 20
    similarity = 0.7

- ``base`` (string, required) names the preset or file policy whose engine and settings the policy starts from.
- ``description`` (string, optional) is shown by ``loopscope policies``.
- Every other key is a setting of the base's engine (``loopscope policies --policy NAME`` lists them with their
  defaults); an unknown setting, a wrong type or a value out of range is an error that names the file and policy.
  Integer settings take integers, ratio settings take numbers, switches take ``true``/``false``, tool lists take
  arrays of strings, ``key`` takes ``"canonical"``, ``"ordered"`` or ``"shallow"``.
- A policy name may not reuse a preset's name. Load the file with ``--policy-file FILE`` and pick the policy with
  ``--policy NAME``.

Flags change settings for one run without a file: ``--warn N``, ``--halt N``, ``--window N``, or
``--set NAME=VALUE`` for any setting (tool lists comma-separated). A policy changed by flags is reported under its name
followed by the changes, e.g. ``open-codesign[halt=8]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.errors import UsageError
from analyzer.guards import ENGINES, Guard, Param, aliases

if TYPE_CHECKING:
    import polars as pl

# polars is imported inside the two listings only: the Claude Code hook builds policies on every tool call.

ALIASES = aliases()  # other names for a preset, declared by each guard (``Guard.ALIASES``)
SHORTCUTS = ("warn", "halt", "window")


@dataclass(frozen=True)
class Policy:
    """A named engine + complete, validated settings. Frozen and picklable (the replay ships it to worker
    processes)."""

    name: str
    engine: str
    settings: tuple[tuple[str, Any], ...]
    description: str = ""
    origin: str = "preset"

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.settings)

    @property
    def engine_class(self) -> type[Guard]:
        return ENGINES[self.engine]

    def guard(self) -> Guard:
        """A fresh simulator (one per session)."""
        return self.engine_class(self.params)

    def changed(self) -> dict[str, Any]:
        """Settings that differ from the engine's (the guard's own) defaults."""
        spec = self.engine_class.PARAMS
        return {k: v for k, v in self.settings if v != spec[k].default}

    def with_settings(
        self,
        overrides: Mapping[str, Any],
        name: str | None = None,
        origin: str | None = None,
        where: str = "settings",
        from_text: bool = False,
    ) -> Policy:
        """A copy with some settings changed, validated (``from_text``: values are flag strings to parse)."""
        params = self.params
        for key, value in overrides.items():
            params[key] = coerce(self.engine, key, value, where, from_text)
        if name is None:
            name = (
                self.name + "[" + ",".join(f"{k}={format_value(params[k])}" for k in overrides) + "]"
                if overrides
                else self.name
            )
        return Policy(name, self.engine, _ordered(self.engine, params), self.description, origin or self.origin)

    def describe(self) -> dict[str, str]:
        cls = self.engine_class
        row = {"policy": self.name, "engine": self.engine, "unit": cls.UNIT}
        row.update(cls.describe(self.params))
        row["source"] = cls.SOURCE
        row["description"] = self.description
        row["origin"] = self.origin
        return row


def format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return ";".join(v) if v else "none"
    return str(v)


def _ordered(engine: str, params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, params[k]) for k in ENGINES[engine].PARAMS)


def _defaults(engine: str) -> tuple[tuple[str, Any], ...]:
    return tuple((k, p.default) for k, p in ENGINES[engine].PARAMS.items())


PRESETS: dict[str, Policy] = {
    name: Policy(name, name, _defaults(name), cls.DESCRIPTION) for name, cls in ENGINES.items()
}


# -- validation --------------------------------------------------------------------------------------------------------
def _parse_text(param: Param, text: str) -> Any:
    """A flag's string value in the setting's type."""
    t = text.strip()
    if param.kind == "int":
        return int(t)
    if param.kind == "float":
        return float(t)
    if param.kind == "bool":
        low = t.lower()
        if low in ("true", "yes", "on", "1"):
            return True
        if low in ("false", "no", "off", "0"):
            return False
        raise ValueError(t)
    if param.kind == "tools":
        return tuple(x.strip() for x in t.split(",") if x.strip())
    return t


def coerce(engine: str, key: str, value: Any, where: str = "settings", from_text: bool = False) -> Any:
    """Check one setting against the engine's declaration; apply the guard's own rule for values below the minimum."""
    spec = ENGINES[engine].PARAMS
    param = spec.get(key)
    if param is None:
        raise UsageError(f"{where}: {engine} has no setting {key!r}; its settings are {', '.join(spec)}")
    if from_text and isinstance(value, str) and param.kind != "str":
        try:
            value = _parse_text(param, value)
        except ValueError:
            raise UsageError(f"{where}: {key} expects {_KIND_WORDS[param.kind]}, got {value!r}") from None
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "tools": isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value),
    }[param.kind]
    if not ok:
        raise UsageError(f"{where}: {key} expects {_KIND_WORDS[param.kind]}, got {value!r}")
    if param.kind == "float":
        value = float(value)
    if param.kind == "tools":
        value = tuple(value)
    if param.choices and value not in param.choices:
        raise UsageError(f"{where}: {key} must be one of {', '.join(param.choices)}, got {value!r}")
    if param.minimum is not None and value < param.minimum:
        if param.below_min == "default":
            return param.default
        if param.below_min == "clamp":
            return type(value)(param.minimum)
        raise UsageError(f"{where}: {key} must be at least {format_value(param.minimum)}, got {value!r}")
    return value


_KIND_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "tools": "a list of tool names",
}


# -- lookup and files --------------------------------------------------------------------------------------------------
def load_policy_file(path: Path) -> dict[str, Policy]:
    """Read custom policies from a TOML file (schema in this module's docstring)."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"policy file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read policy file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    unknown = set(data) - {"policies"}
    if unknown:
        raise UsageError(
            f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}; put each policy under [policies.<name>]"
        )
    tables = data.get("policies", {})
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise UsageError(f"{path}: [policies] must hold one table per policy, e.g. [policies.my-guard]")
    done: dict[str, Policy] = {}

    def build(name: str, chain: tuple[str, ...]) -> Policy:
        if name in done:
            return done[name]
        where = f"{path} [policies.{name}]"
        if _canonical_name(name) in PRESETS:
            raise UsageError(f"{where}: {name!r} is a preset's name; give the custom policy another name")
        if name in chain:
            raise UsageError(f"{where}: base chain loops ({' -> '.join(chain + (name,))})")
        table = dict(tables[name])
        base_name = table.pop("base", None)
        description = table.pop("description", "")
        if not isinstance(base_name, str):
            raise UsageError(f'{where}: base = "<preset or policy>" is required (presets: {", ".join(PRESETS)})')
        if not isinstance(description, str):
            raise UsageError(f"{where}: description must be a string")
        if base_name in tables:
            base = build(base_name, chain + (name,))
        elif _canonical_name(base_name) in PRESETS:
            base = PRESETS[_canonical_name(base_name)]
        else:
            raise UsageError(f"{where}: unknown base {base_name!r}; presets: {', '.join(PRESETS)}")
        pol = base.with_settings(table, name=name, origin=str(path), where=where)
        pol = Policy(pol.name, pol.engine, pol.settings, description or base.description, pol.origin)
        done[name] = pol
        return pol

    for name in tables:
        build(name, ())
    return done


def _canonical_name(name: str) -> str:
    low = name.strip().lower()
    return ALIASES.get(low, low)


def parse_sets(items: Iterable[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` pairs."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--set expects NAME=VALUE, got {item!r}")
        out[name.strip()] = value
    return out


def resolve(
    names: Sequence[str], policy_file: Path | None = None, overrides: Mapping[str, str] | None = None
) -> list[Policy]:
    """The policies a command asked for: preset names (or aliases), custom ones from ``policy_file``, or ``all``;
    then ``overrides`` (flag strings) applied to each."""
    custom = load_policy_file(policy_file) if policy_file is not None else {}
    chosen: list[Policy] = []
    for raw in names or ["all"]:
        if raw.strip().lower() == "all":
            chosen.extend(PRESETS.values())
            chosen.extend(custom.values())
            continue
        if raw in custom:
            chosen.append(custom[raw])
            continue
        name = _canonical_name(raw)
        if name not in PRESETS:
            known = list(PRESETS) + list(custom)
            raise UsageError(
                f"unknown policy {raw!r}; choose from {', '.join(known)}, or all"
                + ("" if policy_file else " (custom policies need --policy-file)")
            )
        chosen.append(PRESETS[name])
    seen: set[str] = set()
    unique = [p for p in chosen if not (p.name in seen or seen.add(p.name))]
    if overrides:
        unique = [p.with_settings(overrides, origin="flags", where=f"policy {p.name}", from_text=True) for p in unique]
    return unique


# -- listings ----------------------------------------------------------------------------------------------------------
POLICY_TABLE_COLUMNS = [
    "policy",
    "unit",
    "key",
    "window",
    "reset",
    "exemptions",
    "blocked_count",
    "escalation",
    "thresholds",
]


def policies_frame(policies: Sequence[Policy]) -> pl.DataFrame:
    """One row per policy: how it counts, resets and escalates, in words."""
    import polars as pl

    rows = [p.describe() for p in policies]
    cols = [
        "policy",
        "engine",
        "unit",
        "key",
        "window",
        "reset",
        "exemptions",
        "blocked_count",
        "escalation",
        "thresholds",
        "source",
        "description",
        "origin",
    ]
    return pl.DataFrame([{c: r.get(c, "") for c in cols} for r in rows], schema={c: pl.String for c in cols})


def settings_frame(policy: Policy) -> pl.DataFrame:
    """Every setting of one policy, with the guard's default and what it means."""
    import polars as pl

    spec = policy.engine_class.PARAMS
    return pl.DataFrame(
        {
            "setting": [k for k, _ in policy.settings],
            "value": [format_value(v) for _, v in policy.settings],
            "default": [format_value(spec[k].default) for k, _ in policy.settings],
            "meaning": [spec[k].doc for k, _ in policy.settings],
        },
        schema={"setting": pl.String, "value": pl.String, "default": pl.String, "meaning": pl.String},
    )
