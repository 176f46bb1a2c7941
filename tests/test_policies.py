"""Policies as data: presets, custom policies from TOML, flag overrides, and the listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.errors import UsageError
from analyzer.guards.policies import PRESETS, load_policy_file, parse_sets, policies_frame, resolve, settings_frame

PRESET_NAMES = [
    "open-codesign",
    "gitagent",
    "pi-anti-doom-loop",
    "pi-anti-doom-loop@0.0.7",
    "gemini-cli",
    "cline",
    "roo-code",
    "opencode",
    "openhands",
    "loopscope",
]


def test_presets_with_their_guards_defaults() -> None:
    assert list(PRESETS) == PRESET_NAMES
    assert (PRESETS["loopscope"].params["warn"], PRESETS["loopscope"].params["halt"]) == (3, 5)
    assert PRESETS["open-codesign"].params["warn"] == 3 and PRESETS["open-codesign"].params["halt"] == 5
    assert PRESETS["open-codesign"].params["exempt_tools"] == ("done",)
    assert PRESETS["gitagent"].params == {"key": "ordered", "halt": 5, "max_turns": 50}
    assert PRESETS["pi-anti-doom-loop"].params["window"] == 10
    assert PRESETS["gemini-cli"].params["key"] == "ordered"
    assert PRESETS["roo-code"].params["halt"] == 4
    assert all(not p.changed() for p in PRESETS.values())


def test_listing_says_how_each_preset_counts() -> None:
    df = policies_frame(list(PRESETS.values()))
    rows = {r["policy"]: r for r in df.to_dicts()}
    assert list(rows) == PRESET_NAMES
    assert rows["open-codesign"]["blocked_count"] == "yes"
    assert rows["pi-anti-doom-loop"]["blocked_count"].startswith("no")
    assert "JSON.stringify" in rows["gitagent"]["key"]
    assert "top-level" in rows["roo-code"]["key"]
    assert rows["open-codesign"]["window"] == "last 15 calls (streak, cycles of 2..3)"
    assert "done" in rows["open-codesign"]["exemptions"]
    assert all(
        rows[n]["unit"] and rows[n]["escalation"] and rows[n]["thresholds"] and rows[n]["source"] for n in PRESET_NAMES
    )


def test_settings_frame_lists_every_setting_with_default_and_meaning() -> None:
    df = settings_frame(PRESETS["pi-anti-doom-loop"])
    row = df.filter(df["setting"] == "window").to_dicts()[0]
    assert row["value"] == row["default"] == "10" and "PI_ANTI_LOOP_WINDOW" in row["meaning"]


def test_custom_policies_from_toml(tmp_path: Path) -> None:
    f = tmp_path / "guards.toml"
    f.write_text("""
[policies.strict]
base = "open-codesign"
description = "earlier"
warn = 2
halt = 4
exempt_tools = ["done", "todo_write"]

[policies.stricter]
base = "strict"
halt = 3

[policies.pi-wide]
base = "pi"
window = 20
similarity = 0.7
""")
    pols = load_policy_file(f)
    assert pols["strict"].engine == "open-codesign"
    assert pols["strict"].params["exempt_tools"] == ("done", "todo_write")
    assert pols["strict"].changed() == {"warn": 2, "halt": 4, "exempt_tools": ("done", "todo_write")}
    assert pols["stricter"].params["warn"] == 2 and pols["stricter"].params["halt"] == 3
    assert pols["stricter"].description == "earlier"
    assert pols["pi-wide"].engine == "pi-anti-doom-loop" and pols["pi-wide"].params["similarity"] == 0.7
    assert pols["strict"].origin == str(f)
    names = [p.name for p in resolve(["strict", "gitagent"], f)]
    assert names == ["strict", "gitagent"]
    assert [p.name for p in resolve(["all"], f)] == PRESET_NAMES + ["strict", "stricter", "pi-wide"]


@pytest.mark.parametrize(
    "body,message",
    [
        ("[policies.x]\nwarn = 2\n", "base"),
        ('[policies.x]\nbase = "nope"\n', "unknown base 'nope'"),
        ('[policies.x]\nbase = "open-codesign"\nwarnn = 2\n', "has no setting 'warnn'"),
        ('[policies.x]\nbase = "open-codesign"\nwarn = "2"\n', "warn expects an integer"),
        ('[policies.x]\nbase = "open-codesign"\nwarn = 2.5\n', "warn expects an integer"),
        ('[policies.x]\nbase = "open-codesign"\nwarn = 0\n', "at least 1"),
        ('[policies.x]\nbase = "open-codesign"\nkey = "sorted"\n', "key must be one of"),
        ('[policies.x]\nbase = "open-codesign"\nexempt_tools = "done"\n', "list of tool names"),
        ('[policies.gitagent]\nbase = "open-codesign"\n', "a preset's name"),
        ('[policies.a]\nbase = "b"\n[policies.b]\nbase = "a"\n', "base chain loops"),
        ('[policy.x]\nbase = "open-codesign"\n', "[policies.<name>]"),
        ("[policies.x\nbase = 1", "not valid TOML"),
    ],
)
def test_bad_policy_files_are_usage_errors_naming_the_problem(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(UsageError) as exc:
        load_policy_file(f)
    assert message in str(exc.value)


def test_missing_policy_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        resolve(["x"], tmp_path / "nope.toml")


def test_flag_overrides_rename_the_policy_and_are_validated() -> None:
    (p,) = resolve(["open-codesign"], overrides=parse_sets(["halt=8", "exempt_tools=done,todo"]))
    assert p.name == "open-codesign[halt=8,exempt_tools=done;todo]"
    assert p.params["halt"] == 8 and p.params["exempt_tools"] == ("done", "todo")
    assert p.origin == "flags"
    (q,) = resolve(["pi"], overrides={"near_identical_calls": "false", "similarity": "0.8"})
    assert q.params["near_identical_calls"] is False and q.params["similarity"] == 0.8
    with pytest.raises(UsageError, match="gitagent has no setting 'warn'"):
        resolve(["gitagent"], overrides={"warn": "3"})
    with pytest.raises(UsageError, match="expects an integer"):
        resolve(["open-codesign"], overrides={"halt": "many"})
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_sets(["halt"])


def test_unknown_policy_name_lists_the_choices() -> None:
    with pytest.raises(UsageError) as exc:
        resolve(["claude"])
    assert "open-codesign" in str(exc.value) and "--policy-file" in str(exc.value)
    assert [p.name for p in resolve(["pi", "Gemini", "roo"])] == ["pi-anti-doom-loop", "gemini-cli", "roo-code"]
