#!/usr/bin/env python3
"""Write loopscope's own sample transcripts (pi, Claude Code, Codex, OpenAI messages, SWE-agent, mini-swe-agent,
OpenHands, Inspect, Gemini CLI, opencode), their README and ``.expected.json``. Deterministic: fixed ids, seeds and
timestamps, so a re-run reproduces every byte.

    python sample_data/make_samples.py            # rewrite sample_data/ in place
    python sample_data/make_samples.py --out DIR  # write elsewhere (the test compares the two)

Each scenario declares its loops by naming the calls that form them; ``loopcheck.py`` recomputes every loop signal on
the rendered calls and stops the run if any signal fires outside a declared episode, so the README cannot lie.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True  # no __pycache__ inside sample_data (ingest would list it)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from contents import *  # noqa: E402,F403 - the file texts and tool outputs the scenarios quote
from loopcheck import Benign, Episode, check  # noqa: E402 - after the sys.path set-up above
from transcript_writer import (  # noqa: E402 - after the sys.path set-up above
    Call,
    Recorder,
    Session,
    Step,
    Turn,
    inspect_eval_zip,
    render,
    render_inspect_sample,
    render_opencode,
)

HERE = Path(__file__).resolve().parent


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)


# --- neutral call helpers ---------------------------------------------------------------------------------------------


def sh(cmd: str, out: str = "", code: int = 0, desc: str = "Run command", secs: float = 0.8, **kw: Any) -> Call:
    return Call("sh", {"cmd": cmd, "desc": desc, **kw}, out, code, secs=secs)


def read(path: str, content: str, code: int = 0, **kw: Any) -> Call:
    return Call("read", {"path": path, **kw}, content, code, secs=0.05)


def edit(path: str, old: str, new: str, code: int = 0, **kw: Any) -> Call:
    return Call("edit", {"path": path, "old": old, "new": new, **kw}, "", code, secs=0.08)


def write(path: str, content: str) -> Call:
    return Call("write", {"path": path, "content": content}, "", secs=0.06)


def grep(pattern: str, path: str, files: str = "") -> Call:
    return Call("grep", {"pattern": pattern, "path": path}, files, secs=0.3)


def tool(name: str, arguments: dict[str, Any], out: str, secs: float = 0.4) -> Call:
    return Call("tool", {"name": name, "arguments": arguments}, out, secs=secs)


def step(text: str = "", *calls: Call, thinking: str = "", secs: float = 4.0, aborted: bool = False) -> Step:
    return Step(text, list(calls), thinking, aborted, secs)


@dataclass
class Sample:
    session: Session
    path: str  # relative to sample_data/
    summary: str
    episodes: list[Episode] = field(default_factory=list)
    benign: list[Benign] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)  # the not-a-loop cases it covers (README coverage table)
    sample_id: str = ""  # Inspect: the sample's id inside its .eval log


# --- the sessions -----------------------------------------------------------------------------------------------------

WEBSHOP, INFRA, BILLING, DOCS = (
    "/home/dana/src/webshop",
    "/home/dana/src/infra",
    "/home/dana/src/billing-api",
    "/home/dana/src/docs-site",
)


def pi_path(cwd: str, start: str, sid: str) -> str:
    folder = "--" + cwd.strip("/").replace("/", "-") + "--"
    stamp = start.replace(":", "-").replace(".", "-")
    return f"pi/{folder}/{stamp}Z_{sid}.jsonl"


def pi_session(sid: str, cwd: str, start: str, model: str, turns: list[Turn], seed: int) -> Session:
    return Session("pi", sid, cwd, at(start), model, turns, seed=seed)


def pi_samples() -> list[Sample]:
    out: list[Sample] = []

    # 1. healthy edit -> build cycle
    build = "npm run build"
    b1, b2, b3, b4 = (sh(build, o, c, secs=9.5) for o, c in ((TSC_3, 2), (TSC_2, 2), (TSC_1, 2), (VITE_OK, 0)))
    sid, start = "0b6c2f0e-5a7d-4c1e-9d39-2f7f1a8e4c11", "2026-03-02T09:14:07.512"
    s = pi_session(
        sid,
        WEBSHOP,
        start,
        "claude-sonnet-4-5",
        [
            Turn(
                "The build broke after yesterday's cart refactor. Can you get `npm run build` green again?",
                [
                    step("I'll run the build to see what fails.", b1),
                    step("Three type errors. Starting with the cart module.", read("src/cart/cart.ts", CART_TS)),
                    step(
                        "`CartLine.qty` was renamed to `quantity` in the refactor; updating the subtotal.",
                        edit("src/cart/cart.ts", "sum + line.price * line.qty", "sum + line.price * line.quantity"),
                    ),
                    step("", b2),
                    step(
                        "The totals helper reads the old field as well.",
                        edit("src/cart/totals.ts", "l.price * l.qty", "l.price * l.quantity"),
                    ),
                    step("", b3),
                    step(
                        "Last one: the summary component used a removed `lineCount` getter.",
                        edit("src/checkout/Summary.tsx", "{cart.lineCount} items", "{cart.lines.length} items"),
                    ),
                    step("", b4),
                    step(
                        "The build is green again. Three places still used the pre-refactor names: `qty` in "
                        "`cart.ts` and `totals.ts`, and `lineCount` in `Summary.tsx`."
                    ),
                ],
            ),
            Turn(
                "Nice. Run the unit tests too before I push.",
                [
                    step("", sh("npm test", JEST_ALL, secs=3.1)),
                    step("All 30 unit tests pass across 4 files."),
                ],
            ),
        ],
        101,
    )
    out.append(
        Sample(
            s,
            pi_path(WEBSHOP, start, sid),
            "Fixes three type errors: build, edit, build, edit, build, edit, build; then runs the unit tests.",
            benign=[
                Benign(
                    "window",
                    [b1, b2, b3, b4],
                    "`npm run build` runs 4 times within 8 calls, but each run follows a different "
                    "edit that succeeded and its output changes (3, 2, 1, 0 errors): progress, not "
                    "a loop. Expected: no finding.",
                )
            ],
            cases=["healthy edit -> build cycle (no loop)"],
        )
    )

    # 2. identical failing test run, 7 times
    t = "npm test -- checkout"
    runs = [sh(t, CHECKOUT_FAIL, 1, secs=4.2) for _ in range(7)]
    texts = [
        "Let me reproduce it locally.",
        "Retrying in case the connection failure was transient.",
        "",
        "",
        "Still failing; running the suite once more to see whether it is stable.",
        "",
        "",
    ]
    sid, start = "5d0e9a41-7c3b-4f6a-8e2d-0c4b9f3a7e25", "2026-03-03T14:02:51.208"
    s = pi_session(
        sid,
        WEBSHOP,
        start,
        "claude-sonnet-4-5",
        [
            Turn(
                "CI says the checkout tests fail. Can you fix them?",
                [step(x, r) for x, r in zip(texts, runs)]
                + [
                    step(
                        "The checkout tests keep failing with `ECONNREFUSED 127.0.0.1:5432`: the test database is "
                        "not reachable from this machine."
                    )
                ],
            ),
            Turn(
                "The test database isn't running. Start it with docker compose and try again.",
                [
                    step(
                        "",
                        sh(
                            "docker compose up -d postgres",
                            "[+] Running 2/2\n \u2714 Network webshop_default  "
                            "Created\n \u2714 Container webshop-postgres-1  Started",
                            secs=6.0,
                        ),
                    ),
                    step("", sh(t, CHECKOUT_PASS, secs=4.8)),
                    step("With Postgres up, all 5 checkout tests pass. Nothing in the code needed fixing."),
                ],
            ),
        ],
        102,
    )
    out.append(
        Sample(
            s,
            pi_path(WEBSHOP, start, sid),
            "Runs the same failing `npm test -- checkout` 7 times in a row (database down); the user "
            "starts the database in the next prompt.",
            [Episode("streak", runs, True, note="identical call, identical error every time")],
            notes=[
                "The 8th run of the same command is in user turn 1 and passes: a new prompt, not part of the streak."
            ],
        )
    )

    # 3. drift: sleep-wrapped health poll; then an aborted turn
    url = "http://staging-api.internal:8080/healthz"
    polls = [
        sh(f"curl -sS --retry 3 {url}", CURL_ERR, 7, secs=0.1),
        sh(f"sleep 5 && curl -sS --retry 3 {url}", CURL_ERR, 7, secs=5.1),
        sh(f"sleep 10 && curl -sS --retry 3 {url}", CURL_ERR, 7, secs=10.1),
        sh(f"sleep 10 && curl -sS --retry 3 --max-time 10 {url}", CURL_ERR, 7, secs=10.1),
        sh(f"sleep 30 && curl -sS --retry 5 --max-time 10 {url}", CURL_ERR, 7, secs=30.2),
    ]
    aborted = step(
        "Checking the pods and the API logs.",
        sh("kubectl -n staging get pods -o wide"),
        sh("kubectl -n staging logs deploy/api --tail=100"),
        aborted=True,
    )
    sid, start = "8f41c7d2-3b9e-4a05-b6f1-d27e5c0a9b38", "2026-03-04T10:31:12.044"
    s = pi_session(
        sid,
        INFRA,
        start,
        "gpt-5.1-codex",
        [
            Turn(
                "Deploy the staging stack and check that the API comes up healthy.",
                [
                    step("Deploying with the Makefile target.", sh("make deploy-staging", DEPLOY_OUT, secs=41.0)),
                    step("Checking the health endpoint.", polls[0]),
                    step("", polls[1]),
                    step("", polls[2]),
                    step("Giving it more time and a longer timeout.", polls[3]),
                    step("", polls[4]),
                    step("The API still refuses connections after five attempts over about a minute."),
                ],
            ),
            Turn("Look at the pod logs instead of polling.", [aborted]),
            Turn(
                "Sorry, hit Esc by accident. Go on, but only the api deployment logs please.",
                [
                    step("", sh("kubectl -n staging logs deploy/api --tail=100", API_LOGS, secs=1.2)),
                    step(
                        "The API exits at startup because `DATABASE_URL` is not set. Checking the deployment manifest.",
                        read("k8s/staging/api-deployment.yaml", DEPLOY_YAML),
                    ),
                    step(
                        "",
                        edit(
                            "k8s/staging/api-deployment.yaml",
                            "            - name: LOG_LEVEL\n              value: info",
                            "            - name: LOG_LEVEL\n              value: info\n"
                            "            - name: DATABASE_URL\n"
                            "              valueFrom:\n                secretKeyRef: {name: api-db, key: url}",
                        ),
                    ),
                    step("", sh("kubectl apply -f k8s/staging/api-deployment.yaml", "deployment.apps/api configured")),
                    step(
                        "",
                        sh(
                            "kubectl -n staging rollout status deploy/api --timeout=120s",
                            'Waiting for deployment "api" rollout to finish: 1 of 2 updated replicas are available...\n'
                            'deployment "api" successfully rolled out',
                            secs=34.0,
                        ),
                    ),
                    step("", sh(f"curl -sS --retry 3 {url}", '{"status":"ok","version":"2.7.3"}', secs=0.1)),
                    step(
                        "Fixed: the deployment was missing `DATABASE_URL`. I added it from the `api-db` secret, rolled "
                        "out, and `/healthz` now answers `ok`."
                    ),
                ],
            ),
        ],
        103,
    )
    out.append(
        Sample(
            s,
            pi_path(INFRA, start, sid),
            "Deploys, then polls a dead health endpoint while drifting the command (`sleep` wrapper, "
            "extra flags); an aborted turn leaves 2 calls without results.",
            [
                Episode(
                    "drift",
                    polls,
                    True,
                    note="sleep 5/10/30 wrapper, --max-time and --retry 5 added; same curl error each time",
                )
            ],
            notes=[
                "User turn 1 was aborted (Esc): 2 `bash` calls have no result. Not a loop.",
                "The final health check in user turn 2 repeats the first poll's command and succeeds: "
                "a new prompt, not part of the drift.",
            ],
            cases=["aborted pi turn: calls without results"],
        )
    )

    # 4. nested calls inside codemode scripts
    kids_ok = [read(p, c) for p, c in SETTINGS.items()]
    batch = Call(
        "script",
        {
            "code": (
                "const paths = ['services/invoicing/settings.py', 'services/dunning/settings.py', "
                "'services/webhooks/settings.py'];\nconst files = await Promise.allSettled(paths.map((path) => "
                "tools.read({ path })));\nreturn files.map((f, i) => `${paths[i]}: ${f.status}`).join('\\n');"
            )
        },
        "services/invoicing/settings.py: fulfilled\nservices/dunning/settings.py: fulfilled\n"
        "services/webhooks/settings.py: fulfilled",
        secs=0.4,
        children=kids_ok,
    )
    kids_loop = [read("config/legacy.yaml", LEGACY_YAML) for _ in range(5)]
    for k in kids_loop:
        k.secs = 2.0
    poll = Call(
        "script",
        {
            "code": (
                "// wait until the loader stops regenerating the legacy file\n"
                "for (let attempt = 0; attempt < 5; attempt++) {\n"
                "  const text = await tools.read({ path: 'config/legacy.yaml' });\n  if (!text.includes('DEPRECATED')) "
                "return 'rewritten';\n  await sleep(2000);\n}\nreturn 'unchanged after 5 polls';"
            )
        },
        "unchanged after 5 polls",
        secs=0.2,
        children=kids_loop,
    )
    sid, start = "c3a9e1f4-6d2b-4e8a-a7c5-91b0f4d6e203", "2026-03-05T16:20:44.781"
    s = pi_session(
        sid,
        BILLING,
        start,
        "claude-sonnet-4-5",
        [
            Turn(
                "Which services still read config/legacy.yaml? I want to delete it.",
                [
                    step("I'll read the three service settings modules in one script.", batch),
                    step(
                        "Invoicing and dunning load it through `load_legacy()`. I'll check whether something "
                        "regenerates the file at startup.",
                        poll,
                    ),
                    step(
                        "Two services still read `config/legacy.yaml`: `services/invoicing/settings.py` (invoice "
                        "prefix) and `services/dunning/settings.py` (retry schedule). Webhooks does not. Nothing "
                        "rewrites the file, so it can go once those two read `settings.toml`."
                    ),
                ],
            ),
        ],
        104,
    )
    out.append(
        Sample(
            s,
            pi_path(BILLING, start, sid),
            "Two `codemode` scripts: a healthy batch of 3 distinct reads, then a script that reads the same "
            "file 5 times inside one call.",
            [
                Episode(
                    "nested",
                    kids_loop,
                    True,
                    note="5 identical reads inside one codemode script (parentToolCallId), same content each time",
                )
            ],
            notes=["The first script's 3 nested reads are distinct: no finding."],
            cases=["nested calls in a script that are all distinct (no loop)"],
        )
    )

    # 5. failing edit retried blindly
    err_edits = [
        edit(
            "src/cart/totals.ts",
            "const subtotal = lines.reduce((sum, l) => sum + l.price * l.qty, 0);",
            "const subtotal = lines.reduce((sum, l) => sum + l.price * l.qty, 0);\n"
            "const loyalty = customer.isMember ? subtotal * 0.1 : 0;",
            1,
        ),
        edit(
            "src/cart/totals.ts",
            "export function computeTotal(cart: Cart): number {",
            "export function computeTotal(cart: Cart, member = false): number {",
            1,
        ),
        edit("src/cart/totals.ts", "return subtotal - discount;", "return subtotal - discount - loyaltyCut;", 1),
        edit("src/cart/totals.ts", "if (user.tier === 'gold') {", "if (user.tier === 'gold' || user.member) {", 1),
    ]
    sid, start = "e7b25d90-1f4c-4a3b-8c6e-5a9d0e2f7b46", "2026-03-06T11:05:33.930"
    s = pi_session(
        sid,
        WEBSHOP,
        start,
        "claude-sonnet-4-5",
        [
            Turn(
                "Apply the 10% loyalty discount for members in the cart totals.",
                [
                    step("Let me find where discounts are handled.", sh('rg -n "discount" src/cart', RG_DISCOUNT)),
                    step("I'll add the loyalty discount where the subtotal is computed.", err_edits[0]),
                    step("", err_edits[1]),
                    step("", err_edits[2]),
                    step("", err_edits[3]),
                    step(
                        "None of my guesses match the file. Reading it this time.",
                        read("src/cart/totals.ts", TOTALS_TS),
                    ),
                    step(
                        "",
                        edit(
                            "src/cart/totals.ts",
                            "  const items = cartSubtotal(cart);",
                            "  const gross = cartSubtotal(cart);\n  const items = customer.isMember ? gross * 0.9 : "
                            "gross;",
                        ),
                    ),
                    step(
                        "",
                        sh(
                            "npm test -- totals",
                            "\n> webshop@1.14.0 test\n> vitest run totals\n\n \u2713 "
                            "src/cart/totals.test.ts (7 tests) 8ms\n\n Test Files  1 passed (1)\n      Tests  7 passed "
                            "(7)",
                            secs=2.2,
                        ),
                    ),
                    step("Members now get 10% off the items total in `orderTotal()`; shipping is unchanged."),
                ],
            ),
        ],
        105,
    )
    out.append(
        Sample(
            s,
            pi_path(WEBSHOP, start, sid),
            "Four `edit` calls with guessed `oldText`, each failing with the same error, before the agent "
            "reads the file.",
            [
                Episode(
                    "failure",
                    err_edits,
                    True,
                    note="same tool, same error text; the arguments differ (not near-identical)",
                )
            ],
        )
    )

    # 6. window: the same read, again and again, between other calls
    rereads = [read("sidebars.js", SIDEBARS_JS) for _ in range(4)]
    sid, start = "a12f6b3e-9c80-4d57-b1e4-3f6a2d8c0e97", "2026-03-06T15:48:02.117"
    s = pi_session(
        sid,
        DOCS,
        start,
        "claude-sonnet-4-5",
        [
            Turn(
                "Add the new API reference pages (docs/api/*.md) to the sidebar.",
                [
                    step("Let me look at the current sidebar config.", rereads[0]),
                    step(
                        "",
                        sh(
                            "ls docs/api",
                            "authentication.md\nerrors.md\nintro.md\npagination.md\nrate-limits.md\nwebhooks.md",
                        ),
                    ),
                    step("Checking the existing structure again.", rereads[1]),
                    step(
                        "",
                        sh(
                            'grep -rn "sidebar_position" docs/api',
                            "docs/api/intro.md:2:sidebar_position: 1\ndocs/api/authentication.md:2:sidebar_position: 2",
                        ),
                    ),
                    step("", rereads[2]),
                    step("", sh("cat docusaurus.config.js", DOCS_CONF)),
                    step("Let me re-read the sidebar before editing it.", rereads[3]),
                    step("", write("sidebars.js", SIDEBARS_NEW)),
                    step(
                        "",
                        sh(
                            "npm run build",
                            '[SUCCESS] Generated static files in "build".\n[INFO] Use `npm run serve` '
                            "command to test your build locally.",
                            secs=14.0,
                        ),
                    ),
                    step("Added pagination, errors, rate-limits and webhooks under API; the site builds."),
                ],
            ),
        ],
        106,
    )
    out.append(
        Sample(
            s,
            pi_path(DOCS, start, sid),
            "Re-reads `sidebars.js` 4 times among other calls, getting the same content each time.",
            [Episode("window", rereads, True, note="not consecutive, not a cycle: 4 of the last 7 calls")],
        )
    )

    # 7. the user repeats a request across prompts
    e2e = "npm run test:e2e -- --grep smoke"
    sid, start = "f59d3c08-2e7a-4b61-9a4f-6c1e8b2d5a70", "2026-03-09T17:12:40.356"
    s = pi_session(
        sid,
        WEBSHOP,
        start,
        "claude-sonnet-4-5",
        [
            Turn("Run the e2e smoke tests.", [step("", sh(e2e, E2E_SMOKE, secs=6.3)), step("All 3 smoke tests pass.")]),
            Turn(
                "Run them again, I restarted the dev server.",
                [step("", sh(e2e, E2E_SMOKE, secs=6.1)), step("Still green: 3 of 3 passed.")],
            ),
            Turn(
                "One more time please, someone just deployed the API.",
                [step("", sh(e2e, E2E_SMOKE, secs=6.4)), step("3 passed again after the deploy.")],
            ),
        ],
        107,
    )
    out.append(
        Sample(
            s,
            pi_path(WEBSHOP, start, sid),
            "The user asks three times for the same test run; one identical call per prompt.",
            notes=[
                "The same call and result in 3 user turns: repeats across prompts are not one episode "
                "(every guard resets at a user prompt). Expected: no finding."
            ],
            cases=["user repeats the same request across prompts (no loop)"],
        )
    )
    return out


def claude_path(cwd: str, sid: str) -> str:
    return f"claude_code/{cwd.replace('/', '-')}/{sid}.jsonl"


def claude_samples() -> list[Sample]:
    out: list[Sample] = []
    sonnet = "claude-sonnet-4-5-20250929"

    # 1. healthy: a Task subagent, and a rejected tool call
    sid, start = "4b7e0d2a-8c1f-4e93-a5d6-0f2b9c7e1a38", "2026-03-02T13:40:10.402"
    sub = Session(
        "claude_code",
        sid,
        BILLING,
        at("2026-03-02T13:40:16.700"),
        "claude-haiku-4-5-20251001",
        [
            Turn(
                "Find where proration for mid-cycle plan upgrades is computed in this repo. Report the functions, "
                "files and how credits are calculated.",
                [
                    step(
                        "I'll search for proration code.",
                        grep("prorat", "src", "src/billing/proration.py\nsrc/billing/invoices.py"),
                        secs=2.1,
                    ),
                    step("", read("src/billing/proration.py", PRORATION_PY), secs=1.4),
                    step("", read("src/billing/invoices.py", INVOICES_PY), secs=1.6),
                    step(
                        "",
                        Call(
                            "grep",
                            {"pattern": "def test_", "path": "tests/test_proration.py"},
                            "tests/test_proration.py",
                            secs=0.2,
                        ),
                        secs=1.5,
                    ),
                    step(REPORT, secs=6.0),
                ],
                wait=0.5,
            )
        ],
        version="2.1.7",
        seed=2011,
    )
    task = Call(
        "task",
        {"subagent_type": "Explore", "description": "Find proration logic", "prompt": sub.turns[0].prompt},
        REPORT,
        secs=21.0,
        sub=sub,
    )
    rejected = sh("rm -rf build dist .venv && uv sync", desc="Remove build outputs and reinstall dependencies")
    rejected.rejected = True
    s = Session(
        "claude_code",
        sid,
        BILLING,
        at(start),
        sonnet,
        [
            Turn(
                "How do we compute proration when a customer upgrades mid-cycle? Point me to the code.",
                [
                    step("I'll have an Explore agent map the proration code.", task),
                    step("Let me read the core function it found.", read("src/billing/proration.py", PRORATION_PY)),
                    step(
                        "Proration is in `src/billing/proration.py`. `prorate_upgrade()` charges the new price for the "
                        "days left in the period and subtracts `credit_for_unused()`, the unused share of the old "
                        "price; both round half-even to cents. `upgrade_invoice()` in `invoices.py` calls it."
                    ),
                ],
            ),
            Turn(
                "Clean the build artifacts and reinstall the dependencies.",
                [step("I'll remove build outputs and the virtualenv, then reinstall.", rejected)],
            ),
            Turn(
                "Don't touch .venv, just remove build/ and dist/.",
                [
                    step("", sh("rm -rf build dist", "", desc="Remove build outputs")),
                    step("Removed `build/` and `dist/`; the virtualenv is untouched."),
                ],
            ),
        ],
        version="2.1.7",
        branch="feat/proration-docs",
        seed=201,
    )
    out.append(
        Sample(
            s,
            claude_path(BILLING, sid),
            "Spawns an Explore subagent (new layout `<sessionId>/subagents/agent-<id>.jsonl`), then the user "
            "rejects a `Bash` call and narrows the request.",
            notes=[
                "The rejected `Bash` call has a result with is_error=true (\"The user doesn't want to "
                'proceed..."), followed by "[Request interrupted by user for tool use]". Not a loop.',
                "The subagent session is healthy: 4 distinct calls.",
            ],
            cases=["user rejects a tool call (Claude Code)", "Claude Code subagent, new layout"],
        )
    )

    # 2. a 3-call cycle repeating unchanged
    cyc = []
    for _ in range(4):
        cyc += [
            read("src/billing/auth/session.py", SESSION_PY),
            grep("refresh_token", "src/billing/auth", "src/billing/auth/session.py\nsrc/billing/auth/store.py"),
            sh("pytest tests/test_session.py -q", PYTEST_FAIL, 1, desc="Run session tests", secs=2.4),
        ]
    texts = [
        "Let me look at the session module.",
        "",
        "Running the failing test.",
        "",
        "",
        "",
        "Checking the refresh path once more.",
        "",
        "",
        "",
        "",
        "",
    ]
    sid, start = "9e3d5b17-2a6c-4f80-b94e-7c1a0d8f3e62", "2026-03-03T10:05:18.663"
    s = Session(
        "claude_code",
        sid,
        BILLING,
        at(start),
        sonnet,
        [
            Turn(
                "tests/test_session.py::test_refresh_rotates_token fails after the auth refactor. Please fix it.",
                [
                    step(
                        "Let me see what changed recently.",
                        sh(
                            "git log --oneline -5",
                            "a41c9e2 auth: move tokens to "
                            "TokenStore\n7d03b5f billing: proration docs\nc2e81aa ci: cache uv\n"
                            "0f9d6b4 auth: add revoke()\n5b2c7e1 deps: bump httpx",
                            desc="Show recent commits",
                        ),
                    ),
                    *[step(x, c) for x, c in zip(texts, cyc)],
                    step("The test still fails the same way: `refresh()` returns the old refresh token."),
                ],
            ),
            Turn(
                "Stop re-running it. The fixture in tests/conftest.py still builds the store with rotate=False.",
                [
                    step("", read("tests/conftest.py", CONFTEST)),
                    step(
                        "",
                        edit(
                            "tests/conftest.py", "InMemoryTokenStore(rotate=False)", "InMemoryTokenStore(rotate=True)"
                        ),
                    ),
                    step(
                        "",
                        sh(
                            "pytest tests/test_session.py -q",
                            ".......                                              "
                            "                  [100%]\n7 passed in 0.35s",
                            desc="Run session tests",
                            secs=2.1,
                        ),
                    ),
                    step("That was it: the fixture disabled rotation. All 7 session tests pass."),
                ],
            ),
        ],
        version="2.0.76",
        branch="auth-token-store",
        seed=202,
    )
    out.append(
        Sample(
            s,
            claude_path(BILLING, sid),
            "Read -> Grep -> Bash(pytest) repeated 4 times unchanged, same failure each time; the user "
            "points at the fixture.",
            [Episode("cycle", cyc, True, period=3, note="period 3, 4 full repetitions, identical results")],
        )
    )

    # 3. chanting: the same sentence before every search, every search empty
    chant = "Let me search the codebase for where this error is raised."
    searches = [grep(p, "src") for p in ("ETIMEDOUT", "gatewayTimeout", "TimeoutError", "504", "timeout_ms")]
    chant_steps = [step(chant, g) for g in searches]
    sid, start = "2c8f4a6e-0d3b-4b7c-9e15-a6d2f0c8b493", "2026-03-04T16:22:05.020"
    s = Session(
        "claude_code",
        sid,
        WEBSHOP,
        at(start),
        sonnet,
        [
            Turn(
                "Customers get 'PAYMENT_TIMEOUT' at checkout. Find where that error comes from.",
                [
                    step("Looking for the error code in the sources.", grep("PAYMENT_TIMEOUT", "src")),
                    *chant_steps,
                    step("I can't find `PAYMENT_TIMEOUT` anywhere under `src/`."),
                ],
            ),
            Turn(
                "It's probably coming from the payment SDK in node_modules, look there.",
                [
                    step(
                        "",
                        grep(
                            "PAYMENT_TIMEOUT", "node_modules/@acmepay/sdk", "node_modules/@acmepay/sdk/dist/client.js"
                        ),
                    ),
                    step("", read("node_modules/@acmepay/sdk/dist/client.js", SDK_CLIENT_JS)),
                    step(
                        "It comes from the SDK: `PaymentClient.charge()` aborts the request after `timeoutMs` (default "
                        '8000 ms) and throws `PaymentError("PAYMENT_TIMEOUT")`. Raise `timeoutMs` where the client is '
                        "created, or handle the error at checkout."
                    ),
                ],
            ),
        ],
        version="2.0.76",
        seed=203,
    )
    out.append(
        Sample(
            s,
            claude_path(WEBSHOP, sid),
            'Says "Let me search the codebase for where this error is raised." 5 times, each before a '
            "different `Grep` that finds nothing.",
            [
                Episode(
                    "text",
                    chant_steps,
                    True,
                    note='identical message text 5 times; the 5 searches all return "No files found"',
                )
            ],
        )
    )

    # 4. a poll whose result changes (progress)
    view = "sleep 30 && gh run view 13877216420"
    polls = [
        sh(view, GH_VIEW.format(mark=m, ago=a, jobs=j), desc="Wait and check the release run", secs=31.0)
        for m, a, j in GH_POLLS
    ]
    sid, start = "7a0c2e94-5f1b-4d6e-8b3a-e9c4d7f2a015", "2026-03-05T09:12:44.870"
    s = Session(
        "claude_code",
        sid,
        INFRA,
        at(start),
        sonnet,
        [
            Turn(
                "Kick off the release workflow for v2.8.0 and tell me when it finishes.",
                [
                    step(
                        "Starting the release workflow.",
                        sh(
                            "gh workflow run release.yml -f version=2.8.0",
                            "\u2713 Created workflow_dispatch event for "
                            "release.yml at main\n\n"
                            "To see runs for this workflow, try: gh run list --workflow=release.yml",
                            desc="Trigger release workflow",
                        ),
                    ),
                    step(
                        "",
                        sh(
                            "gh run list --workflow=release.yml --limit 1",
                            "STATUS  TITLE    WORKFLOW  BRANCH  EVENT      "
                            "       ID           ELAPSED  AGE\n*       Release  Release   main    workflow_dispatch  "
                            "13877216420  0s       now",
                            desc="Find the run",
                        ),
                    ),
                    step("Run 13877216420 is queued. I'll check on it every 30 seconds.", polls[0]),
                    step("", polls[1]),
                    step("", polls[2]),
                    step("", polls[3]),
                    step("", polls[4]),
                    step("Release v2.8.0 finished: build, test and publish all passed (run 13877216420)."),
                ],
            ),
        ],
        version="2.1.7",
        seed=204,
    )
    out.append(
        Sample(
            s,
            claude_path(INFRA, sid),
            "Polls a CI run 5 times with the identical command until it finishes; every poll shows new progress.",
            [
                Episode(
                    "waiting",
                    polls,
                    False,
                    note="identical polls of a run still in progress (`*`), up to the one that says it ended (`✓`): "
                    "waiting, not stuck",
                )
            ],
        )
    )
    return out


def codex_path(start: str, sid: str) -> str:
    d = start[:10].replace("-", "/")
    return f"codex/{d}/rollout-{start[:19].replace(':', '-')}-{sid}.jsonl"


def codex_samples() -> list[Sample]:
    out: list[Sample] = []

    # 1. a 2-call cycle: the same failing patch and the same lint run
    patch = dict(anchor="def line_total(qty, unit_price):", old="    total = qty*price", new="    total = qty * price")
    cyc = []
    for _ in range(4):
        cyc += [
            edit("src/billing/invoices.py", code=1, **patch),
            sh("ruff check src/billing/invoices.py", RUFF_FAIL, 1, secs=0.3),
        ]
    texts = ["Fixing the operator spacing in `line_total`.", "", "", "", "Applying the spacing fix again.", "", "", ""]
    sid, start = "019a7c3e-5d21-7b40-9e8f-2c6a1d0b4f37", "2026-03-06T09:41:27.305"
    s = Session(
        "codex",
        sid,
        BILLING,
        at(start),
        "gpt-5-codex",
        [
            Turn(
                "Make `ruff check src/billing/invoices.py` pass.",
                [
                    step(
                        "Looking at the file first.",
                        read("src/billing/invoices.py", INVOICES_PY),
                        thinking="Check the lint errors in invoices.py before patching.",
                    ),
                    *[step(x, c) for x, c in zip(texts, cyc)],
                    step("I couldn't get the patch to apply and ruff still reports E225 and F821 in `invoices.py`."),
                ],
            ),
            Turn(
                "The function uses `unit_price`, not `price`. Read it again carefully.",
                [
                    step(
                        "",
                        read(
                            "src/billing/invoices.py",
                            INVOICES_PY,
                            codex_cmd="nl -ba src/billing/invoices.py | sed -n '1,20p'",
                        ),
                    ),
                    step(
                        "",
                        edit(
                            "src/billing/invoices.py",
                            "from billing.proration import prorate_upgrade",
                            "from billing.models import Invoice, Line\nfrom billing.proration import prorate_upgrade",
                            anchor="",
                        ),
                    ),
                    step(
                        "",
                        edit(
                            "src/billing/invoices.py",
                            "    total = qty*unit_price",
                            "    total = qty * unit_price",
                            anchor="def line_total(qty, unit_price):",
                        ),
                    ),
                    step("", sh("ruff check src/billing/invoices.py", "All checks passed!", secs=0.3)),
                    step(
                        "",
                        sh(
                            "pytest tests/test_invoices.py -q",
                            ".......                                            "
                            "                    [100%]\n7 passed in 0.41s",
                            secs=1.9,
                        ),
                    ),
                    step(
                        "Fixed both: added the missing `Invoice, Line` import and spaced `qty * unit_price`. Ruff is "
                        "clean and the 7 invoice tests pass."
                    ),
                ],
            ),
        ],
        version="0.58.0",
        variant="exec",
        seed=301,
    )
    out.append(
        Sample(
            s,
            codex_path(start, sid),
            "apply_patch (fails to apply) -> exec_command ruff (exit 1), repeated 4 times unchanged.",
            [
                Episode(
                    "cycle",
                    cyc,
                    True,
                    period=2,
                    note="period 2, 4 full repetitions; each ruff run fails "
                    "by exit code 1, each patch fails verification",
                )
            ],
        )
    )

    # 2. drift: tail -20 -> tail -50 -> extra flags, with the older `shell` tool
    base = "terraform -chdir=envs/staging plan -no-color"
    drift = [
        sh(f"{base} 2>&1 | tail -20", TF_ERR, 1, secs=7.2),
        sh(f"{base} 2>&1 | tail -50", TF_ERR, 1, secs=7.0),
        sh(f"{base} -input=false 2>&1 | tail -50", TF_ERR, 1, secs=7.1),
        sh(f"{base} -input=false -lock=false 2>&1 | tail -80", TF_ERR, 1, secs=6.9),
    ]
    sid, start = "0199f2b8-3e4a-7c15-a6d0-8b2e5f9c1d74", "2026-03-07T14:18:09.882"
    s = Session(
        "codex",
        sid,
        INFRA,
        at(start),
        "gpt-5-codex",
        [
            Turn(
                "terraform plan fails for envs/staging. Find out why.",
                [
                    step("Running the plan to see the error.", drift[0]),
                    step("", drift[1]),
                    step("The output looks cut off; getting more of it.", drift[2]),
                    step("", drift[3]),
                    step("", read("envs/staging/variables.tf", TF_VARS, codex_cmd="cat envs/staging/variables.tf")),
                    step(
                        "",
                        edit(
                            "envs/staging/variables.tf",
                            '  description = "ARN of the Secrets Manager secret holding the DB password"',
                            '  description = "ARN of the Secrets Manager secret holding the DB password"\n'
                            "  default     = null",
                            anchor='variable "db_password_secret_arn" {',
                        ),
                    ),
                    step("", sh(f"{base} -input=false 2>&1 | tail -5", TF_OK, secs=8.4)),
                    step(
                        "`db_password_secret_arn` had no default and nothing set it for staging. I gave it a `null` "
                        "default (the module falls back to RDS-managed passwords); the plan now shows 1 change."
                    ),
                ],
            ),
        ],
        version="0.46.0",
        variant="shell",
        seed=302,
    )
    out.append(
        Sample(
            s,
            codex_path(start, sid),
            "The same failing `terraform plan` re-run with `| tail -20` -> `-50` -> extra flags; same error each time.",
            [
                Episode(
                    "drift",
                    drift,
                    True,
                    note="tail -20/-50/-80, -input=false and -lock=false added; every run exits 1 with the same error",
                )
            ],
        )
    )

    # 3. healthy, with one call failing by exit code
    sid, start = "019a9d41-7b2c-7e05-b3f8-4d1c6a0e9f52", "2026-03-08T19:03:55.147"
    s = Session(
        "codex",
        sid,
        WEBSHOP,
        at(start),
        "gpt-5.1-codex",
        [
            Turn(
                "Add a `formatPrice` helper with tests and use it in the checkout summary.",
                [
                    step(
                        "Let me see how prices are rendered today.",
                        sh(
                            'rg -n "toFixed\\(2\\)" src',
                            'src/checkout/Summary.tsx:8:      <p className="total">\u20ac'
                            "{total.toFixed(2)}</p>\nsrc/cart/CartRow.tsx:14:  <td>\u20ac{line.price.toFixed(2)}</td>",
                        ),
                        thinking="Find every hand-formatted price first.",
                    ),
                    step("", read("src/checkout/Summary.tsx", SUMMARY_TSX)),
                    step("", write("src/lib/formatPrice.ts", FORMAT_PRICE)),
                    step("", sh("git status --short", "?? src/lib/formatPrice.ts", secs=0.1)),
                    step("", write("src/lib/formatPrice.test.ts", FORMAT_PRICE_TEST)),
                    step(
                        "",
                        edit(
                            "src/checkout/Summary.tsx",
                            '      <p className="total">\u20ac{total.toFixed(2)}</p>',
                            '      <p className="total">{formatPrice(total)}</p>',
                            anchor="export function Summary() {",
                        ),
                    ),
                    step("", sh("npx vitest run src/lib/formatPrice.test.ts", VITEST_FAIL, 1, secs=2.3)),
                    step(
                        "The default-locale case differs only in spacing; pinning the test to `en-IE` output.",
                        edit(
                            "src/lib/formatPrice.test.ts",
                            '    expect(formatPrice(3)).toBe("\u20ac3.00");',
                            '    expect(formatPrice(3)).toBe(new Intl.NumberFormat("en-IE", { style: "currency", '
                            'currency: "EUR" }).format(3));',
                            anchor='  it("defaults to euros", () => {',
                        ),
                    ),
                    step("", sh("npx vitest run src/lib/formatPrice.test.ts", VITEST_PASS, secs=2.1)),
                    step("", sh("npm run lint", "\n> webshop@1.14.0 lint\n> eslint src --max-warnings 0\n", secs=5.4)),
                    step(
                        "Added `formatPrice()` in `src/lib/formatPrice.ts` with two tests and used it in the checkout "
                        "summary. `CartRow.tsx` still formats by hand; say if you want it switched too."
                    ),
                ],
            ),
        ],
        version="0.63.0",
        variant="exec",
        seed=303,
    )
    out.append(
        Sample(
            s,
            codex_path(start, sid),
            "Adds a helper and tests; one test run fails by exit code 1 and passes after a fix.",
            notes=[
                'One `exec_command` fails ("Process exited with code 1"); the re-run after an edit passes. Not a loop.'
            ],
            cases=["Codex call failing by exit code (single, no loop)"],
        )
    )
    return out


def openai_samples() -> list[Sample]:
    out: list[Sample] = []
    eval_file = "openai_messages/agent-eval-2026-03-05.jsonl"
    s = Session(
        "openai_messages",
        "eval-0412-pagination",
        "/workspace/acme-api",
        at("2026-03-05T08:00:00"),
        "gpt-4.1",
        [
            Turn(
                "paginate() in acme/utils/pagination.py skips the first page. Fix it.",
                [
                    step("", read("acme/utils/pagination.py", PAGINATION_PY)),
                    step(
                        "Pages start at 1, so the offset must use `page - 1`.",
                        edit(
                            "acme/utils/pagination.py",
                            "    start = page * per_page",
                            "    start = (page - 1) * per_page",
                        ),
                    ),
                    step(
                        "",
                        sh(
                            "pytest tests/test_pagination.py -q",
                            "....                           "
                            "                                         [100%]\n4 passed in 0.05s",
                        ),
                    ),
                    step("Fixed: `paginate()` now starts page 1 at offset 0. The 4 pagination tests pass."),
                ],
            )
        ],
        title="You are an autonomous software engineer. Solve the task using the tools.",
        seed=401,
    )
    out.append(Sample(s, eval_file, "Reads, fixes an off-by-one, runs the tests."))
    s = Session(
        "openai_messages",
        "eval-0413-readme-docker",
        "/workspace/acme-api",
        at("2026-03-05T08:05:00"),
        "gpt-4.1",
        [
            Turn(
                "Do the install steps in README.md still match the Dockerfile?",
                [
                    step("Reading both files.", read("README.md", README_MD), read("Dockerfile", DOCKERFILE)),
                    step(
                        "No: the README uses `pip install -r requirements.txt`, the Dockerfile uses `uv sync "
                        "--frozen` from `pyproject.toml`/`uv.lock`, and the README's `migrate` step is not in the "
                        "image."
                    ),
                ],
            ),
            Turn(
                "Update the README to match.",
                [
                    step(
                        "",
                        edit(
                            "README.md",
                            "    pip install -r requirements.txt",
                            "    pip install uv\n    uv sync --frozen",
                        ),
                    ),
                    step("The README now installs with `uv sync --frozen`, as the Dockerfile does."),
                ],
            ),
        ],
        title="You are an autonomous software engineer. Solve the task using the tools.",
        seed=402,
    )
    out.append(Sample(s, eval_file, "Two parallel reads in one message, then an edit in a second prompt."))

    status = '{"order_id": "A-10442", "status": "processing", "carrier": null, "updated_at": "2026-03-09T08:12:00Z"}'
    checks = [tool("get_order_status", {"order_id": "A-10442"}, status) for _ in range(6)]
    s = Session(
        "openai_messages",
        "support-7f3a91",
        "/srv/support-bot",
        at("2026-03-09T11:30:00"),
        "gpt-4.1-mini",
        [
            Turn(
                "Hi, has my order A-10442 shipped yet? It's been a week.",
                [
                    step(
                        "",
                        tool(
                            "lookup_customer",
                            {"email": "j.moreau@example.org"},
                            '{"customer_id": "C-88213", "name": "Julie Moreau", "orders": ["A-10442", "A-09876"]}',
                        ),
                    ),
                    *[step("", c) for c in checks],
                    step(
                        "Your order A-10442 is still being processed and has not shipped yet. I've flagged it for the "
                        "warehouse team."
                    ),
                ],
            )
        ],
        title="You are Acme's support assistant. Use the tools to look up orders.",
        seed=403,
    )
    out.append(
        Sample(
            s,
            "openai_messages/support-bot-2026-03-09.jsonl",
            "Calls `get_order_status` 6 times in a row with the same order id and gets the same answer.",
            [
                Episode(
                    "streak",
                    checks,
                    True,
                    note="identical call, identical result; no usage in this format, so only estimated tokens",
                )
            ],
        )
    )
    return out


# --- the benchmark / harness formats ----------------------------------------------------------------------------------


def run_session_id(path: str, instance: str | None = None) -> str:
    """``<run>/<instance>``, as loopscope names SWE-agent and mini-swe-agent runs (``ingest/base.py``)."""
    p = Path(path)
    stem = p.name
    for suffix in (".json", ".traj"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    inst = instance or stem
    for parent in p.parents:
        if parent.name and parent.name not in (inst, stem, "trajs"):
            return f"{parent.name}/{inst}"
    return inst


def swe_agent_samples() -> list[Sample]:
    cwd = "/__home__dana__ctf__xor_warmup"
    wrong = "flag{repeating_key_xor_is_weak}"
    submits = [tool("submit", {"flag": wrong}, CTF_WRONG, secs=0.2) for _ in range(4)]
    decode4 = (
        "python3 -c \"c=bytes.fromhex(open('challenge.txt').read().split()[-1]); k=bytes(a^b for a,b in "
        "zip(c,b'flag')); print('key (from the known prefix \\'flag\\'):', k); print(bytes(x^k[i%4] for i,x in "
        'enumerate(c)).decode())"'
    )
    decode5 = (
        "python3 -c \"c=bytes.fromhex(open('challenge.txt').read().split()[-1])\nfor n in (5, 6):\n"
        "    k=bytes(a^b for a,b in zip(c,b'flag{\\x1e'[:n])); print(f'key length {n}:', k, '->', "
        'bytes(x^k[i%n] for i,x in enumerate(c)))"'
    )
    inst = "xor_warmup"
    s = Session(
        "swe_agent",
        inst,
        cwd,
        at("2026-03-10T08:00:05"),
        "gpt-4o-2024-08-06",
        [
            Turn(
                'We\'re currently solving the following CTF challenge (crypto, 50 points): "XOR warmup". The flag '
                "format is flag{...}. Files: challenge.txt, encrypt.py.",
                [
                    step("Let's start by looking at the files in the challenge directory.", sh("ls -la", CTF_LS)),
                    step(
                        "Let's read the challenge description and the ciphertext.",
                        sh("cat challenge.txt", CTF_CHALLENGE),
                    ),
                    step(
                        "Now the encryption script, to see how the key is applied.",
                        sh("head -n 20 encrypt.py", CTF_ENCRYPT),
                    ),
                    step(
                        "The flag starts with `flag`, so XORing the first four bytes with it gives the key if the key "
                        "is four bytes long. Let's decrypt with that guess.",
                        sh(decode4, CTF_KEY4, secs=0.3),
                    ),
                    step(
                        "The output reads like the flag with some letters in the wrong case; the intended text is "
                        "clearly lower case. Let's submit it.",
                        submits[0],
                    ),
                    step(
                        "That was rejected. The plaintext spelled out the phrase, so I will submit it again in case "
                        "the checker failed.",
                        submits[1],
                    ),
                    step(
                        "Still wrong, but the words are unmistakable: repeating key XOR is weak. Trying once more.",
                        submits[2],
                    ),
                    step("The answer must be this phrase. Submitting the same flag one last time.", submits[3]),
                    step(
                        "Perhaps the key is not four bytes after all; let's try lengths 5 and 6.",
                        sh(decode5, CTF_KEY5, secs=0.3),
                    ),
                    step(
                        "Neither length gives readable text and I have used most of the budget. I'll stop here.",
                        tool("exit_forfeit", {}, "Exited (exit_forfeit)", secs=0.1),
                    ),
                ],
            )
        ],
        title="SETTING: You are a skilled cybersecurity professional and top CTF player. You are working "
        "directly in the command line with a special interface.",
        version="0.7.0",
        seed=501,
    )
    path = f"swe_agent/dana/gpt4o__ctf__xor_warmup__default__t-0.00__p-0.95__c-3.00/{inst}.traj"
    return [
        Sample(
            s,
            path,
            "An EnIGMA (SWE-agent) CTF run that submits the same wrong flag 4 times in a row, then forfeits.",
            [
                Episode(
                    "streak",
                    submits,
                    True,
                    note='the same flag, "Wrong flag!" every time: the same `submit` with the same '
                    "argument (loopscope keeps the flag a `submit` sends)",
                )
            ],
            notes=[
                "SWE-agent records usage per run only (`info.model_stats`): the calls carry no tokens, so "
                "the episode wastes 0 measured tokens."
            ],
            cases=["SWE-agent run (usage per run only)"],
        )
    ]


def mini_swe_agent_samples() -> list[Sample]:
    inst = "acme__dateparse-412"
    greps = [sh(f"grep -rn {p} src/", "", 1, secs=0.1) for p in ("parse_iso_week", "isoweek", "week_of_year")]
    greps.append(sh("grep -rni 'iso.*week' src/dateparse", "", 1, secs=0.1))
    test = "python -m pytest tests/test_formats.py -q"
    reruns = [sh(test, MINI_TEST_FAIL, 1, secs=1.1) for _ in range(4)]
    s = Session(
        "mini_swe_agent",
        inst,
        "/testbed",
        at("2026-03-10T14:21:40"),
        "anthropic/claude-sonnet-4-5-20250929",
        [
            Turn(
                'parse("2026-W01-1") returns 2026-01-05 instead of 2025-12-29: ISO week dates are parsed with the '
                "Sunday-based week number.",
                [
                    step(
                        "I need to find where ISO week dates are parsed. I'll search for a dedicated function first.",
                        greps[0],
                    ),
                    step("No function by that name. Maybe the helper is spelled without underscores.", greps[1]),
                    step("Nothing either. The module may talk about the week of year instead.", greps[2]),
                    step(
                        "Still nothing. A case-insensitive search for anything mentioning iso and week together.",
                        greps[3],
                    ),
                    step(
                        "Searches came back empty, so I'll look at the package layout directly.",
                        sh("ls src/dateparse", MINI_LS),
                    ),
                    step(
                        "formats.py should hold the strftime patterns.",
                        sh("cat src/dateparse/formats.py", MINI_FORMATS_PY),
                    ),
                    step(
                        "ISO_WEEK uses %W. Before changing it, let me run the formats tests to see the failure.",
                        reruns[0],
                    ),
                    step(
                        "The assertion shows the wrong Monday. Running the tests again to be sure it is stable.",
                        reruns[1],
                    ),
                    step("Same failure. Perhaps a stale bytecode cache is involved; one more run.", reruns[2]),
                    step("It fails identically every time, as expected with nothing changed.", reruns[3]),
                    step(
                        "%W counts weeks from the first Monday; ISO weeks need %G (ISO year) and %V (ISO week). "
                        "Fixing the pattern.",
                        sh("sed -i 's/%Y-W%W-%u/%G-W%V-%u/' src/dateparse/formats.py", ""),
                    ),
                    step(
                        "Now the whole suite, not only the formats tests.",
                        sh("python -m pytest tests -q", MINI_ALL_PASS, secs=1.9),
                    ),
                    step(
                        "All tests pass. Submitting.",
                        Call(
                            "sh",
                            {"cmd": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"},
                            MINI_DIFF,
                            secs=0.2,
                        ),
                    ),
                ],
            )
        ],
        version="1.15.0",
        seed=502,
    )
    path = f"mini_swe_agent/20260310_claude-sonnet-4-5/trajs/{inst}/{inst}.traj.json"
    return [
        Sample(
            s,
            path,
            "Four different greps find nothing (exit code 1), then the same failing test is run 4 "
            "times with no edit in between; a one-line fix and the suite passes.",
            [Episode("streak", reruns, True, note="identical command and output, no edit between the runs")],
            benign=[
                Benign(
                    "failure",
                    greps,
                    "4 `grep -rn` calls in a row exit with code 1, so each is recorded as a failed "
                    'call; but every pattern is different and "no match" is an answer, not an error. '
                    "Expected: no finding.",
                )
            ],
            notes=[
                "mini-swe-agent records usage per run only (`info.model_stats`): the episode wastes 0 measured tokens."
            ],
            cases=["grep without a match (exit code 1), four different patterns (no loop)"],
        )
    ]


def openhands_samples() -> list[Sample]:
    cwd = "/workspace/webshop"
    bad = edit(
        "src/coupons/expiry.ts", "  return coupon.expiresAt < now;", "  return coupon.expiresAt < startOfDay(now);", 1
    )
    retries = [bad] + [
        edit(
            "src/coupons/expiry.ts",
            "  return coupon.expiresAt < now;",
            "  return coupon.expiresAt < startOfDay(now);",
            1,
        )
        for _ in range(3)
    ]
    s = Session(
        "openhands",
        "oh-webshop-coupon-expiry",
        cwd,
        at("2026-03-10T16:40:11"),
        "claude-sonnet-4-5-20250929",
        [
            Turn(
                "Coupons that expire today are rejected at checkout, but they should stay valid until midnight. Fix "
                "isExpired in src/coupons.",
                [
                    step("Let me look at the coupons module.", sh("ls src/coupons", OH_LS)),
                    step("", sh("grep -rn isExpired src/coupons", OH_GREP)),
                    step("", sh("npx vitest run src/coupons/expiry.test.ts", OH_TEST_FAIL, 1, secs=3.2)),
                    step("The comparison must be against the start of today. I'll change it.", retries[0]),
                    step("", retries[1]),
                    step("", retries[2]),
                    step("", retries[3]),
                    step(
                        "The replacement keeps failing; let me view the file.",
                        read("src/coupons/expiry.ts", OH_EXPIRY_TS),
                    ),
                    step(
                        "It uses `<=`, not `<`.",
                        edit(
                            "src/coupons/expiry.ts",
                            "  return coupon.expiresAt <= now;",
                            "  const today = new Date(now);\n  today.setHours(0, 0, 0, 0);\n"
                            "  return coupon.expiresAt < today;",
                            line=4,
                        ),
                    ),
                    step("", sh("npx vitest run src/coupons", OH_TEST_PASS, secs=3.4)),
                    step("", sh("npx tsc --noEmit -p .", "", secs=6.1)),
                    step(
                        "Fixed: `isExpired` now compares the expiry with the start of the current day, so a coupon "
                        "is valid through its last day. The coupon tests and the type check pass."
                    ),
                ],
            )
        ],
        seed=503,
    )
    return [
        Sample(
            s,
            "openhands/trajectories/oh-webshop-coupon-expiry.json",
            "The same failing `str_replace` edit is sent 4 times (ERROR: no replacement was performed) before "
            "the agent views the file.",
            [Episode("streak", retries, True, note="identical edit, identical ERROR each time")],
            cases=["OpenHands saved trajectory (event list)"],
        )
    ]


def inspect_samples() -> list[Sample]:
    path = "inspect/2026-03-11T09-58-40+00-00_ops-lookup_8qVfHnM4xR2cT6wYbJ3kZa.eval"
    ls_calls = [sh("ls", "", secs=0.2) for _ in range(5)]
    a = Session(
        "inspect",
        "Wb7Xq2mLk9RfTz4pHc6NvA",
        "/root",
        at("2026-03-11T09:58:41"),
        "gpt-4o-2024-08-06",
        [
            Turn(
                "Which TCP port does the service in /srv/app listen on? Answer with the number only.",
                [
                    step("", sh("cd /srv/app && ls", IN_APP_LS, secs=0.2)),
                    step("", ls_calls[0]),
                    step("The directory listing came back empty. Let me list again.", ls_calls[1]),
                    step("", ls_calls[2]),
                    step("", ls_calls[3]),
                    step("", ls_calls[4]),
                    step(
                        "Each command runs in a fresh shell, so the `cd` did not persist. Using absolute paths.",
                        sh("ls /srv/app/config", "server.toml", secs=0.2),
                    ),
                    step("", sh("cat /srv/app/config/server.toml", IN_SERVER_TOML, secs=0.2)),
                    step("", sh("grep -n PORT /srv/app/run.sh", IN_RUN_SH, secs=0.2)),
                    step("", sh("tail -n 3 /srv/app/logs/service.log", IN_LOG, secs=0.2)),
                    step("8443"),
                ],
            )
        ],
        branch="8443",
        seed=504,
    )
    b = Session(
        "inspect",
        "Jr5Ts8dEw3YkPn7bMq2GhC",
        "/root",
        at("2026-03-11T10:00:02"),
        "gpt-4o-2024-08-06",
        [
            Turn(
                "When did the last nightly backup finish? Answer with the ISO timestamp.",
                [
                    step("", sh("crontab -l", IN_CRON, secs=0.2)),
                    step("", sh("tail -n 3 /var/log/backup.log", IN_BACKUP_LOG, secs=0.2)),
                    step("2026-03-10T03:04:48Z"),
                ],
            )
        ],
        branch="2026-03-10T03:04:48Z",
        seed=505,
    )
    return [
        Sample(
            a,
            path,
            "An Inspect sample (`.eval` log) that runs `ls` 5 times after a `cd` that does not "
            "persist between bash calls; same empty output each time.",
            [Episode("streak", ls_calls, True, note="identical call, identical (empty) result")],
            cases=["Inspect .eval log with several samples"],
            sample_id="port-lookup",
        ),
        Sample(
            b,
            path,
            "A second sample of the same eval: two distinct commands, then the answer.",
            sample_id="backup-time",
        ),
    ]


def gemini_samples() -> list[Sample]:
    cwd = "/home/dana/src/tidepool-docs"
    pages = [
        ("install", GUIDE_INSTALL),
        ("configure", GUIDE_CONFIGURE),
        ("deploy", GUIDE_DEPLOY),
        ("upgrade", GUIDE_UPGRADE),
    ]
    seds = [
        sh(f"sed -n '1,40p' docs/guides/{n}.md", text, desc="Print the first 40 lines of the guide", pgid=48211 + i)
        for i, (n, text) in enumerate(pages)
    ]
    s = Session(
        "gemini_cli",
        "3f9c2a7e-8b41-4d06-a5e3-1c7d9b2f4e80",
        cwd,
        at("2026-03-12T10:15:03"),
        "gemini-2.5-pro",
        [
            Turn(
                "Review the guides in docs/guides for anything stale after the 0.15 release.",
                [
                    step(
                        "I'll list the guides first.",
                        sh("ls docs/guides", GUIDES_LS, desc="List the guides", pgid=48200),
                        thinking="Planning: list, then read each",
                    ),
                    step("", seds[0]),
                    step("", seds[1]),
                    step("", seds[2]),
                    step("", seds[3]),
                    step(
                        "`install.md` and `upgrade.md` still pin 0.14.2, and the upgrade guide has no 0.15 "
                        "section. Updating both.",
                        edit(
                            "docs/guides/install.md",
                            "    pip install tidepool==0.14.2",
                            "    pip install tidepool==0.15.0",
                        ),
                    ),
                    step(
                        "",
                        edit(
                            "docs/guides/upgrade.md",
                            "From 0.13 to 0.14:",
                            "From 0.14 to 0.15: no configuration changes.\n\nFrom 0.13 to 0.14:",
                        ),
                    ),
                    step(
                        "",
                        edit(
                            "docs/guides/upgrade.md",
                            "    pip install --upgrade tidepool==0.14.2",
                            "    pip install --upgrade tidepool==0.15.0",
                        ),
                    ),
                    step("Checking that no other page mentions the old version.", grep("0\\.14\\.2", "docs")),
                    step("", sh("npm run build", DOCS_BUILD, desc="Build the docs site", secs=4.0, pgid=48240)),
                    step(
                        "Updated `install.md` and `upgrade.md` to 0.15.0 and added a 0.14 -> 0.15 note; "
                        "`configure.md` and `deploy.md` are current. The site builds with `--strict`."
                    ),
                ],
            )
        ],
        seed=506,
    )
    from transcript_writer import gemini_path

    return [
        Sample(
            s,
            gemini_path(s),
            "Pages through four different guides with `sed -n '1,40p' <file>`, then fixes two of them.",
            benign=[
                Benign(
                    "drift",
                    seds,
                    "4 consecutive `sed -n '1,40p'` calls differ only in the file name, so their "
                    "arguments overlap almost fully; but each reads a different file and gets its "
                    "content: reading, not drifting. Expected: no finding.",
                )
            ],
            cases=["`sed -n` paging over different files (no loop)", "Gemini CLI chat (session-*.json)"],
        )
    ]


def opencode_samples() -> list[Sample]:
    cwd = BILLING
    t = "pytest tests/test_tax.py -q"
    runs = [
        sh(t, o, c, desc="Run the tax tests", secs=1.4)
        for o, c in ((TAX_FAIL, 1), (TAX_FAIL_2, 1), (TAX_FAIL_3, 1), (TAX_PASS, 0))
    ]
    sid = "ses_4c1e9a7f2ffeQk3Lm8Rt2Vx6Zb"
    s = Session(
        "opencode",
        sid,
        cwd,
        at("2026-03-12T15:02:19"),
        "claude-sonnet-4-5",
        [
            Turn(
                "tests/test_tax.py fails after the tax refactor. Fix tax.py, not the tests.",
                [
                    step("Running the tax tests to see the failures.", runs[0]),
                    step("", read("src/billing/tax.py", TAX_PY)),
                    step(
                        "Tax is quantized to one decimal place; it must be cents.",
                        edit(
                            "src/billing/tax.py",
                            '    return (net * rate).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)',
                            '    return (net * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)',
                        ),
                    ),
                    step("", runs[1]),
                    step(
                        "Countries without a rate should pay no tax instead of raising.",
                        edit(
                            "src/billing/tax.py",
                            "    rate = RATES[country]",
                            '    if country not in RATES:\n        return Decimal("0.0")\n    rate = RATES[country]',
                        ),
                    ),
                    step("", runs[2]),
                    step(
                        "The zero needs two places as well.",
                        edit("src/billing/tax.py", '        return Decimal("0.0")', '        return Decimal("0.00")'),
                    ),
                    step("", runs[3]),
                    step("", sh("ruff check src/billing/tax.py", "All checks passed!", desc="Lint tax.py", secs=0.3)),
                    step(
                        "",
                        sh(
                            "git diff --stat",
                            " src/billing/tax.py | 6 ++++--\n 1 file changed, 4 insertions(+), 2 deletions(-)",
                            desc="Show what changed",
                            secs=0.2,
                        ),
                    ),
                    step(
                        "`tax.py` now rounds to cents and returns 0.00 for countries without a rate; the 4 tax tests "
                        "pass and ruff is clean."
                    ),
                ],
            )
        ],
        title="Fix tax rounding",
        version="0.15.8",
        seed=507,
    )
    import hashlib

    project = hashlib.sha1(cwd.encode()).hexdigest()
    return [
        Sample(
            s,
            f"opencode/storage/session/{project}/{sid}.json",
            "Test, edit, test, edit, test, edit, test: every edit applies and the test output changes "
            "(3, 1, 1 failures, then none).",
            benign=[
                Benign(
                    "window",
                    runs,
                    "the same `pytest` command runs 4 times within 8 calls, but each run follows a "
                    "different edit that applied and the output changes: progress, not a loop. "
                    "Expected: no finding.",
                )
            ],
            notes=[
                "opencode's storage tree spreads the session over `message/<session>/` and "
                "`part/<message>/` files; the session file is the one loopscope ingests, the others are "
                "read with it."
            ],
            cases=["edit -> test cycle with changing output, opencode (no loop)", "opencode storage tree"],
        )
    ]


# --- writing ----------------------------------------------------------------------------------------------------------


def render_all(out_dir: Path) -> dict[str, Any]:
    samples = (
        pi_samples()
        + claude_samples()
        + codex_samples()
        + openai_samples()
        + swe_agent_samples()
        + mini_swe_agent_samples()
        + openhands_samples()
        + inspect_samples()
        + gemini_samples()
        + opencode_samples()
    )
    files: dict[str, list[bytes]] = {}
    companions: list[str] = []  # files a transcript's adapter reads with it (opencode messages and parts)
    evals: dict[str, list[tuple[Session, dict[str, Any]]]] = {}
    sessions: list[dict[str, Any]] = []
    for sample in samples:
        s = sample.session
        rec = Recorder()
        subs: list[tuple[Session, Recorder | None]] = []
        if s.fmt == "inspect":
            evals.setdefault(sample.path, []).append((s, render_inspect_sample(s, rec, sample.sample_id)))
        elif s.fmt == "opencode":
            storage = Path(sample.path).parents[2]
            for rel, data in render_opencode(s, rec).items():
                files[str(storage / rel)] = [data]
                if str(storage / rel) != sample.path:
                    companions.append(str(storage / rel))
        else:
            files.setdefault(sample.path, []).extend(render(s, rec, subs))
        if s.fmt == "swe_agent":
            rec.session_id = run_session_id(sample.path)
        elif s.fmt == "mini_swe_agent":
            rec.session_id = run_session_id(sample.path, s.sid)
        elif s.fmt == "openhands":
            rec.session_id = Path(sample.path).stem
        else:
            rec.session_id = rec.session_id or s.sid
        checked = check(rec, sample.episodes, sample.benign, sample.path)
        sessions.append(
            _session_entry(sample.path, s, rec, sample.summary, checked.episodes, checked.benign, sample.notes)
        )
        sessions[-1]["cases"] = sample.cases
        for sub, sub_rec in subs:
            assert sub_rec is not None
            sub_path = f"{Path(sample.path).with_suffix('')}/subagents/agent-{sub.agent_id}.jsonl"
            files.setdefault(sub_path, []).extend(render(sub, sub_rec))
            meta = f"{Path(sample.path).with_suffix('')}/subagents/agent-{sub.agent_id}.meta.json"
            task = next(c for c in rec.calls if c.call.sub is sub)
            files[meta] = [json.dumps({"agentType": "Explore", "toolUseId": task.call_id}).encode() + b"\n"]
            sub_checked = check(sub_rec, [], [], sub_path)
            sessions.append(
                _session_entry(
                    sub_path,
                    sub,
                    sub_rec,
                    f"Explore subagent spawned by the `Task` call {task.call_id}.",
                    sub_checked.episodes,
                    [],
                    [],
                    parent=s.sid,
                )
            )
            sessions[-1]["cases"] = []
    for rel, members in evals.items():
        task = rel.rsplit("_", 2)[-2]
        files[rel] = [inspect_eval_zip(task, 599, members[0][0].start, members)]
    for rel, lines in files.items():
        p = out_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"".join(lines))
    by_file: dict[str, dict[str, Any]] = {}
    for e in sessions:
        f = by_file.setdefault(e["path"], {"path": e["path"], "format": e["format"], "sessions": 0, "calls": 0})
        f["sessions"] += 1
        f["calls"] += e["calls"]
    not_transcripts = sorted(r for r in files if r.endswith(".meta.json")) + sorted(companions)
    expected = {
        "generated_by": "sample_data/make_samples.py",
        "transcript_files": sorted(by_file.values(), key=lambda f: f["path"]),
        "other_files": not_transcripts
        + ["README.md", "contents.py", ".expected.json", "loopcheck.py", "make_samples.py", "transcript_writer.py"],
        "sessions": sessions,
    }
    (out_dir / ".expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    (out_dir / "README.md").write_text(readme(expected))
    return expected


def _session_entry(
    path: str,
    s: Session,
    rec: Recorder,
    summary: str,
    episodes: list[dict[str, Any]],
    benign: list[dict[str, Any]],
    notes: list[str],
    parent: str | None = None,
) -> dict[str, Any]:
    return {
        "path": path,
        "format": s.fmt,
        "session_id": rec.session_id,
        "parent_session_id": parent,
        # OpenAI messages have no cwd (ours sits in metadata.project); the benchmark formats record none either
        "cwd": s.cwd if s.fmt in ("pi", "claude_code", "codex", "opencode") else None,
        "model": s.model,
        "started_at": rec.first_ts,
        "summary": summary,
        "user_prompts": rec.user_turns,
        "calls": len(rec.calls),
        "calls_without_result": sum(c.result is None for c in rec.calls),
        "error_calls": sum(bool(c.is_error) for c in rec.calls) if s.fmt != "openai_messages" else None,
        "nested_calls": sum(c.parent_id is not None for c in rec.calls),
        "tools": dict(sorted(_count(c.tool for c in rec.calls).items())),
        "findings": episodes,
        "not_loops": benign,
        "notes": notes,
    }


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def readme(exp: dict[str, Any]) -> str:
    sess = exp["sessions"]
    n_find = sum(len(s["findings"]) for s in sess)
    lines = [
        "# sample_data",
        "",
        "Transcripts loopscope wrote itself, in the on-disk layout of each agent, with loops planted in some sessions.",
        "Everything here is generated by `make_samples.py` (fixed ids, seeds and timestamps: a re-run reproduces every "
        "byte) from scenarios that name the calls forming each loop. `loopcheck.py` recomputes every loop signal of "
        "`docs/detectors.md` on the rendered calls and refuses to write the files if a signal fires outside a declared "
        "episode, so this page is exact. `.expected.json` holds the same facts for tests (call ids, seqs, tokens).",
        "",
        (
            "    python sample_data/make_samples.py     # regenerate (uses the loopscope venv for orjson, "
            "falls back to json)"
        ),
        "    loopscope ingest sample_data/           # the .py/.md/.json files here are skipped as non-transcripts",
        "",
        "| folder | layout |",
        "|---|---|",
        "| `pi/` | `~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl`, session format v3 |",
        "| `claude_code/` | `~/.claude/projects/<cwd with / -> ->/<sessionId>.jsonl`, subagents in "
        "`<sessionId>/subagents/agent-<id>.jsonl` (+ `.meta.json`, not a transcript) |",
        "| `codex/` | `~/.codex/sessions/YYYY/MM/DD/rollout-<timestamp>-<uuid>.jsonl` |",
        "| `openai_messages/` | one chat-completions conversation per line (`messages`, `tools`, `id`) |",
        "| `swe_agent/` | SWE-agent / EnIGMA `trajectories/<user>/<run>/<instance>.traj` (`trajectory`, `history`, "
        "`info.model_stats`); session id `<run>/<instance>` |",
        "| `mini_swe_agent/` | mini-swe-agent `<run>/trajs/<instance>/<instance>.traj.json`, v1 text protocol (one "
        "```` ```bash ```` block per message, `<returncode>` replies); session id `<run>/<instance>` |",
        "| `openhands/` | an OpenHands saved trajectory: one JSON array of V0 events; session id = file stem |",
        "| `inspect/` | an Inspect `.eval` zip (`header.json`, `samples/<id>_epoch_<n>.json`, deflated); one session "
        "per sample, id = the sample's `uuid` |",
        "| `gemini/` | Gemini CLI `~/.gemini/tmp/<project hash>/chats/session-<start>-<id8>.json` (one "
        "ConversationRecord) |",
        "| `opencode/` | opencode `storage/session/<projectID>/ses_*.json` (the file ingested), with "
        "`storage/message/<ses>/` and `storage/part/<msg>/` (read with it, not transcripts on their own) |",
        "",
        f"{len(sess)} sessions, {sum(s['calls'] for s in sess)} tool calls, {n_find} loop episodes.",
        "",
        "## Conventions",
        "",
        "- `seq` is the call's 0-based position among the session's calls in transcript order (pi: nested calls "
        "follow the script call that made them). `user turn` is the 0-based index of the user prompt.",
        "- One row per episode (`docs/detectors.md`: a maximal run of calls inside one user turn held together by one "
        "pattern). "
        "`kind` is the pattern that defines the episode; `also fires` lists the other threshold-free signals that "
        "hold on the same calls (a stuck streak of failing calls is also a failure run and a window count). A detector "
        "is expected to report each episode once, under `kind`.",
        "- `calls` counts the calls in the episode (for `window`: the occurrences of the repeated call; for `text`: "
        "the calls issued by the repeating messages). `repeats`: identical calls (streak, nested), full blocks "
        "(cycle), calls (drift, failure, window), messages (text). `period`: the block length of a cycle, 1 for a "
        "streak.",
        "- `stuck`: the repeats made no progress (same result or same error). `wasted tokens`: the usage of the API "
        "responses that issued the episode's calls after its first occurrence (after the first block for a cycle), "
        "for a stuck episode; 0 when its repeats made progress (their tokens are repeat tokens, not waste), where the "
        "format records no usage (OpenAI messages) or all calls came from one response (nested).",
        "",
        "## Sessions",
        "",
    ]
    for s in sess:
        lines += [f"### `{s['path']}`", ""]
        parent = f", subagent of `{s['parent_session_id']}`" if s["parent_session_id"] else ""
        lines += [
            f"{s['format']}, session `{s['session_id']}`{parent}, cwd `{s['cwd'] or '-'}`, {s['model']}, "
            f"{s['started_at']}. {s['user_prompts']} user prompt(s), {s['calls']} calls"
            + (f" ({s['calls_without_result']} without result)" if s["calls_without_result"] else "")
            + (f", {s['nested_calls']} nested" if s["nested_calls"] else "")
            + (f", {s['error_calls']} errors" if s["error_calls"] else "")
            + ".",
            "",
            s["summary"],
            "",
        ]
        if s["findings"]:
            lines += [
                "| kind | tools | seqs | calls | repeats | period | stuck | user turn | wasted tokens | also fires |",
                "|---|---|---|---|---|---|---|---|---|---|",
            ]
            for f in s["findings"]:
                lines.append(
                    f"| {f['kind']} | {', '.join(f['tools'])} | {f['first_seq']}-{f['last_seq']} | "
                    f"{f['calls']} | {f['repeats']} | {f['period'] or ''} | {str(f['stuck']).lower()} | "
                    f"{f['user_turn']} | {f['wasted_tokens']:,} | {', '.join(f['also_fires']) or '-'} |"
                )
            lines.append("")
            lines += [f"- {f['kind']}: {f['note']}" for f in s["findings"] if f["note"]]
        else:
            lines.append("**No loop.**")
        lines += [
            f"- Not a loop ({b['kind']} signal fires on seqs {b['call_seqs']}): {b['reason']}" for b in s["not_loops"]
        ]
        lines += [f"- {n}" for n in s["notes"]]
        lines.append("")
    lines += ["## Coverage", "", "| case | where |", "|---|---|"]
    where: dict[str, list[str]] = {}
    for s in sess:
        for f in s["findings"]:
            where.setdefault(f"loop: {f['kind']}{'' if f['stuck'] else ' (not stuck)'}", []).append(s["path"])
        for c in s.get("cases", []):
            where.setdefault(c, []).append(s["path"])
    for k in sorted(where):
        lines.append(f"| {k} | " + "<br>".join(f"`{p}`" for p in where[k]) + " |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE, help="where to write (default: this folder)")
    args = ap.parse_args()
    exp = render_all(args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json"))
    print(
        f"wrote {len(exp['transcript_files'])} transcript files, {len(exp['sessions'])} sessions, "
        f"{sum(len(s['findings']) for s in exp['sessions'])} loop episodes ({size / 1024:.0f} KiB) to {args.out}"
    )


if __name__ == "__main__":
    main()
