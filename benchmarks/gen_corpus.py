#!/usr/bin/env python3
"""Generate a synthetic multi-format transcript corpus for benchmarks.

    python benchmarks/gen_corpus.py --size-mb 500 --out /tmp/loopscope-corpus [--seed 7]
    python benchmarks/gen_corpus.py --sessions 600 --size-mb 600 --out /tmp/loopscope-600   # 600 sessions of ~1 MB

Why synthetic: a benchmark needs hundreds of megabytes of transcripts in all four formats, and nobody's real sessions
can ship with the project. The sessions are rendered by ``sample_data/transcript_writer.py``, the writer of the
project's own sample data, so the corpus has exactly the shapes of ``sample_data/`` (records, ids, usage, result
envelopes, directory layouts), with many sessions, a mix of healthy ones and planted loops, and a realistic line-size
distribution: mostly short lines, some tool results of tens to hundreds of KB, a few of megabytes.

Fast by construction: every large output is cut from a few blobs built once, the scenario templates are reused, and
files are streamed to disk as they are rendered. Deterministic for a given ``--seed``, ``--size-mb`` and
``--sessions``. Sized by MB alone, sessions average ~70 KB (2.7 user turns); ``--sessions N`` writes N sessions
instead and scales their number of user turns so the corpus still comes to about ``--size-mb`` (the issue's corpora
have ~1 MB sessions: 600 sessions, 596 MB).
A ``.manifest.json`` (hidden, so ``loopscope ingest`` ignores it) records the parameters and the planted loops.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.dont_write_bytecode = True  # keep sample_data/ free of __pycache__
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sample_data"))

import make_samples as ms  # noqa: E402
from transcript_writer import Call, Session, Step, Turn, new_uuid, render  # noqa: E402

FORMAT_WEIGHTS = {"pi": 0.3, "claude_code": 0.3, "codex": 0.3, "openai_messages": 0.1}
MODELS = {
    "pi": ["claude-sonnet-4-5", "claude-sonnet-4-5", "gpt-5.1-codex", "claude-opus-4-5"],
    "claude_code": [
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-5-20251101",
        "claude-haiku-4-5-20251001",
    ],
    "codex": ["gpt-5-codex", "gpt-5.1-codex", "gpt-5.1-codex"],
    "openai_messages": ["gpt-4.1", "gpt-4.1-mini", "gpt-5"],
}
CONVERSATIONS_PER_OPENAI_FILE = 150
SUBAGENT_RATE = 0.08  # share of Claude Code sessions that spawn a subagent
LOOP_RATE = 0.18  # share of user turns that contain a planted loop
BIG_RATE = 0.015  # share of read/shell results cut from a large blob
BLOB_SIZES = ((8 << 10, 60), (32 << 10, 25), (128 << 10, 10), (512 << 10, 4), (2 << 20, 1))  # (bytes, weight)

PROJECTS = [
    f"/home/{u}/src/{p}"
    for u in ("dana", "sam", "lee")
    for p in ("webshop", "billing-api", "infra", "docs-site", "mobile-app", "data-pipeline", "auth-service")
]
SRC_FILES = [
    "src/cart/cart.ts",
    "src/cart/totals.ts",
    "src/checkout/Summary.tsx",
    "src/lib/money.ts",
    "src/billing/proration.py",
    "src/billing/invoices.py",
    "src/billing/auth/session.py",
    "tests/conftest.py",
    "k8s/staging/api-deployment.yaml",
    "envs/staging/variables.tf",
    "sidebars.js",
    "docusaurus.config.js",
    "pipeline/jobs/daily_rollup.py",
    "pipeline/io/s3.py",
    "app/src/screens/Login.tsx",
    "README.md",
]
CONTENTS = [
    ms.CART_TS,
    ms.TOTALS_TS,
    ms.SUMMARY_TSX,
    ms.SESSION_PY,
    ms.PRORATION_PY,
    ms.INVOICES_PY,
    ms.CONFTEST,
    ms.DEPLOY_YAML,
    ms.TF_VARS,
    ms.SIDEBARS_JS,
    ms.DOCS_CONF,
    ms.PAGINATION_PY,
    ms.SDK_CLIENT_JS,
]
COMMANDS = [
    ("npm run build", ms.VITE_OK),
    ("npm test", ms.JEST_ALL),
    ("npm run lint", "eslint src --max-warnings 0\n"),
    ("pytest -q", "...........................                                    [100%]\n27 passed in 1.92s"),
    ("ruff check .", "All checks passed!"),
    ("git status --short", " M src/cart/totals.ts\n?? notes.md"),
    ("git diff --stat", " src/cart/totals.ts | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)"),
    (
        "kubectl -n staging get pods",
        "NAME                   READY   STATUS    RESTARTS   AGE\n"
        "api-7c9f6d5b8-2lq9x    1/1     Running   0          3h\n"
        "worker-5d8b7f6c9-kx2mp 1/1     Running   2          3h",
    ),
    ("terraform -chdir=envs/staging validate", "Success! The configuration is valid."),
    ("docker compose ps", "NAME                 IMAGE         STATUS\nwebshop-postgres-1   postgres:16   Up 2 hours"),
]
PROMPTS = [
    "Fix the failing tests in {f}.",
    "Refactor {f} so the totals are computed in one place.",
    "Why does the build fail on CI? Start with {f}.",
    "Add input validation to {f} and cover it with tests.",
    "Review {f} for error handling gaps.",
    "Update the docs for the change in {f}.",
    "The staging deploy is unhealthy; investigate.",
    "Rename the `qty` field to `quantity` everywhere.",
]


@dataclass
class Blobs:
    """A few large texts built once; every big tool result is a slice of one (fast, and realistic in size)."""

    logs: str
    code: str

    @staticmethod
    def build(rng: random.Random) -> Blobs:
        top = max(s for s, _ in BLOB_SIZES)
        lines, n = [], 0
        while n < top:
            line = (
                f"2026-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z {rng.choice(['INFO ', 'DEBUG', 'WARN '])} "
                f"worker[{rng.randint(100, 999)}] batch={rng.randint(1, 99999)} rows={rng.randint(0, 5000)} "
                f"took={rng.randint(1, 900)}ms queue={rng.randint(0, 40)}"
            )
            lines.append(line)
            n += len(line) + 1
        code, m = [], 0
        while m < top:
            block = rng.choice(CONTENTS)
            code.append(block)
            m += len(block)
        return Blobs("\n".join(lines), "".join(code))

    def cut(self, rng: random.Random, kind: str) -> str:
        size = rng.choices([s for s, _ in BLOB_SIZES], [w for _, w in BLOB_SIZES])[0]
        src = self.logs if kind == "logs" else self.code
        start = rng.randrange(0, max(1, len(src) - size))
        return src[start : start + size]


class Scenarios:
    """Turns made of healthy work, with a planted loop in some of them."""

    def __init__(self, rng: random.Random, blobs: Blobs, big_rate: float = BIG_RATE) -> None:
        self.rng, self.blobs, self.big_rate = rng, blobs, big_rate
        self.loops: Counter[str] = Counter()
        self.n = 0

    def _big(self, kind: str) -> str | None:
        return self.blobs.cut(self.rng, kind) if self.rng.random() < self.big_rate else None

    def healthy_call(self, fmt: str) -> Call:
        r, self.n = self.rng, self.n + 1
        kind = r.random()
        if kind < 0.35:
            stem, ext = r.choice(SRC_FILES).rsplit(".", 1)
            return ms.read(f"{stem}_{self.n}.{ext}", self._big("code") or r.choice(CONTENTS))
        if kind < 0.65:
            cmd, out = r.choice(COMMANDS)
            return ms.sh(
                f"{cmd} # {self.n}" if r.random() < 0.5 else f"cd {r.choice(['.', 'src', 'app'])} && {cmd}",
                self._big("logs") or out,
                secs=r.uniform(0.2, 12),
            )
        if kind < 0.85:
            f = r.choice(SRC_FILES)
            return ms.edit(
                f,
                f"const value{self.n} = compute(input);",
                f"const value{self.n} = compute(input, opts);",
                anchor=f"function step{self.n}()",
            )
        if kind < 0.93:
            return ms.grep(f"symbol_{self.n}", r.choice(["src", "tests", "."]), "\n".join(r.sample(SRC_FILES, 3)))
        return ms.write(f"notes/generated_{self.n}.md", "# Notes\n\n" + "\n".join(r.sample(PROMPTS, 3)))

    def loop_steps(self, fmt: str) -> list[Step]:
        r = self.rng
        kinds = ["streak", "cycle", "drift", "failure", "poll", "text"] + (["nested"] if fmt == "pi" else [])
        kind = r.choice(kinds)
        self.loops[kind] += 1
        n = r.randint(3, 12)
        if kind == "streak":
            cmd, out = r.choice(COMMANDS)
            c = ms.sh(cmd, "Error: " + (self._big("logs") or out), 1)
            return [ms.step("", Call(c.op, dict(c.args), c.out, c.code)) for _ in range(n)]
        if kind == "cycle":
            period, reps = r.choice([2, 3]), r.randint(3, 6)
            block = [self.healthy_call(fmt) for _ in range(period)]
            return [ms.step("", Call(c.op, dict(c.args), c.out, c.code)) for _ in range(reps) for c in block]
        if kind == "drift":
            url = f"http://svc-{r.randint(1, 99)}.internal:8080/healthz"
            return [
                ms.step("", ms.sh(f"sleep {5 * (i + 1)} && curl -sS --retry 3 {url}", ms.CURL_ERR, 7)) for i in range(n)
            ]
        if kind == "failure":
            return [
                ms.step("", ms.edit("src/cart/totals.ts", f"guess number {i} {r.random()}", "x", 1)) for i in range(n)
            ]
        if kind == "poll":
            return [
                ms.step("", ms.sh("sleep 30 && gh run view 13877216420", f"in progress: {i}/{n} jobs done", secs=30.0))
                for i in range(n)
            ]
        if kind == "text":
            return [
                ms.step("Let me check the logs again to see what is going on.", self.healthy_call(fmt))
                for _ in range(n)
            ]
        kids = [ms.read("config/legacy.yaml", ms.LEGACY_YAML) for _ in range(n)]
        return [
            ms.step(
                "Polling inside one script.",
                Call(
                    "script",
                    {"code": f"for (let i = 0; i < {n}; i++) await tools.read({{path: 'config/legacy.yaml'}})"},
                    "done",
                    children=kids,
                ),
            )
        ]

    def turns(self, fmt: str, n_turns: int) -> list[Turn]:
        r = self.rng
        out = []
        for _ in range(n_turns):
            steps = [
                ms.step(r.choice(["", "", "Let me look.", "Next, the tests."]), self.healthy_call(fmt))
                for _ in range(r.randint(2, 14))
            ]
            if r.random() < LOOP_RATE:
                at = r.randrange(len(steps) + 1)
                steps[at:at] = self.loop_steps(fmt)
            steps.append(ms.step("Done: " + r.choice(PROMPTS).format(f=r.choice(SRC_FILES)).lower()))
            out.append(Turn(r.choice(PROMPTS).format(f=r.choice(SRC_FILES)), steps, wait=r.uniform(5, 600)))
        return out


TURNS = [1, 1, 2, 2, 3, 4, 6]  # user turns per session, before --sessions scales them
BYTES_PER_TURN = 26_000  # first guess of a user turn's size, refined as the corpus is written


def _session(rng: random.Random, sc: Scenarios, fmt: str, t0: datetime, turn_scale: float = 1.0) -> Session:
    start = t0 + timedelta(seconds=rng.randrange(0, 60 * 86400))
    s = Session(
        fmt,
        new_uuid(rng),
        rng.choice(PROJECTS),
        start,
        rng.choice(MODELS[fmt]),
        sc.turns(fmt, max(1, round(rng.choice(TURNS) * turn_scale))),
        seed=rng.getrandbits(32),
        version=rng.choice(["2.0.76", "2.1.7"])
        if fmt == "claude_code"
        else rng.choice(["0.58.0", "0.63.0"])
        if fmt == "codex"
        else "",
        variant=rng.choice(["exec", "exec", "shell"]) if fmt == "codex" else "",
    )
    if fmt == "openai_messages":
        s.sid = f"conv-{s.sid}"
    if fmt == "claude_code" and rng.random() < SUBAGENT_RATE:  # a Task call with its subagent file
        sub = Session(
            fmt,
            s.sid,
            s.cwd,
            start + timedelta(seconds=12),
            "claude-haiku-4-5-20251001",
            sc.turns(fmt, 1),
            seed=rng.getrandbits(32),
            version=s.version,
        )
        task = Call(
            "task",
            {"subagent_type": "Explore", "description": "Explore the code", "prompt": sub.turns[0].prompt},
            ms.REPORT,
            secs=30.0,
            sub=sub,
        )
        s.turns[0].steps.insert(0, ms.step("I'll have an Explore agent map the code first.", task))
    return s


def _path(s: Session) -> str:
    iso = s.start.strftime("%Y-%m-%dT%H:%M:%S")
    if s.fmt == "pi":
        return ms.pi_path(s.cwd, iso + ".000", s.sid)
    if s.fmt == "claude_code":
        return ms.claude_path(s.cwd, s.sid)
    return ms.codex_path(iso, s.sid)


def generate(
    out: Path,
    size_mb: float,
    seed: int = 7,
    progress: Callable[[str], None] | None = print,
    sessions_target: int | None = None,
    big_rate: float = BIG_RATE,
) -> dict:
    """Write the corpus; return its manifest. With ``sessions_target``, stop after that many sessions (subagents
    count, as in the manifest) and size each session's turns so the total comes to about ``size_mb``; ``big_rate``
    is the share of read/shell results cut from a large blob (more: fewer, larger calls per MB)."""
    t_start = time.perf_counter()
    rng = random.Random(seed)
    blobs = Blobs.build(random.Random(seed + 1))
    sc = Scenarios(rng, blobs, big_rate)
    target = int(size_mb * 1e6)
    out.mkdir(parents=True, exist_ok=True)
    t0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    written, files, sessions = 0, 0, Counter()
    by_format = Counter()
    fmts, weights = list(FORMAT_WEIGHTS), list(FORMAT_WEIGHTS.values())
    openai_f = None
    openai_left = 0
    next_report = 50e6
    turns_written = 0
    try:
        while written < target if sessions_target is None else sum(sessions.values()) < sessions_target:
            fmt = rng.choices(fmts, weights)[0]
            scale = 1.0
            if sessions_target is not None:  # the turns the remaining bytes and sessions call for, on average
                per_turn = written / turns_written if turns_written else BYTES_PER_TURN
                left = max(1, sessions_target - sum(sessions.values()))
                scale = max(0.0, target - written) / left / per_turn / (sum(TURNS) / len(TURNS))
            s = _session(rng, sc, fmt, t0, scale)
            if fmt == "openai_messages":
                if openai_left == 0:
                    if openai_f:
                        openai_f.close()
                    p = out / "openai_messages" / f"batch-{files:05d}.jsonl"
                    p.parent.mkdir(parents=True, exist_ok=True)
                    openai_f, openai_left = p.open("wb"), CONVERSATIONS_PER_OPENAI_FILE
                    files += 1
                data = b"".join(render(s))
                openai_f.write(data)
                openai_left -= 1
                n, subs = len(data), []
            else:
                subs: list = []
                n = _write(out / _path(s), render(s, None, subs))
                files += 1
                for sub, _ in subs:
                    n += _write(
                        out / f"{Path(_path(s)).with_suffix('')}/subagents/agent-{sub.agent_id}.jsonl", render(sub)
                    )
                    files += 1
            written += n
            turns_written += len(s.turns) + sum(len(sub.turns) for sub, _ in subs)
            by_format[fmt] += n
            sessions[fmt] += 1 + len(subs)
            if progress and written >= next_report:
                progress(f"  {written / 1e6:,.0f} MB ...")
                next_report += 50e6
    finally:
        if openai_f:
            openai_f.close()
    manifest = {
        "seed": seed,
        "size_mb": size_mb,
        "sessions_target": sessions_target,
        "big_rate": big_rate,
        "bytes": written,
        "files": files,
        "sessions": dict(sessions),
        "bytes_by_format": dict(by_format),
        "planted_loops": dict(sc.loops),
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    (out / ".manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _write(path: Path, lines: Iterator[bytes]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("wb") as f:
        for line in lines:
            f.write(line)
            n += len(line)
    return n


def ensure(
    out: Path, size_mb: float, seed: int, sessions_target: int | None = None, big_rate: float = BIG_RATE
) -> dict:
    """The corpus at ``out``, generated unless one with the same parameters is already there."""
    mf = out / ".manifest.json"
    if mf.exists():
        m = json.loads(mf.read_text())
        if (m.get("seed"), m.get("size_mb"), m.get("sessions_target"), m.get("big_rate", BIG_RATE)) == (
            seed,
            size_mb,
            sessions_target,
            big_rate,
        ):
            return m
        raise SystemExit(
            f"{out} holds a corpus with other parameters ({m.get('size_mb')} MB, "
            f"{m.get('sessions_target') or 'any number of'} sessions, seed {m.get('seed')}); "
            "remove it or pass another --out"
        )
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not a generated corpus; pass another --out")
    what = f"{sessions_target:,}-session, " if sessions_target else ""
    print(f"generating a {what}{size_mb:g} MB corpus in {out} (seed {seed}) ...", flush=True)
    return generate(out, size_mb, seed, sessions_target=sessions_target, big_rate=big_rate)


def main() -> None:
    ap = argparse.ArgumentParser(description="Generate a synthetic pi / Claude Code / Codex / OpenAI-messages corpus.")
    ap.add_argument("--size-mb", type=float, default=500, help="approximate corpus size in MB (default 500)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/loopscope-corpus"), help="output folder")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="write this many sessions, their length scaled to fill --size-mb (default: as many as fit)",
    )
    ap.add_argument(
        "--big-rate",
        type=float,
        default=BIG_RATE,
        help=f"share of read/shell results cut from a large blob (default {BIG_RATE})",
    )
    args = ap.parse_args()
    if args.sessions is not None and args.sessions < 1:
        ap.error("--sessions must be at least 1")
    if not 0 <= args.big_rate <= 1:
        ap.error("--big-rate is a share, between 0 and 1")
    if args.out.exists() and any(args.out.iterdir()):
        raise SystemExit(f"{args.out} is not empty; remove it first")
    m = generate(args.out, args.size_mb, args.seed, sessions_target=args.sessions, big_rate=args.big_rate)
    print(
        f"wrote {m['bytes'] / 1e6:,.1f} MB in {m['files']:,} files, {sum(m['sessions'].values()):,} sessions "
        f"({', '.join(f'{k} {v / 1e6:,.0f} MB' for k, v in m['bytes_by_format'].items())}) in {m['seconds']} s; "
        f"planted loops: {m['planted_loops']}"
    )


if __name__ == "__main__":
    main()
