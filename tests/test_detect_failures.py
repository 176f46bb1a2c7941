"""Failed changes of one target, in both engines (the reference ``detect.stream`` and the scan's ``detect.vector``
held to the same rows): an edit refused the same way after each re-read is one blind retry whatever its text, and the
calls one message issues together are one attempt."""

from __future__ import annotations

from typing import Any

from test_detect_vector import build, reference, vectorised

from analyzer.detect.rules import FINDINGS
from analyzer.detect.stream.calls import Config

KIND, STUCK, REPEATS = (FINDINGS.names.index(c) for c in ("kind", "stuck", "repeats"))
FIRST, LAST, WHY = (FINDINGS.names.index(c) for c in ("first_seq", "last_seq", "why"))

PAGE = "/repo/src/app/page.tsx"
REFUSED = (
    "<tool_use_error>File has been modified since read, either by the user or by a linter. Read it again before "
    "attempting to write it.</tool_use_error>",
    True,
)


def _found(messages: list[list[tuple[str, dict[str, Any], tuple[str, bool]]]]) -> list[tuple]:
    """One session: each inner list is one assistant message's calls (100 tokens each)."""
    data = build([[("block", [("", calls, 100, 0.1) for calls in messages], 1)]])
    _, _, ref = reference(data, Config())
    _, _, vec = vectorised(data, Config())
    assert ref == vec  # both engines, the same rows
    return sorted(ref, key=lambda f: f[FIRST])


def _read(offset: int) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    return ("Read", {"file_path": PAGE, "offset": offset, "limit": 20}, (f"{offset}→  <section>", False))


def _edit(new: str) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    return ("Edit", {"file_path": PAGE, "old_string": "{/* Comment */}", "new_string": new}, REFUSED)


def test_an_edit_refused_the_same_way_after_each_read_is_one_blind_retry():
    """Read, Edit refused "modified since read", four times, the new text varied and the read range too: the reads
    change nothing and the refusal comes back, so the edits are stuck (the file keeps changing under the agent)."""
    messages = []
    for i in range(4):
        messages += [[_read(340 + i)], [_edit(f"<Comment v{i} />")]]
    (f,) = _found(messages)
    assert f[STUCK] and f[REPEATS] == 4 and (f[FIRST], f[LAST]) == (1, 7)
    assert "only looks in between" in f[WHY] and "same error" in f[WHY]


def test_one_message_of_parallel_edits_all_refused_is_one_attempt():
    """Nine edits sent together in one message, all refused: the agent saw none of the refusals before sending the
    others, so it retried nothing; a re-read and a second batch refused again is two attempts, still no loop."""
    denied = ("EACCES: permission denied, open '/repo/CLAUDE.md'", True)
    batch = [
        ("Edit", {"file_path": "/repo/CLAUDE.md", "old_string": f"## {i}", "new_string": "x"}, denied) for i in range(5)
    ]
    assert [f for f in _found([batch]) if f[STUCK]] == []
    refused = [_edit(f"<Product {i} />") for i in range(9)]
    assert [f for f in _found([refused, [_read(1)], refused]) if f[STUCK]] == []


def test_edits_of_different_files_refused_alike_are_no_loop():
    messages = []
    for i in range(4):
        path = f"/repo/src/{i}.tsx"
        messages += [
            [("Read", {"file_path": path}, ("x", False))],
            [("Edit", {"file_path": path, "old_string": "a", "new_string": f"b{i}"}, REFUSED)],
        ]
    assert [f for f in _found(messages) if f[STUCK]] == []


NOT_FOUND = (
    "<tool_use_error>String to replace not found in file.\nString:                 if (item.webUrl != null) {"
    "</tool_use_error>",
    True,
)


def test_an_edit_whose_old_text_is_not_in_the_file_is_a_real_failure():
    """Claude Code wraps "String to replace not found" in the same envelope as an invalid call, but the call was valid:
    the file does not hold the old text. Sent again after each re-read with the same wrong indentation, it is the
    failing edit retried blindly (c500308d in cc-l: eight such edits of one file)."""
    messages = []
    for i in range(3):
        edit = ("Edit", {"file_path": PAGE, "old_string": "    if (item.webUrl != null) {", "new_string": f"v{i}"})
        messages += [[_read(200 + i)], [(*edit, NOT_FOUND)]]
    (f,) = _found(messages)
    assert f[STUCK] and f[REPEATS] == 3 and (f[FIRST], f[LAST]) == (1, 5)
    assert "same error" in f[WHY]


def _not_found(old: str) -> tuple[str, bool]:
    """Claude Code's refusal of an Edit whose old text is not in the file: it quotes the text sent."""
    return (f"<tool_use_error>String to replace not found in file.\nString: {old}</tool_use_error>", True)


def test_an_edit_and_a_multiedit_of_one_text_not_found_are_one_question():
    """MultiEdit is a batch of Edits of one file, refused as an Edit is: the same old text sent through Edit, then
    MultiEdit, then Edit again, each "not found", with a re-read between, is one question asked three times
    (lushanoperera in cc-am: the wrong indentation kept through both tools). The same three tries of three different
    texts are three questions."""
    old = "\tif (!is_admin() &&\n\t    in_array('service_cat', $taxonomies) &&"

    def edit(tool: str, text: str) -> tuple[str, dict[str, Any], tuple[str, bool]]:
        args: dict[str, Any] = {"file_path": PAGE, "old_string": text, "new_string": "x"}
        if tool == "MultiEdit":
            args = {"file_path": PAGE, "edits": [{"old_string": text, "new_string": "x"}]}
        return (tool, args, _not_found(text))

    messages = [
        [edit("Edit", old)],
        [_read(14)],
        [edit("MultiEdit", old + "\n\t\t// cache")],
        [_read(15)],
        [edit("Edit", old)],
    ]
    (f,) = [f for f in _found(messages) if f[STUCK]]
    assert f[REPEATS] == 3 and (f[FIRST], f[LAST]) == (0, 4)
    others = [[edit(t, f"class-{i}")] for i, t in enumerate(("Edit", "MultiEdit", "Edit"))]
    assert [f for f in _found(others) if f[STUCK]] == []


def test_edits_of_different_old_texts_not_found_are_different_questions():
    """A sweep of replace-all edits of one file, each for another class name, each "String to replace not found":
    every old text asks whether another string is in the file, as another search pattern does, so nothing was retried
    (RickH555 in cc-o: four classes absent from Recharge.tsx)."""

    messages = [
        [
            (
                "Edit",
                {"file_path": PAGE, "old_string": old, "new_string": "bg-surface", "replace_all": True},
                _not_found(old),
            )
        ]
        for old in ("bg-white/[0.06]", "bg-white/[0.02]", "bg-[#1a1d21]", "bg-[#111111]")
    ]
    assert [f for f in _found(messages) if f[STUCK]] == []


def test_near_identical_calls_sent_together_are_one_attempt_not_drift():
    """Three requests that differ by one id, sent in one message and answered alike, are a batch over three objects
    the agent asked about at once, not a retry: none saw another's answer. Sent one message after another, the same
    three calls retried with the answer in hand are drift."""
    answer = ('{"errors":[{"message":"Field \\"name\\" of required type \\"String!\\" was not provided."}]}', False)

    def post(i: int) -> tuple[str, dict[str, Any], tuple[str, bool]]:
        body = f'{{"query":"mutation {{ saveEndpoint(input: {{ id: \\"endpoint{i}x\\", idleTimeout: 1800 }}) }}"}}'
        command = f"curl -s -X POST https://api.example.com/graphql -d '{body}'"
        return ("Bash", {"command": command}, answer)

    assert [f for f in _found([[post(i) for i in range(3)]]) if f[STUCK]] == []
    (f,) = _found([[post(i)] for i in range(3)])
    assert f[KIND] == "drift" and f[STUCK] and f[REPEATS] == 3


DENIED = (
    "Permission to use {} has been denied. IMPORTANT: You *may* attempt to accomplish this action using other tools."
)
APP = "C:/Users/u/shop/App.tsx"


def _denied(tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    return (tool, args, (DENIED.format(tool), True))


def _look(offset: int) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    return ("Read", {"file_path": APP, "offset": offset, "limit": 50}, (f"{offset}→ import React", False))


def test_one_change_refused_for_permission_through_several_tools_is_one_blind_retry():
    """The same change of App.tsx denied through Edit, an MCP edit_file and `sed -i` (the file spelt three ways),
    then sent again through the tools already refused, only reads in between: one wall, hit seven times."""
    edit = _denied("Edit", {"file_path": APP, "old_string": "'home'", "new_string": "'home' | 'ai'"})
    mcp = _denied("mcp__filesystem__edit_file", {"path": APP, "edits": [{"oldText": "'home'", "newText": "x"}]})
    sed = _denied("Bash", {"command": "sed -i \"s/'home'/'ai'/\" \"/c/Users/u/shop/App.tsx\""})
    sed2 = _denied("Bash", {"command": "sed -i '37 a const Ai = 1;' /mnt/c/Users/u/shop/App.tsx"})
    messages = [[edit], [mcp], [sed], [_look(1)], [sed2], [edit], [_look(100)], [_look(200)], [sed2], [mcp]]
    (f,) = [f for f in _found(messages) if f[STUCK]]
    assert (f[FIRST], f[LAST], f[REPEATS]) == (0, 9, 7)
    assert "calls on App.tsx refused for permission 7×" in f[WHY]


def test_each_tool_tried_once_as_the_refusal_invites_is_no_loop():
    """Two files' changes denied as one batch of Edits, then one of Writes, then one of `cat >` heredocs: each tool
    tried once per file, as "you may attempt ... using other tools" invites, and none sent again after its refusal."""
    files = ["/repo/a/CLAUDE.md", "/repo/b/CLAUDE.md"]
    edits = [_denied("Edit", {"file_path": f, "old_string": "x", "new_string": "y"}) for f in files]
    writes = [_denied("Write", {"file_path": f, "content": "y"}) for f in files]
    heredocs = [_denied("Bash", {"command": f"cat > {f[len('/repo/') :]} << 'E'\ny\nE"}) for f in files]
    assert [f for f in _found([edits, writes, heredocs]) if f[STUCK]] == []


def test_changes_of_different_files_refused_in_turn_are_no_loop():
    """Three files, each change denied once through Edit and once through `sed -i`: different objects."""
    messages = []
    for name in ("a.py", "b.py", "c.py"):
        messages += [
            [_denied("Edit", {"file_path": f"/repo/{name}", "old_string": "x", "new_string": "y"})],
            [_denied("Bash", {"command": f"sed -i 's/x/y/' /repo/{name}"})],
        ]
    assert [f for f in _found(messages) if f[STUCK]] == []


def test_one_file_tried_once_per_tool_is_no_loop_but_a_tool_sent_again_is():
    """Edit, then Write, then a `cat >` heredoc of one file, each refused once: the tools the refusal invites, tried
    in turn. An Edit sent again after its refusal, then the others together, is the retry."""
    edit = _denied("Edit", {"file_path": "/repo/NOTES.md", "old_string": "a", "new_string": "b"})
    write = _denied("Write", {"file_path": "/repo/NOTES.md", "content": "b"})
    heredoc = _denied("Bash", {"command": "cat > /repo/NOTES.md << 'E'\nb\nE"})
    mcp = _denied("mcp__filesystem__write_file", {"path": "/repo/NOTES.md", "content": "b"})
    assert [f for f in _found([[edit], [write], [heredoc]]) if f[STUCK]] == []
    (f,) = [f for f in _found([[edit], [edit], [write, heredoc, mcp]]) if f[STUCK]]
    assert f[REPEATS] == 5 and "calls on NOTES.md refused for permission" in f[WHY]


def test_refusals_of_different_files_are_not_linked_by_prose():
    """Heredocs of three notes whose prose shares "e.g." and "os.path", each refused: no word of prose names a file."""
    notes = [_denied("Bash", {"command": f"cat > notes/{n}.md << 'E'\nUse os.path, e.g. for {n}.\nE"}) for n in "abc"]
    assert [f for f in _found([[c] for c in notes]) if f[STUCK]] == []


def test_a_call_on_the_current_folder_refused_again_and_again_is_one_loop():
    """The same Glob of `.` refused three times: `.` names no file to link by, and the identical call is the retry."""
    glob = _denied("Glob", {"pattern": "**/*.py", "path": "."})
    assert [f[REPEATS] for f in _found([[glob], [glob], [glob]]) if f[STUCK]] == [3]


PATCH_NOT_FOUND = "apply_patch verification failed: Failed to find expected lines in /repo/docs/report.txt:\n{lines}"


def _patch(old: str, new: str, later: str = "") -> str:
    """A Codex patch of docs/report.txt replacing ``old`` by ``new``, with a ``later`` hunk the tool never reaches
    when the first one does not match."""
    hunk = f"@@\n-{old}\n+{new}\n"
    more = f"@@\n-{later}\n+{later} (updated)\n" if later else ""
    return f"*** Begin Patch\n*** Update File: docs/report.txt\n{hunk}{more}*** End Patch"


def _look_report(i: int) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    """A read of docs/report.txt through the shell, as Codex reads between its patches."""
    return (
        "shell",
        {"command": ["bash", "-lc", f"sed -n '{i},{i + 40}p' docs/report.txt"]},
        (f"{i}: | a | b |", False),
    )


def _applied(tool: str, patch: str, echo: str) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    args = {"input": patch} if tool == "apply_patch" else {"command": ["apply_patch", patch]}
    return (tool, args, (PATCH_NOT_FOUND.format(lines=echo), True))


def test_a_patch_resent_against_lines_it_cannot_find_is_one_blind_retry():
    """Codex's patch whose first hunk's lines are not in the file (a mojibake row the reads do not show), sent three
    times with a read between, each answered "Failed to find expected lines" quoting the same lines: the same
    question asked again, though each try rewrites a later hunk the tool never reached. As Codex's apply_patch tool
    and as the shell command Codex intercepts (``["apply_patch", "*** Begin Patch…"]``): one stuck episode each."""
    row = "| chat | \u00e2\u0153\u2026 Success |"
    for tool in ("apply_patch", "shell"):
        messages = []
        for i, later in enumerate(("## Next steps", "## Risks and next steps", "## Summary, then the open items")):
            messages += [[_look_report(10 * i)], [_applied(tool, _patch(row, "| chat | ok |", later), row)]]
        (f,) = [f for f in _found(messages) if f[STUCK]]
        assert (f[FIRST], f[LAST], f[REPEATS]) == (1, 5, 3), tool
        assert "same error" in f[WHY]


def test_patches_of_one_file_for_different_lines_not_found_are_different_questions():
    """Three patches of one file, each for other lines, each "Failed to find expected lines" quoting its own: three
    questions (as Edit's "String to replace not found" for three old texts), no loop, through either tool."""
    for tool in ("apply_patch", "shell"):
        messages = []
        for i, old in enumerate(("## Status: draft", "| owner | nobody |", "Last updated: never")):
            messages += [[_look_report(10 * i)], [_applied(tool, _patch(old, old.upper()), old)]]
        assert [f for f in _found(messages) if f[STUCK]] == [], tool


def test_old_texts_that_differ_in_a_number_are_different_questions():
    """ "Not found" for ``port: 3000``, then ``port: 5000``, then ``port: 8000``: three texts, three questions, though
    the answers differ only in a number (the comparison of results masks numbers; the quoted text may not)."""
    for tool in ("apply_patch", "shell"):
        messages = [[_applied(tool, _patch(f"port: {n}", "port: 9000"), f"port: {n}")] for n in (3000, 5000, 8000)]
        assert [f for f in _found(messages) if f[STUCK]] == [], tool
    edits = [
        [("Edit", {"file_path": PAGE, "old_string": f"text-gray-{n}", "new_string": "x"}, _not_found(f"text-gray-{n}"))]
        for n in (100, 200, 300)
    ]
    assert [f for f in _found(edits) if f[STUCK]] == []


def test_anchors_not_found_are_different_questions():
    """Codex's "Failed to find context '<anchor>'" answers the anchor sent: three anchors, three questions."""
    for tool in ("apply_patch", "shell"):
        messages = []
        for anchor in ("def load():", "class Store:", "def save(self):"):
            patch = (
                f"*** Begin Patch\n*** Update File: src/store.py\n@@ {anchor}\n-    pass\n+    return\n*** End Patch"
            )
            args = {"input": patch} if tool == "apply_patch" else {"command": ["apply_patch", patch]}
            err = f"apply_patch verification failed: Failed to find context '{anchor}' in /repo/src/store.py"
            messages.append([(tool, args, (err, True))])
        assert [f for f in _found(messages) if f[STUCK]] == [], tool


def test_a_patch_refused_again_after_a_fix_in_between_is_no_blind_retry():
    """The same failing patch (its later hunk varied), with a successful change between each try: each retry follows
    a fix, so it is no blind retry, through either tool."""
    row = "| chat | \u00e2 Success |"
    for tool in ("apply_patch", "shell"):
        messages = []
        for i, later in enumerate(("## One", "## Two", "## Three")):
            fix = _patch(f"line {i}", f"line {i} fixed")
            ok = ("Success. Updated the following files:\nM docs/report.txt", False)
            messages.append(
                [(tool, {"input": fix} if tool == "apply_patch" else {"command": ["apply_patch", fix]}, ok)]
            )
            messages.append([_applied(tool, _patch(row, "| chat | ok |", later), row)])
        assert [f for f in _found(messages) if f[STUCK]] == [], tool


def test_an_edit_refused_in_between_is_no_fix():
    """The same Edit refused "String to replace not found" three times (its old text carries literal escapes), with a
    Read and two other Edits between that the harness refused too ("Found 21 matches…", in its error envelope): a
    refused edit changed nothing, so nothing was fixed between the retries (lllttt06 in cc-ab)."""
    old = "static ValueAndUnit formatAngle(double? v) {\\n  return x;\\n}"
    same = ("Edit", {"file_path": PAGE, "old_string": old, "new_string": "y"}, _not_found(old))
    many = (
        "<tool_use_error>Found 21 matches of the string to replace, but replace_all is false. To replace all "
        "occurrences, set replace_all to true.</tool_use_error>",
        True,
    )
    other = ("Edit", {"file_path": PAGE, "old_string": "  }", "new_string": "  };"}, many)
    (f,) = [f for f in _found([[same], [_read(84)], [same], [other], [other], [same]]) if f[STUCK]]
    assert (f[FIRST], f[LAST], f[REPEATS]) == (0, 5, 3)


BLOCK = "\n".join(
    [
        "  ValueAndUnit _formatVelocity({",
        "    required UnitType unitsType,",
        "    required String language,",
        "    required double value,",
        "  }) {",
        "    const kmToMileRatio = 0.621371;",
        "    final isEnglish = language == 'en';",
        "    return switch ((unitsType, isEnglish)) {",
        "      (UnitType.mphInch, true) => ValueAndUnit(value.toStringAsFixed(1), 'mph'),",
        "      (UnitType.kmhCm, true) => ValueAndUnit((value * kmToMileRatio).toStringAsFixed(1), 'km/h'),",
        "    };",
        "  }",
    ]
)


def _edit_block(old: str) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    return ("Edit", {"file_path": PAGE, "old_string": old, "new_string": ""}, _not_found(old))


def test_an_edit_resent_with_its_old_text_barely_changed_is_one_blind_retry():
    """An Edit of a block the file does not hold as sent (lllttt06 in cc-ab: literal '\\n' in the old text), resent
    with a line of context more, then with a closing brace more, with reads and an edit of another text (also not
    found) between: the same old text barely changed, the same refusal, no fix, so one blind retry of 3."""
    messages = [
        [_edit_block(BLOCK)],
        [_read(390)],
        [_edit_block("  }\n\n" + BLOCK)],
        [_edit_block("    };\n  }\n}")],  # another question, refused too: no fix
        [_read(410)],
        [_edit_block("  }\n\n" + BLOCK + "\n}")],
    ]
    (f,) = [f for f in _found(messages) if f[STUCK]]
    assert (f[FIRST], f[LAST], f[REPEATS]) == (0, 5, 3)
    assert "same error" in f[WHY]


def test_an_old_text_changed_only_in_whitespace_or_in_a_number_asks_again_differently():
    """The same block resent with trailing spaces, then another indentation: each try matches the file's whitespace
    another way, a fix of the text, not the same text again. Nor is the block with one number changed."""
    spaced = [BLOCK, BLOCK.replace("{\n", "{ \n"), BLOCK.replace("\n    ", "\n\t")]
    assert [f for f in _found([[_edit_block(old)] for old in spaced]) if f[STUCK]] == []
    numbered = [BLOCK.replace("0.621371", n) for n in ("0.621371", "0.62", "1.609")]
    assert [f for f in _found([[_edit_block(old)] for old in numbered]) if f[STUCK]] == []


def test_a_patch_resent_with_its_old_lines_barely_changed_is_one_blind_retry():
    """Codex's patch of one report line the file holds with other bytes (a mojibake heading), resent with the quotes
    escaped and with one line of context less, each "Failed to find expected lines" quoting what it sent (akinori
    and Zo-Qore in cx-i and cx-j): one blind retry, through either tool."""
    line = '<div className="flex items-center justify-between mb-3"><h2 className="text-lg font-semibold">Report'
    tries = [f"{line}\n  <button>", line.replace('"', '\\"') + "\n  <button>", line]
    for tool in ("apply_patch", "shell"):
        messages = []
        for i, old in enumerate(tries):
            messages += [[_look_report(10 * i)], [_applied(tool, _patch(old, old + " (new)"), old)]]
        (f,) = [f for f in _found(messages) if f[STUCK]]
        assert (f[FIRST], f[LAST], f[REPEATS]) == (1, 5, 3), tool


def test_the_same_command_failing_among_other_failures_is_one_retry():
    """A shell whose folder is gone (umaionigiri in cc-z): the same `git worktree list` in the repository fails with
    a bare exit code three times, its flags varied, with other commands failing between (`pwd`, `echo`). A failure
    between two tries changed nothing, so the tries are one retry, not three."""
    gone = ("Exit code 1", True)
    calls = [
        ("Bash", {"command": "cd /repo && git worktree list"}, gone),
        ("Bash", {"command": "pwd"}, gone),
        ("Bash", {"command": "cd /repo && git worktree list -v"}, gone),
        ("Bash", {"command": "echo hello"}, gone),
        ("Bash", {"command": "cd /repo && git worktree list --porcelain"}, gone),
    ]
    (f,) = [f for f in _found([[c] for c in calls]) if f[STUCK]]
    assert (f[FIRST], f[LAST], f[REPEATS]) == (0, 4, 3)


def test_refusals_of_commands_over_one_glob_name_no_one_file():
    """Different commands over `"*.tsx"` files, each refused for permission: a glob is a pattern over many files,
    not one target, so nothing links them (RickH555 in cc-o). A shell command's files are those it names as files
    (``semantics.named_paths``), not every word its parse keeps as a path."""
    cmds = [
        'for d in pages lib; do find "./$d" -name "*.tsx" | wc -l; done',
        'find . -name "*.tsx" -newer package.json',
        'find src -name "*.tsx" | xargs grep -l useEffect',
    ]
    assert [f for f in _found([[_denied("Bash", {"command": c})] for c in cmds]) if f[STUCK]] == []


def _build(output: str, code: str = "Exit code: 124\nWall time: 120 seconds\nOutput:\n") -> tuple:
    args = {"command": "cd /repo/build && cmake --build . -j 4", "timeout_ms": 120000}
    return ("shell_command", args, (code + output, True))


def test_a_run_killed_at_its_time_limit_that_got_further_is_progress():
    """The same build killed at the tool's 120 s limit three times, each further on (tvvshow in cx-k), or a test
    suite's limit raised each time with more output (Zo-Qore in cx-j): a cut run's result is what it printed before
    the cut, and it changed. The same cut at the same place each time is the same result again."""
    steps = ["[ 35%] Building CXX object checkpoint.o", "[ 59%] Building CUDA object GPUEngine.cu.o", "[ 97%] Linking"]
    progress = [[_build("[ 18%] Built target secpk1\n" + s)] for s in steps]
    assert [f for f in _found(progress) if f[STUCK]] == []
    suite = [
        [
            (
                "shell",
                {"command": ["npm", "run", "test:e2e"], "timeout_ms": ms},
                (f"command timed out after {ms} ms\n{out}", True),
            )
        ]
        for ms, out in ((360000, "> e2e\n1 passed"), (600000, "> e2e\n1 passed\n2 passed"), (900000, "> e2e\n3 passed"))
    ]
    assert [f for f in _found(suite) if f[STUCK]] == []
    same = [[_build("[ 18%] Built target secpk1\n[ 35%] Building CXX object checkpoint.o")] for _ in range(3)]
    assert [f[REPEATS] for f in _found(same) if f[STUCK]] == [3]
    error = "\nGPUMath.h(350): error: identifier limbStride is undefined"
    failed = "Exit code: 2\nWall time: 45 seconds\nOutput:\n"  # a build that failed: its error says the same
    other = [[_build("[ 18%] Built target secpk1\n" + s + error, failed)] for s in steps]
    assert [f[REPEATS] for f in _found(other) if f[STUCK]] == [3]


def test_a_permission_prompt_that_failed_is_a_refusal():
    """Claude Code's "Tool permission request failed: Error: Stream closed": the prompt asking the user failed, so the
    call never ran, as a denied one (panwenzhuo2016 in cc-ae: the same Edit seven times, then the file as a Write,
    twice). The change resent through another tool meets the same wall: one stuck run."""
    closed = ("Tool permission request failed: Error: Stream closed", True)
    path = "/repo/.claude/commands/release.md"
    edit = ("Edit", {"file_path": path, "old_string": "## Steps", "new_string": "## Steps\n1. tag"}, closed)
    write = ("Write", {"file_path": path, "content": "# Release\n## Steps\n1. tag"}, closed)
    (f,) = [f for f in _found([[edit], [_look(1)], [write], [write]]) if f[STUCK]]
    assert f[REPEATS] == 3 and "refused for permission" in f[WHY]


def test_openhands_old_texts_not_found_are_compared_by_what_they_quote():
    """OpenHands' refusal names the old text in backticks inside its own sentence ("old_str `…` did not appear
    verbatim in …"): three different short old texts are three questions, though the sentences around them are
    nearly the same; the same old text sent again is the retry."""

    def replace(old: str) -> tuple[str, dict[str, Any], tuple[str, bool]]:
        err = f"ERROR:\nNo replacement was performed, old_str `{old}` did not appear verbatim in /workspace/app.py."
        args = {"command": "str_replace", "path": "/workspace/app.py", "old_str": old, "new_str": "x"}
        return ("str_replace_editor", args, (err, True))

    different = [[replace(old)] for old in ("def load(self):", "class Store:", "return cache")]
    assert [f for f in _found(different) if f[STUCK]] == []
    same = [[replace("def load(self):")], [replace("def load(self) :")], [replace("def load(self):")]]
    assert [f[REPEATS] for f in _found(same) if f[STUCK]] == [3]


def test_a_change_of_another_file_is_no_fix_for_a_change_refused_for_its_own_text():
    """The same Write refused "File has not been read yet" three times, a `mkdir -p` of its folder between (DaniloTito01
    in cc-n); the same malformed patch of README.md refused "invalid hunk" three times, another file's patch landing
    between (kasumigaokasama in cx-m): the refusal answers that call and that file, so only a change of that file
    could change it. A change of the file itself between two tries is a fix."""
    page = "/repo/src/hooks/use-toast.ts"
    unread = ("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", True)
    write = ("Write", {"file_path": page, "content": "export const useToast = () => {}"}, unread)
    mkdir = ("Bash", {"command": "mkdir -p /repo/src/hooks"}, ("", False))
    glob = ("Glob", {"pattern": "**/use-toast*"}, ("No files found", False))
    (f,) = [f for f in _found([[write], [glob], [write], [mkdir], [write]]) if f[STUCK]]
    assert (f[FIRST], f[LAST], f[REPEATS]) == (0, 4, 3)
    touch = ("Bash", {"command": f"touch {page}"}, ("", False))
    copy = ("Bash", {"command": f"cp /repo/templates/toast.ts {page}"}, ("", False))
    assert [f for f in _found([[write], [touch], [write], [copy], [write]]) if f[STUCK]] == []
    readme = "*** Begin Patch\n*** Add File: README.md\n+# Title\n\nno plus sign\n*** End Patch"
    hunk = ("error: invalid hunk at line 4, '' is not a valid hunk header", True)
    bad = ("shell", {"command": ["apply_patch", readme]}, hunk)
    other = "*** Begin Patch\n*** Add File: docs/HOWTO.txt\n+# How to\n*** End Patch"
    ok = (
        "shell",
        {"command": ["apply_patch", other]},
        ("Success. Updated the following files:\nA docs/HOWTO.txt", False),
    )
    (f,) = [f for f in _found([[bad], [bad], [ok], [bad]]) if f[STUCK]]
    assert (f[FIRST], f[LAST], f[REPEATS]) == (0, 3, 3)
