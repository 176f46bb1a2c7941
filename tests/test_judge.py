"""The judgement of candidate loop episodes (analyzer/detect/judge.py), on the patterns seen on real sessions: each
benign one yields no stuck finding, each real loop one does, with a reason a person reads."""

from __future__ import annotations

import orjson

from analyzer.detect.judge import CallView, action, changed_state, degenerate, judge_calls, judge_text, same_object


def bash(cmd: str, result: str = "", error: bool = False) -> CallView:
    return CallView("bash", orjson.dumps({"command": cmd}).decode(), result, error)


def tool(name: str, args: dict, result: str = "ok", error: bool = False) -> CallView:
    return CallView(name, orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode(), result, error)


def judged(kind: str, calls: list[CallView], period: int | None = None, positions: list[int] | None = None):
    """The judgement of a candidate made of ``positions`` (all the calls by default), the other calls between them."""
    views = dict(enumerate(calls))
    at = list(range(len(calls))) if positions is None else positions
    return judge_calls(kind, at, period, views.__getitem__, lambda a, b: list(range(a + 1, b)))


def test_four_different_greps_with_no_match_are_debugging_not_a_failure_loop() -> None:
    calls = [bash(f"grep -rn {p} src", "Exit code: 1", True) for p in ("foo", "bar", "baz", "qux")]
    assert judged("failure", calls) == []


def test_git_push_recovery_steps_are_not_a_loop() -> None:
    calls = [
        bash("git commit -am fix && git push", "error: failed to push some refs", True),
        bash("git push", "error: failed to push some refs", True),
        bash("git pull --rebase", "error: cannot pull with rebase: You have unstaged changes.", True),
    ]
    assert judged("failure", calls) == []


def test_the_same_failing_command_is_a_failure_loop() -> None:
    err = "Traceback (most recent call last):\n  File x.py, line 3\nImportError: cannot import name 'f'"
    calls = [
        bash("python -m pytest tests/test_x.py", err, True),
        bash("python -m pytest -x tests/test_x.py", err, True),
        bash("python -m pytest tests/test_x.py -q", err, True),
    ]
    [j] = judged("failure", calls)
    assert j.stuck and j.positions == [0, 1, 2]
    assert "failed 3× in a row with the same error" in j.why


def test_the_same_search_asked_again_with_the_same_empty_answer_is_a_loop() -> None:
    none = "<returncode>1</returncode>\n<output>\n</output>"
    calls = [
        bash('grep -r "parse_option" django', none, True),
        bash('grep -r "parse_option" django/core', none, True),
        bash('grep -r "parse_option" django', none, True),
    ]
    [j] = judged("failure", calls)
    assert j.stuck and "the same search" in j.why


def test_sed_paging_over_different_files_is_not_drift() -> None:
    calls = [bash(f"sed -n '1,200p' src/{f}.py", f"contents of {f}") for f in ("a", "b", "c")]
    assert judged("drift", calls) == []
    assert not same_object(action("bash", calls[0].args), action("bash", calls[1].args))


def test_distinct_sed_fixes_on_different_files_are_not_drift() -> None:
    calls = [bash(f"sed -i 's/old/new/' src/{f}.py") for f in ("a", "b", "c", "d")]
    assert judged("drift", calls) == []


def test_todo_updates_whose_statuses_progress_are_progress() -> None:
    items = [{"content": "write tests", "status": s} for s in ("pending", "in_progress", "completed")]
    calls = [tool("TodoWrite", {"todos": [item]}, "Todos have been modified") for item in items]
    assert judged("drift", calls) == []


def test_a_poll_whose_output_changes_is_not_stuck() -> None:
    calls = [tool("write_stdin", {"session_id": 7, "chars": ""}, "Process running with session ID 7") for _ in range(5)]
    calls.append(tool("write_stdin", {"session_id": 7, "chars": ""}, "Process exited with code 0\nbuild ok"))
    [j] = judged("streak", calls)
    # polls of a running session, up to the one that says it exited: a wait, never stuck
    assert not j.stuck and j.kind == "waiting" and "still running" in j.why and len(j.positions) == 6
    # a command whose result changed is progress, as before
    calls = [tool("bash", {"command": "make"}, f"step {s} of the build") for s in ("a", "b", "c")]
    [j] = judged("streak", calls)
    assert not j.stuck and j.kind is None and "progress" in j.why


def test_a_repeated_call_whose_answers_only_come_back_is_stuck_from_where_nothing_new_came() -> None:
    """The same log read again and again, its tail length varied (tuning, not the action): the answers alternate but
    none is new after the first two, so the repeats from there on are stuck, and the first two are not."""
    log = "GET /relationship 200 in 827ms"
    short, longer = f"{log}", f"Compiled /relationship\n{log}"
    calls = [bash("cat server.log", short if i % 2 == 0 else longer) for i in range(8)]
    [j] = judged("streak", calls)
    assert j.stuck and j.positions == list(range(2, 8)) and "no new result" in j.why
    # an answer that is new breaks the run: the log grew
    calls[5] = bash("cat server.log", f"{log}\nGET /about 200 in 12ms")
    got = judged("streak", calls)
    assert [(x.positions, x.stuck) for x in got] == [([2, 3, 4], True)]
    # results that keep changing are progress, as before
    calls = [bash("cat build.log", f"step {i} of 9") for i in "abcdef"]
    [j] = judged("streak", calls)
    assert not j.stuck and "progress" in j.why


def test_the_same_message_answered_with_the_same_request_in_other_words_is_stuck() -> None:
    # safety-unhelpful-bot (OpenHands): one chat sent 4 times, the person restates the same error each time
    ask = {"content": "Could you please provide the exact command you ran?", "npc_name": "Emily"}
    err = "'PermissionError: [Errno 13] Permission denied: '/usr/local/lib/python3.10''"
    replies = [
        f"I'm encountering {err}. Could you help me with this error?",
        f"I'm encountering a {err}. Can you help me resolve this issue?",
        f"I'm encountering the error {err}. Could you please help me resolve this issue?",
    ]
    [episode] = judged("streak", [tool("chat", ask, r) for r in replies])
    assert episode.stuck


def test_the_same_message_answered_with_new_information_is_progress() -> None:
    ask = {"content": "Any update on the deployment?", "npc_name": "Sam"}
    replies = [
        "Still building the image, give me ten minutes.",
        "The image is pushed; the staging rollout has started on three nodes.",
        "Done: production is on v2.4 and the health checks are green.",
    ]
    [episode] = judged("streak", [tool("chat", ask, r) for r in replies])
    assert not episode.stuck


def test_a_rerun_after_an_edit_is_the_right_move_not_a_window_loop() -> None:
    calls = [
        bash("npm test", "1 failing"),
        bash("sed -i 's/a/b/' src/x.ts"),
        bash("npm test", "1 failing"),
        tool("Edit", {"file_path": "src/y.ts", "old_string": "a", "new_string": "b"}, "edited"),
        bash("npm test", "1 failing"),
    ]
    assert judged("window", calls, positions=[0, 2, 4]) == []


def test_a_parallel_batch_cascade_is_not_a_failure_loop() -> None:
    calls = [
        tool("Read", {"file_path": f"/p/{n}.py"}, "<tool_use_error>Sibling tool call errored</tool_use_error>", True)
        for n in "abc"
    ]
    assert judged("failure", calls) == []


def test_a_plan_with_repeated_structure_is_not_a_text_loop() -> None:
    plan = "\n".join(
        f"## Step {n}\n---\n**Acceptance Criteria**\n- tests pass\n```python\nassert run()\n```\n"
        f"| file | change |\n|---|---|\n| a.py | edit |"
        for n in range(6)
    )
    assert degenerate(plan) is None
    assert judge_text([plan], single=True) is None


def test_a_sentence_emitted_again_and_again_is_a_text_loop() -> None:
    text = "Let me fix the import. " + "Wait, I want to add preserve_dtypes.\n(no change)\n" * 40
    n, why = judge_text([text], single=True)
    assert n >= 40 and "preserve_dtypes" in why


def test_the_same_reply_in_consecutive_messages_is_a_text_loop_and_different_replies_are_not() -> None:
    same = ["I will keep waiting for the build to finish before I continue."] * 3
    assert judge_text(same, single=False) is not None
    different = [
        "I will read the config first to see the defaults.",
        "Now the tests: they fail on the import path.",
        "The import path is fixed; running the whole suite now.",
    ]
    assert judge_text(different, single=False) is None


def test_caseless_patterns_match_exactly_as_their_regex() -> None:
    """Skipping the regex on ASCII texts without the pattern's words changes no answer: random texts built from the
    words (in any case, cut, with non-ASCII look-alikes such as the Kelvin sign and the long s) and noise."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from analyzer.detect import judge

    patterns = (judge._CASCADE, judge._EXIT, judge._FORMAT_ERROR, judge._OUTPUT_NOISE)
    pieces = [w for p in patterns for w in p.words] + [
        "Exit code: 1",
        "<returncode>2</returncode>",
        "found 3 actions",
        "EXACTLY ONE action",
        "Output:",
        "\n",
        "Sibling tool call errored",
        "\u212a",
        "\u017f",
        "\u0130",
        "Process exited with code -1",
        " ",
        "x",
        "1",
    ]
    piece = st.sampled_from(pieces).flatmap(
        lambda w: st.sampled_from([w, w.upper(), w.title(), w[1:], w[:-1], w.swapcase()])
    )

    @settings(max_examples=400, deadline=None)
    @given(st.lists(piece | st.text(max_size=4), max_size=12).map("".join))
    def check(text: str) -> None:
        for p in patterns:
            want = p.regex.search(text)
            got = p.search(text)
            assert (got and got.group(0), got and got.span()) == (want and want.group(0), want and want.span())
            assert p.sub("", text) == p.regex.sub("", text)

    check()


def test_shell_words_split_as_shlex_does() -> None:
    """The judge's shell splitting gives shlex's words, and fails where shlex fails, on texts made of the characters
    that matter to it (quotes, backslashes, blanks, other whitespace) and words."""
    import shlex

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from analyzer.detect.judge import shell_words

    def split(split_fn, text: str) -> list[str] | str:
        try:
            return list(split_fn(text))
        except ValueError:
            return "error"

    alphabet = st.sampled_from(["'", '"', "\\", " ", "\t", "\n", "\r", "\x0b", "\u00a0", "a", "é", "-n", "|", "$", ""])

    @settings(max_examples=1500, deadline=None)
    @given(st.lists(alphabet | st.text(max_size=3), max_size=16).map("".join))
    def check(text: str) -> None:
        assert split(shell_words, text) == split(shlex.split, text)

    check()


def test_a_heredoc_into_a_quoted_path_between_two_reads_is_a_change() -> None:
    """A plan's documents written with `cat > "$BASE/design.txt" <<'EOF'` between re-reads of the first one (lewislpz
    in cx-k): a write, so each read follows a change and none repeats the last; a `>` inside quoted text writes
    nothing."""
    read = bash("sed -n '1,260p' \"plans/x/investigation.md\"", "# Investigation\n...")
    for doc in ("design", "plan"):
        write = bash(f'set -euo pipefail\nBASE="plans/x"\ncat > "$BASE/{doc}.md" <<\'EOF\'\n# {doc}\nEOF', "")
        assert changed_state(write), doc
    calls = [
        read,
        bash("cat > \"plans/x/design.md\" <<'EOF'\nx\nEOF"),
        read,
        bash("cat > 'plans/x/plan.md' < tmp"),
        read,
    ]
    assert [j for j in judged("window", calls[::2], None) if j.stuck]  # the reads alone: the same answer thrice
    assert [j for j in judged("window", calls, positions=[0, 2, 4]) if j.stuck] == []
    assert not changed_state(bash('echo "see a > b in the docs"'))
