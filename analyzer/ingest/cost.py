"""Usage and its price: the ``Usage`` of one API response, and offline pricing from a price table shipped with the
package, matched by normalised model name. Never a network call."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(slots=True)
class Usage:
    """Token usage of one API response. ``input`` excludes cached input."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int | None = None  # the agent's own total, where it records one
    cost: float | None = None  # the agent's own cost, where it records one

    @property
    def total_tokens(self) -> int:
        if self.total is not None:
            return self.total
        return self.input + self.output + self.cache_read + self.cache_write


_DATE = re.compile(r"-\d{8}$|@\d{8}$|-\d{4}-\d{2}-\d{2}$")
_BEDROCK = re.compile(r"^(?:converse/)?(?:[a-z]{2}\.)?anthropic\.")
_VERSION = re.compile(r"-v\d+(?::\d+)?$")


@lru_cache(maxsize=1)
def price_table() -> dict[str, dict[str, float]]:
    raw = json.loads(resources.files("analyzer").joinpath("data/prices.json").read_text())
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def normalize_model(model: str) -> str:
    """``anthropic/claude-sonnet-4-20250514``, ``converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0`` and
    ``[pi] claude-sonnet-4-5`` all become the bare family name the price table uses."""
    m = model.strip().lower()
    if m.startswith("[") and "]" in m:
        m = m.split("]", 1)[1].strip()
    m = m.rsplit("/", 1)[-1]
    m = _BEDROCK.sub("", m)
    m = _VERSION.sub("", m)
    m = _DATE.sub("", m)
    return m.replace("_", "-")


@lru_cache(maxsize=4096)
def model_prices(model: str | None) -> dict[str, float] | None:
    """The price entry for a model: exact match after normalisation, else the longest known prefix."""
    if not model:
        return None
    table = price_table()
    m = normalize_model(model)
    if m in table:
        return table[m]
    for key in sorted(table, key=len, reverse=True):
        if m.startswith(key):
            return table[key]
    return None


def price_usage(model: str | None, usage: Usage) -> tuple[float | None, str | None]:
    """(cost in USD, ``"price_table"``) or (None, None) when the model is unknown."""
    p = model_prices(model)
    if p is None:
        return None, None
    cost = (
        usage.input * p["input"]
        + usage.output * p["output"]
        + usage.cache_read * p["cache_read"]
        + usage.cache_write * p["cache_write"]
    ) / 1e6
    return cost, "price_table"
