"""Prices come from genai-prices (a maintained offline database, pinned), never from the network; every cost says
where it came from; an inexact match is flagged; and costs agree with ccusage 20.0.24 (``--offline``) per session
on the Claude, Codex and pi samples, except where the two price tables list different prices for one model (the
test then prints both and follows the maintained database)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from conftest import SAMPLE_DATA
from helpers import ingest_paths, query

from analyzer.ingest.cost import INEXACT, PRICED, SOURCE_UNKNOWN, Usage, describe_source, model_price, price_usage

MILLION = Usage(input=100_000, output=0)  # under the 200k long-context tier


def test_prices_never_touch_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("pricing opened a network connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    model_price.cache_clear()
    assert price_usage("claude-sonnet-4-5-20250929", MILLION)[0] == pytest.approx(0.3)


@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-6",
        "claude-haiku-4-5-20251001",
        "gemini-3-pro-image-preview",
        "gpt-4o",
        "converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0",
        "claude-sonnet-4-5",
        "gemini-2.5-pro",
        "gpt-5.5",
    ],
)  # the last three: tiered
def test_prices_are_genai_prices_to_the_digit(model: str) -> None:
    """A response is priced from the model's token prices with genai-prices' own unit arithmetic, not by its generic
    lookup each time: the figures must be genai-prices' to the digit, on both sides of each tier start (200k and 272k
    input tokens, cached included), and for counts far beyond any real response."""
    import random

    from genai_prices import calc_price

    from analyzer.ingest.cost import _genai_usage, _model_ref

    p = model_price(model)
    assert p is not None
    rnd = random.Random(7)
    for _ in range(300):
        u = Usage(
            *(rnd.choice([0, rnd.randint(1, 99), rnd.randint(0, 400_000), rnd.randint(0, 10**12)]) for _ in range(4))
        )
        if rnd.random() < 0.5:  # total input just around a tier start
            edge = rnd.choice([200_000, 272_000]) + rnd.randint(-2, 2)
            u.cache_read = rnd.randint(0, edge)
            u.input, u.cache_write = edge - u.cache_read, 0
        want = calc_price(_genai_usage(u), model_ref=p.model_ref, provider_id=_model_ref(model)[1] or p.provider)
        assert price_usage(model, u) == (float(want.total_price), p.source), u


def test_a_newer_model_is_not_priced_as_its_prefix() -> None:
    # gpt-5.5 used to be priced as gpt-5 by longest prefix, silently, 4x too low.
    cost55, src55 = price_usage("gpt-5.5", MILLION)
    cost5, src5 = price_usage("gpt-5", MILLION)
    assert src55 == PRICED + "openai/gpt-5.5" and src5 == PRICED + "openai/gpt-5"
    assert cost55 is not None and cost5 is not None and cost55 >= 3 * cost5


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-5-20250929",
        "claude-haiku-4-5-20251001",
        "gpt-5.1-codex",
        "gemini-2.5-pro",
        "jp.anthropic.claude-haiku-4-5-20251001-v1:0",
        "deepseek-chat",
    ],
)
def test_each_response_is_priced_as_genai_prices_prices_it(model: str) -> None:
    # price_usage applies the model's token prices itself (calc_price per response was half of a cold ingest): the
    # long-context tier, a cache count the model has no price for and zero counts all cost what calc_price says.
    from genai_prices import calc_price

    from analyzer.ingest.cost import _genai_usage, _model_ref

    p = model_price(model)
    assert p is not None
    provider = _model_ref(model)[1] or p.provider
    for u in (
        Usage(100_000, 2_000, 50_000, 7_000),
        Usage(150_000, 9_000, 120_000, 40_000),
        Usage(0, 0, 0, 0),
        Usage(1, 0, 0, 0),
        Usage(3, 5, 0, 250_001),
        Usage(0, 1_000, 300_000, 0),
    ):
        want = float(calc_price(_genai_usage(u), model_ref=p.model_ref, provider_id=provider).total_price)
        assert price_usage(model, u) == (want, p.source), u


def test_bedrock_regional_ids_keep_their_region_premium() -> None:
    regional, src = price_usage("jp.anthropic.claude-haiku-4-5-20251001-v1:0", MILLION)
    direct, _ = price_usage("claude-haiku-4-5-20251001", MILLION)
    assert src.startswith(PRICED + "aws/")
    assert regional is not None and direct is not None and regional > direct


def test_unknown_and_inexact_models_say_so() -> None:
    assert price_usage("acme-model-7", MILLION) == (None, SOURCE_UNKNOWN)
    assert describe_source(SOURCE_UNKNOWN) == "unknown model: no price"
    cost, src = price_usage("claude-sonnet-4-5-experimental", MILLION)
    assert cost is not None and src.startswith(INEXACT)
    assert "inexact" in describe_source(src)
    assert describe_source("transcript") == "recorded in the transcript"


def _ours(db: Path, agent_dir: str) -> dict[str, tuple[float, list[str], list[str]]]:
    """Our cost per ccusage session (file stem; a Claude subagent file counts to its parent) with the models and
    cost sources of its turns."""
    rows = query(
        db,
        """
        SELECT s.source_path, coalesce(sum(t.cost_usd), 0), list(DISTINCT t.model), list(DISTINCT t.cost_source)
        FROM sessions s LEFT JOIN turns t ON t.session_id = s.session_id AND t.usage_counted
        WHERE s.source_path LIKE ? GROUP BY ALL""",
        [f"%{agent_dir}%"],
    )
    out: dict[str, tuple[float, list[str], list[str]]] = {}
    for path, cost, models, sources in rows:
        p = Path(path)
        name = p.parent.parent.name if p.parent.name == "subagents" else p.stem
        prev = out.get(name, (0.0, [], []))
        out[name] = (prev[0] + float(cost), prev[1] + [m for m in models if m], prev[2] + [s for s in sources if s])
    return out


def _key(agent: str, sid: str) -> str:
    sid = sid.rsplit("/", 1)[-1]
    return sid


@pytest.mark.parametrize("agent,folder", [("claude", "claude_code"), ("codex", "codex"), ("pi", "pi")])
def test_costs_agree_with_ccusage(agent: str, folder: str, db: Path) -> None:
    from ccusage import run_ccusage

    root = SAMPLE_DATA / folder
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*.jsonl"))}
    reference = run_ccusage(agent, files)
    ingest_paths(db, *files.values())
    ours = _ours(db, f"/{folder}/")
    assert reference, "ccusage listed no session"
    compared = 0
    for ref in reference:
        sid = _key(agent, ref["sessionId"])
        match = [k for k in ours if k == sid or k.endswith(sid) or sid.endswith(k)]
        assert len(match) == 1, (sid, sorted(ours))
        cost, models, sources = ours[match[0]]
        theirs = float(ref.get("costUSD", ref.get("totalCost")))
        print(f"{agent} {sid}: ours ${cost:.6f} ({', '.join(sorted(set(sources)))}), ccusage ${theirs:.6f}")
        assert not any(s.startswith(INEXACT) or s == SOURCE_UNKNOWN for s in sources), sources
        if theirs == pytest.approx(cost, rel=0.01, abs=1e-9):
            compared += 1
            continue
        # Only a difference between the two price tables may explain a gap: price ccusage's own per-model token
        # counts with genai-prices, print both, and follow the maintained database.
        assert "transcript" not in sources, "a recorded cost must match exactly"
        for part in ref.get("modelBreakdowns", []):
            usage = Usage(
                input=part["inputTokens"],
                output=part["outputTokens"],
                cache_read=part["cacheReadTokens"],
                cache_write=part["cacheCreationTokens"],
            )
            db_price, src = price_usage(part["modelName"], usage)
            print(f"  {part['modelName']}: ccusage ${part['cost']:.6f}, genai-prices ${db_price or 0:.6f} ({src})")
            assert db_price is not None and db_price != pytest.approx(part["cost"], rel=0.01), (
                f"{agent} {sid}: same price for {part['modelName']} yet the costs differ"
            )
        compared += 1
    assert compared == len(reference)
