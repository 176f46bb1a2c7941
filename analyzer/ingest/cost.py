"""Usage and its price: the ``Usage`` of one API response, and offline pricing from ``genai-prices`` (Pydantic's
maintained price database, pinned in pyproject; its data ships inside the package and loopscope never asks it to
update, so pricing never touches the network).

Every cost says where it came from (``turns.cost_source``):

- ``transcript``: the agent recorded the cost itself; that always wins;
- ``genai-prices:<provider>/<model>``: priced by the database's entry for exactly this model (date and version
  suffixes, provider prefixes and Bedrock wrappers aside);
- ``genai-prices~<provider>/<model>``: the database matched a *different* model name (a family prefix, say): an
  inexact price, flagged in the CLI and the report;
- ``unknown model``: usage was recorded but no price is known; the cost is NULL, never a silent ``$0``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


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


SOURCE_TRANSCRIPT = "transcript"
SOURCE_UNKNOWN = "unknown model"
PRICED = "genai-prices:"
INEXACT = "genai-prices~"

_DATE = re.compile(r"-\d{8}$|@\d{8}$|-\d{4}-\d{2}-\d{2}$")
_REGION = re.compile(r"^(?:converse/)?(?:[a-z]{2,4}(?:-[a-z]+)?\.)?anthropic\.")
_VERSION = re.compile(r"-v\d+(?::\d+)?$")


def normalize_model(model: str) -> str:
    """``anthropic/claude-sonnet-4-20250514``, ``converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0`` and
    ``[pi] claude-sonnet-4-5`` all become the bare family name (to decide whether a price match is exact)."""
    m = model.strip().lower()
    if m.startswith("[") and "]" in m:
        m = m.split("]", 1)[1].strip()
    m = m.rsplit("/", 1)[-1]
    m = _REGION.sub("", m)
    m = _VERSION.sub("", m)
    m = _DATE.sub("", m)
    return m.replace("_", "-")


def _model_ref(model: str) -> tuple[str, str | None]:
    """The name genai-prices should look up, and its provider when the name says (Bedrock ids keep their region,
    whose premium the database knows)."""
    m = model.strip()
    if m.startswith("[") and "]" in m:
        m = m.split("]", 1)[1].strip()
    low = m.lower()
    if low.startswith("converse/"):
        low = low[len("converse/") :]
    if re.match(r"^(?:[a-z]{2,4}(?:-[a-z]+)?\.)?anthropic\.", low) or low.startswith("bedrock/"):
        return low.rsplit("/", 1)[-1], "aws"
    provider = None
    if "/" in low:
        prefix, rest = low.split("/", 1)
        provider = {"anthropic": "anthropic", "openai": "openai", "google": "google", "gemini": "google"}.get(prefix)
        low = rest.rsplit("/", 1)[-1]
    return low, provider


def _clause_names(clause: Any) -> list[str]:
    out: list[str] = []
    for attr in ("equals", "starts_with"):
        v = getattr(clause, attr, None)
        if isinstance(v, str):
            out.append(v)
    for attr in ("or_", "and_"):
        for c in getattr(clause, attr, None) or []:
            out.extend(_clause_names(c))
    return out


# The token prices of the four counts ``_genai_usage`` sends: a response costs, for each, the unit price at the tier
# its total input reaches x count / 1M, a cache count without a price of its own paying the input price; prices of
# anything else (web searches, 1-hour cache writes) meet a count of zero. That is what genai-prices computes.
_TOKEN_PRICES = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")


@dataclass(frozen=True)
class Price:
    """A model's price match: ``source`` is the ``cost_source`` text; ``prices`` the model's input, output,
    cache-read and cache-write prices (None for one it lacks); None when it has no input or output price, and every
    response then goes through ``calc_price``."""

    provider: str
    model: str
    exact: bool
    model_ref: str
    prices: tuple[Any, Any, Any, Any] | None = None

    @property
    def source(self) -> str:
        return f"{PRICED if self.exact else INEXACT}{self.provider}/{self.model}"


def _genai_usage(u: Usage) -> Any:
    from genai_prices import Usage as GUsage

    # genai-prices counts cached input inside input_tokens; ours excludes it.
    return GUsage(
        input_tokens=u.input + u.cache_read + u.cache_write,
        output_tokens=u.output,
        cache_read_tokens=u.cache_read,
        cache_write_tokens=u.cache_write,
    )


@lru_cache(maxsize=4096)
def model_price(model: str | None) -> Price | None:
    """The database's entry for ``model``, or None when it knows no such model."""
    if not model or not model.strip():
        return None
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    ref, provider = _model_ref(model)
    try:
        r = calc_price(GUsage(input_tokens=1, output_tokens=1), model_ref=ref, provider_id=provider)
    except LookupError:
        return None
    except Exception:  # a database entry that cannot price this usage shape: treat as unknown, never crash ingest
        return None
    want = normalize_model(model)
    names = {normalize_model(n) for n in [r.model.id, *_clause_names(r.model.match)]}
    return Price(str(r.provider.id), str(r.model.id), want in names, ref, _token_prices(r.model_price))


def _token_prices(model_price: Any) -> tuple[Any, Any, Any, Any] | None:
    """The model's ``_TOKEN_PRICES``, when it has an input and an output price."""
    prices = tuple(vars(model_price).get(k) for k in _TOKEN_PRICES)
    return prices if prices[0] is not None and prices[1] is not None else None  # type: ignore[return-value]


def price_usage(model: str | None, usage: Usage) -> tuple[float | None, str | None]:
    """(cost in USD, its ``cost_source``). An unknown model gives (None, ``"unknown model"``)."""
    p = model_price(model)
    if p is None:
        return None, SOURCE_UNKNOWN
    if p.prices is not None and min(usage.input, usage.output, usage.cache_read, usage.cache_write) >= 0:
        # genai-prices' own arithmetic (calc_unit_price, Decimal) without its per-call lookup and usage
        # decomposition, which cost ~0.4 ms a response: half of a whole ingest.
        from genai_prices.types import calc_unit_price

        price_in, price_out, price_read, price_write = p.prices
        read, write = usage.cache_read, usage.cache_write
        total_input = usage.input + read + write
        uncached = usage.input + (read if price_read is None else 0) + (write if price_write is None else 0)
        cost = (
            calc_unit_price(price_in, uncached, total_input, 1_000_000)
            + calc_unit_price(price_read, read, total_input, 1_000_000)
            + calc_unit_price(price_write, write, total_input, 1_000_000)
            + calc_unit_price(price_out, usage.output, total_input, 1_000_000)
        )
        return float(cost), p.source
    from genai_prices import calc_price

    _, provider = _model_ref(model or "")
    try:
        r = calc_price(_genai_usage(usage), model_ref=p.model_ref, provider_id=provider or p.provider)
    except Exception:
        return None, SOURCE_UNKNOWN
    return float(r.total_price), p.source


def describe_source(source: str | None) -> str:
    """``cost_source`` as a person reads it."""
    if not source:
        return "no usage recorded"
    if source == SOURCE_TRANSCRIPT:
        return "recorded in the transcript"
    if source.startswith(PRICED):
        return f"price table (genai-prices): {source[len(PRICED) :]}"
    if source.startswith(INEXACT):
        return f"inexact price match (genai-prices): {source[len(INEXACT) :]}"
    if source == SOURCE_UNKNOWN:
        return "unknown model: no price"
    return source
