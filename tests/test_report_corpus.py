"""A small store for the report tests: pi transcripts with loops, hostile markup, fake secrets and an unreadable
line, plus a ``findings`` table written by hand with the scan's contract schema (until the real scan lands).

No tests live here; the report test modules import the builders.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers import ingest_paths, write_jsonl

from analyzer.store import connection

if TYPE_CHECKING:
    from analyzer.results import Calibration, Replay

# Fake secrets, assembled from parts so no scanner mistakes this file for a leak.
SECRETS = {
    "anthropic": "sk-ant-" + "api03-" + "Zx9" * 12 + "AbCd",
    "openai": "sk-" + "proj-" + "Q7w" * 10 + "T3Blbk" + "FJ" + "m2" * 6,
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2" * 9,
    "slack": "xoxb-" + "123456789012-" + "1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx",
    "stripe": "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "google": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "jwt": (
        "eyJ"
        + "hbGciOiJIUzI1NiJ9"
        + ".eyJ"
        + "zdWIiOiIxMjM0NTY3ODkwIn0"
        + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    ),
    "pem": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq0\nx9Vb2Q==\n-----END RSA PRIVATE KEY-----",
    "password": "hunter2-" + "Secr3t",
}

SCRIPT = "<script>window.__pwned = 1; document.title = 'PWNED'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 2; document.title = 'PWNED'\">"
LINK_TOOL = 'fetch<a href="https://example.com/">x</a>'  # plotly draws <a> in labels as links unless escaped

T0 = "2026-03-02T10:00:00Z"


def _ts(i: int) -> str:
    return f"2026-03-02T10:{i // 60:02d}:{i % 60:02d}Z"


class PiSession:
    """Writes one pi session, one tool call per assistant message, with usage on every message."""

    def __init__(self, sid: str, cwd: str, day: str = "2026-03-02") -> None:
        self.sid = sid
        self.day = day
        self.recs: list[dict[str, Any]] = [
            {"type": "session", "version": 3, "id": sid, "timestamp": f"{day}T10:00:00Z", "cwd": cwd}
        ]
        self.n = 0
        self.calls: list[str] = []

    def _t(self) -> str:
        self.n += 1
        return f"{self.day}T10:{self.n // 60:02d}:{self.n % 60:02d}Z"

    def user(self, text: str) -> PiSession:
        self.recs.append(
            {
                "type": "message",
                "id": f"u{self.n}",
                "timestamp": self._t(),
                "message": {"role": "user", "content": text},
            }
        )
        return self

    def call(
        self, tool: str, args: dict[str, Any], result: str, error: bool = False, text: str = "", tokens: int = 1000
    ) -> PiSession:
        cid = f"{self.sid}-c{len(self.calls)}"
        self.calls.append(cid)
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        content.append({"type": "toolCall", "id": cid, "name": tool, "arguments": args})
        self.recs.append(
            {
                "type": "message",
                "id": f"a{self.n}",
                "timestamp": self._t(),
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": content,
                    "usage": {
                        "input": 10,
                        "output": 40,
                        "cacheRead": tokens - 50,
                        "cacheWrite": 0,
                        "cost": {"total": tokens / 1e6 * 3},
                    },
                },
            }
        )
        self.recs.append(
            {
                "type": "message",
                "id": f"r{self.n}",
                "timestamp": self._t(),
                "message": {
                    "role": "toolResult",
                    "toolCallId": cid,
                    "toolName": tool,
                    "content": [{"type": "text", "text": result}],
                    "isError": error,
                },
            }
        )
        return self

    def write(self, folder: Path) -> Path:
        return write_jsonl(folder / (re.sub(r"[^A-Za-z0-9-]", "_", self.sid) + ".jsonl"), self.recs)


FINDINGS_DDL = """
CREATE TABLE findings (
  finding_id VARCHAR, session_id VARCHAR, kind VARCHAR, period INTEGER, tools VARCHAR[], call_ids VARCHAR[],
  first_seq INTEGER, last_seq INTEGER, repeats INTEGER, stuck BOOLEAN, user_turn INTEGER, wasted_tokens BIGINT,
  estimated_tokens BIGINT, cost_usd DOUBLE
)"""


def add_findings(db: Path, rows: list[dict[str, Any]]) -> None:
    """Create the ``findings`` table with the scan's contract schema and insert ``rows`` (call ids are looked up
    from the store by seq range when a row gives ``seqs`` instead)."""
    con = connection.connect(db)
    try:
        con.execute("DROP TABLE IF EXISTS findings")
        con.execute(FINDINGS_DDL)
        # Stores that track scans say which sessions were scanned; the report reads that as "scan has run".
        if connection.one(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'scan_state'")[0]:
            con.execute("DELETE FROM scan_state")
            con.execute("INSERT INTO scan_state (session_id) SELECT session_id FROM sessions")
        for i, r in enumerate(rows):
            seqs = r.pop("seqs")
            ids = [
                row[0]
                for row in con.execute(
                    "SELECT call_id FROM calls WHERE session_id = ? "
                    "AND seq IN (SELECT unnest(?::INTEGER[])) ORDER BY seq",
                    [r["session_id"], seqs],
                ).fetchall()
            ]
            tools = [
                row[0]
                for row in con.execute(
                    "SELECT DISTINCT tool FROM calls WHERE session_id = ? AND seq IN (SELECT unnest(?::INTEGER[]))",
                    [r["session_id"], seqs],
                ).fetchall()
            ]
            con.execute(
                "INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    r.get("finding_id", f"f{i}"),
                    r["session_id"],
                    r["kind"],
                    r.get("period"),
                    sorted(tools),
                    ids,
                    min(seqs),
                    max(seqs),
                    r.get("repeats", len(seqs)),
                    r.get("stuck", True),
                    r.get("user_turn", 0),
                    r.get("wasted_tokens", 1000 * (len(seqs) - 1)),
                    r.get("estimated_tokens", 50 * len(seqs)),
                    r.get("cost_usd", 0.003 * (len(seqs) - 1)),
                ],
            )
    finally:
        con.close()


def build_store(tmp: Path, with_findings: bool = True) -> Path:
    """Three sessions with loops (one with a hostile id), one without, and a file with an unreadable line."""
    src = tmp / "transcripts"
    hostile = f"Build failed {SCRIPT} and {IMG} while reading token {SECRETS['anthropic']}"

    a = PiSession("sess-loop", "/home/dev/projects/webapp")
    a.user("fix the failing test")
    for _ in range(6):  # seq 0-5: a stuck streak of the same failing command
        a.call("bash", {"command": "npm test"}, hostile, error=True, text="Let me run the tests again.")
    for n in (20, 30, 40, 50):  # seq 6-9: drift: the same grep with a different head
        a.call("bash", {"command": f"grep -n handler src/app.js | head -{n}"}, f"12: handler() // {n} lines")
    a.call("read", {"path": "src/app.js", "note": IMG}, "const x = 1;")  # seq 10
    a.call(
        "bash",
        {
            "command": f"export OPENAI_API_KEY={SECRETS['openai']} && curl -H 'Authorization: Bearer "
            f"{SECRETS['github']}' https://api.example.com"
        },
        "ok",
    )  # seq 11
    a.user("now deploy")
    for _ in range(3):  # seq 12-17: a cycle of two calls
        a.call("read", {"path": "deploy.yaml"}, f"aws_key: {SECRETS['aws']}\nSTRIPE_KEY={SECRETS['stripe']}")
        a.call("edit", {"path": "deploy.yaml", "old": "a", "new": "b"}, "Error: old text not found", error=True)
    for _ in range(3):  # seq 18-20: a text loop, the same sentence with markup
        a.call("bash", {"command": "ls"}, "a b c", text=f"I will check the directory {SCRIPT}.")
    a.write(src)

    b = PiSession("../../x", "/srv/evil", day="2026-03-03")
    b.user(SCRIPT)
    for _ in range(4):
        b.call(LINK_TOOL, {"url": "https://example.com/?q=" + IMG}, f"{SECRETS['jwt']} {SECRETS['pem']}", error=True)
    b.write(src)

    c = PiSession("sess-window", "/home/dev/projects/api", day="2026-03-04")
    c.user("tidy up")
    for i in range(8):
        c.call("read", {"path": f"f{i % 3}.py"}, f"contents {i % 3} GOOGLE_API_KEY={SECRETS['google']}")
    c.write(src)

    d = PiSession("sess-clean", "/home/dev/projects/api", day="2026-03-04")
    d.user("hello")
    d.call("read", {"path": "README.md"}, "# readme")
    d.write(src)

    bad = src / "broken.jsonl"
    bad.write_text(
        '{"type": "session", "version": 3, "id": "sess-broken", "timestamp": "2026-03-04T09:00:00Z", "cwd": "/b"}\n'
        '{"type": "message", "message": ' + SCRIPT + " SLACK " + SECRETS["slack"] + "\n"
        '{"type": "message", "id": "u1", "timestamp": "2026-03-04T09:00:01Z", '
        '"message": {"role": "user", "content": "hi"}}\n'
    )

    db = tmp / "store.duckdb"
    ingest_paths(db, src)
    if with_findings:
        add_findings(
            db,
            [
                {"session_id": "sess-loop", "kind": "streak", "seqs": list(range(0, 6)), "stuck": True},
                {"session_id": "sess-loop", "kind": "drift", "seqs": list(range(6, 10)), "stuck": False},
                {
                    "session_id": "sess-loop",
                    "kind": "cycle",
                    "period": 2,
                    "seqs": list(range(12, 18)),
                    "stuck": True,
                    "user_turn": 1,
                    "repeats": 3,
                },
                {"session_id": "sess-loop", "kind": "text", "seqs": [18, 19, 20], "stuck": True, "user_turn": 1},
                {"session_id": "../../x", "kind": "failure", "seqs": [0, 1, 2, 3], "stuck": True},
                {
                    "session_id": "sess-window",
                    "kind": "window",
                    "seqs": [0, 3, 6],
                    "stuck": False,
                    "repeats": 3,
                    "wasted_tokens": 2000,
                },
            ],
        )
    return db


def all_text(folder: Path) -> str:
    """Every byte the report wrote, as text (plotly.js excluded: it is the package's own file)."""
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "plotly-" not in p.name
    )


def sample_replay() -> Replay:
    """Replay rows as analyzer.guards.policies will hand them over: two presets, one false halt."""
    import polars as pl

    from analyzer.results import Replay

    return Replay(
        pl.DataFrame(
            {
                "session_id": ["sess-loop", "sess-loop", "../../x", "sess-window", "sess-window"],
                "policy": ["open-codesign", "pi-anti-doom-loop", "open-codesign", "open-codesign", "pi-anti-doom-loop"],
                "first_warn_call_id": ["sess-loop-c2", "sess-loop-c2", "../../x-c2", None, "sess-window-c6"],
                "halt_call_id": ["sess-loop-c4", "sess-loop-c3", None, None, "sess-window-c6"],
                "calls_after_halt": [17, 18, None, None, 2],
                "tokens_after_halt": [17000, 18000, None, None, 2000],
                "cost_after_halt_usd": [0.051, 0.054, None, None, 0.006],
                "halt_on": ["stuck", "stuck", None, None, "progress"],
            }
        )
    )


def sample_calibration() -> Calibration:
    """A small warn x halt sweep with a recommendation, shaped as analyzer.calibrate will produce it."""
    import polars as pl

    from analyzer.results import Calibration, Recommendation

    rows = []
    for warn in (2, 3, 4):
        for halt in range(warn + 1, warn + 6):
            rows.append(
                {
                    "warn": warn,
                    "halt": halt,
                    "window": 10,
                    "similarity": 0.55,
                    "stuck_caught": max(0, 12 - halt),
                    "median_calls_to_detect": float(halt),
                    "tokens_saved": max(0, 90000 - 9000 * halt - 1000 * warn),
                    "dollars_saved": max(0.0, 0.27 - 0.027 * halt),
                    "false_halt_sessions": max(0, 7 - halt),
                    "false_halt_rate": max(0.0, (7 - halt) / 40),
                }
            )
    rec = Recommendation(
        warn=3,
        halt=5,
        window=10,
        similarity=0.55,
        target_false_halt_rate=0.05,
        stuck_caught=7,
        tokens_saved=42000,
        dollars_saved=0.135,
        false_halt_rate=0.05,
        settings={
            "open-codesign": "WARN_REPEATS = 3\nHALT_REPEATS = 5",
            "pi-anti-doom-loop": "PI_ANTI_LOOP_REPEATS=5 <b>bold?</b>",
        },
        rationale="The most tokens saved with at most 5% of sessions halted while making progress.",
    )
    return Calibration(pl.DataFrame(rows), recommendation=rec, labels="the stuck/progress proxy")
