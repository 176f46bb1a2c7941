"""Replay: what each loop guard would have done on the sessions in the store, as recorded.

The store's calls and messages are read in two bulk queries and turned into one event stream per session
(``load_corpus``); a policy's guard simulator is run over each stream (``simulate``), and the verdicts become one row
per session, one row per halt and corpus totals (``replay``). A corpus is loaded once and replayed under any number
of policies — the calibration sweep reuses it.

What the figures mean:

- A **halt** is the first HALT verdict in a run (a run = the calls answering one user prompt): a halt, terminate,
  refusal, permission ask, stuck error or pi-anti-doom-loop abort. For gitagent the run stops at the end of the first
  batch whose every result said terminate. The guard keeps simulating after it (the verdict stream is informative),
  but nothing later in that run counts as a new halt.
- Every warning has a place: the call it applies to, or — a text rule firing at an assistant message that issued no
  call — that message. ``first_warn_call_id`` is the call of the session's first warning (NULL when it came at a
  message), ``first_warn_turn_id`` the turn id of the message that issued that call or of the message itself, and
  ``first_warn_seq`` the call's seq, or for a message the seq of the next call recorded after it (NULL if none).
- ``halt_call_id`` is the call at which the run stops. When a text rule stops it at an assistant message, it is the
  first call issued by that message or by a later message of the same run (NULL when the run issued none).
- **Saved** figures count what came after the halt in the transcript: ``calls_after_halt`` the calls with a higher
  ``seq``, ``tokens_after_halt`` the deduplicated usage (``turns.total_tokens`` of rows with ``usage_counted``) of
  assistant messages after the message at which the run stopped, ``cost_after_halt_usd`` the same rows'
  ``turns.cost_usd``. With ``scope="run"`` (the default) both stop at the next user prompt — the user would have
  prompted again after a halt — and a session's row sums every halted run; with ``scope="session"`` the first halt
  ends the session and everything after it counts.
- ``--calls`` (``verdicts=True``) lists one row per verdict: ``at`` = ``call`` for a call the guard warned or halted,
  ``message`` for a verdict at a message without calls (``turn_id``, and ``seq`` the next call's; for a message that
  stopped its run, ``call_id``/``seq`` are the run's halting call). ``halt`` is true on exactly the rows of the
  session's halts — the same call as ``halt_call_id``/``halt_seq`` of the halt rows — and those rows carry the same
  ``calls_after_halt`` and ``tokens_after_halt``. Other halt verdicts are not the halt: gitagent's ``terminate``
  results before the batch that ends the run, or the verdicts after a run already stopped.
- ``halt_on`` classifies the halt with the ``findings`` table written by ``loopscope scan``: ``stuck`` when the halting
  call's ``seq`` lies in a finding of the session whose ``stuck`` is true, ``progress`` when it lies only in findings
  that made progress (a false halt), ``none`` when it lies in no finding. NULL when the session was never scanned (no
  ``scan_state`` row) or the halt has no call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from sys import intern
from typing import Any

import duckdb
import orjson
import polars as pl

from analyzer.detect.semantics import (
    POLL_RESULT_CHARS,
    POLL_TOOLS,
    POLL_WORDS,
    SHELL_POLL_TOOLS,
    running_poll,
)
from analyzer.guards import HALT, LEVELS, WARN, Call, Guard, Message, Step, UserPrompt, Verdict
from analyzer.guards.policies import Policy
from analyzer.machine import cores
from analyzer.store.connection import frame, has_table, rows_of
from analyzer.store.filters import SessionFilter

ARGS_LIMIT = 100_000  # characters of arguments kept per call (pi identity-caps payloads at 100 KB)


def _loads(args: str | None) -> Any:
    try:
        return orjson.loads(args or "{}")
    except orjson.JSONDecodeError:
        return None


# -- the corpus --------------------------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Session:
    session_id: str
    steps: list[Step]
    calls: list[Call]
    turn_ids: list[str]
    turn_user: list[int]  # user turn of each message, by position
    turn_tokens: list[int]  # counted usage of each assistant message (0 for prompts and duplicates)
    turn_cost: list[float]


@dataclass(slots=True)
class Corpus:
    sessions: list[Session]
    # session_id -> [(first_seq, last_seq, stuck)] of its findings
    findings: dict[str, list[tuple[int, int, bool]]] = field(default_factory=dict)
    # sessions whose findings are current (``loopscope scan`` ran on them)
    scanned: set[str] = field(default_factory=set)

    @property
    def unscanned(self) -> int:
        return sum(1 for s in self.sessions if s.session_id not in self.scanned)


_CALL_COLS = (
    "session_id",
    "seq",
    "call_id",
    "turn_id",
    "user_turn",
    "tool",
    "args",
    "call_key",
    "call_key_ordered",
    "call_key_shallow",
    "result_key",
    "is_error",
    "parent_call_id",
    "action_key",
    "action_args",
    "poll_result",
)
_TURN_COLS = ("session_id", "turn_index", "turn_id", "role", "text", "user_turn", "tokens", "cost")


def _sql_list(names: Sequence[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


# The result of a call that may be a poll (``semantics.POLLS``): only those calls' results are read, since a poll is
# told from its result (``running_poll``); a shell poll's arguments hold one of ``POLL_WORDS``.
POLL_RESULT = (
    f"CASE WHEN tool IN ({_sql_list(POLL_TOOLS)}) OR (tool IN ({_sql_list(SHELL_POLL_TOOLS)}) "
    f"AND regexp_matches(args, '{'|'.join(POLL_WORDS)}')) THEN left(result_text, {POLL_RESULT_CHARS}) END "
    "AS poll_result"
)


@dataclass(frozen=True)
class CorpusFrames:
    """What ``load_corpus`` reads from the store, before it becomes Python objects: plain frames and small dicts,
    cheap to send to a worker process, so a worker can build and replay sessions the main process only read."""

    turns: pl.DataFrame
    calls: pl.DataFrame
    findings: dict[str, list[tuple[int, int, bool]]]
    scanned: set[str]


def read_corpus(
    con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter(), placed: bool = False
) -> CorpusFrames:
    """Every matching session's messages and calls, in transcript order, in two ordered bulk reads. ``placed``: the
    connection has recorded where each session's rows lie (``record_places``), so each read is bounded by them
    too and skips the row groups of other sessions (a chunk of a replay, read many times over one store)."""
    where, params = flt.where("s")
    ids = f"SELECT s.session_id FROM sessions s WHERE {where}"
    scope = f"session_id IN ({ids})"

    def rows(table: str) -> str:
        return f"{rows_of(con, table, ids, params)} AND {scope}" if placed else scope

    turns = frame(
        con,
        f"""
        SELECT session_id, turn_index, turn_id, role, CASE WHEN role = 'assistant' THEN text END AS text, user_turn,
               CASE WHEN role = 'assistant' AND usage_counted THEN coalesce(total_tokens, 0) ELSE 0 END AS tokens,
               CASE WHEN role = 'assistant' AND usage_counted THEN coalesce(cost_usd, 0) ELSE 0 END AS cost
        FROM turns WHERE {rows("turns")} ORDER BY session_id, turn_index""",
        params,
    )
    calls = frame(
        con,
        f"""
        SELECT session_id, seq, call_id, turn_id, user_turn, tool, left(args, {ARGS_LIMIT}) AS args, call_key,
               call_key_ordered, call_key_shallow, result_key, is_error, parent_call_id, action_key,
               left(action_args, {ARGS_LIMIT}) AS action_args, {POLL_RESULT}
        FROM calls WHERE {rows("calls")} ORDER BY session_id, seq""",
        params,
    )
    findings, scanned = load_findings(con, scope, params)
    return CorpusFrames(turns, calls, findings, scanned)


def build_corpus(frames: CorpusFrames) -> Corpus:
    """The sessions of ``frames`` as event streams (``_build``), with their findings."""
    turns, calls = frames.turns, frames.calls
    tcols = [turns.get_column(c).to_list() for c in _TURN_COLS]
    ccols = [calls.get_column(c).to_list() for c in _CALL_COLS]
    sessions: list[Session] = []
    ti = ci = 0
    nt, nc = turns.height, calls.height
    while ti < nt or ci < nc:
        sid = min(x for x in (tcols[0][ti] if ti < nt else None, ccols[0][ci] if ci < nc else None) if x is not None)
        t0 = ti
        while ti < nt and tcols[0][ti] == sid:
            ti += 1
        c0 = ci
        while ci < nc and ccols[0][ci] == sid:
            ci += 1
        sessions.append(_build(sid, [col[t0:ti] for col in tcols], [col[c0:ci] for col in ccols]))
    return Corpus(sessions, frames.findings, frames.scanned)


def load_corpus(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter()) -> Corpus:
    """Every matching session's messages and calls as event streams (``read_corpus``, then ``build_corpus``)."""
    return build_corpus(read_corpus(con, flt))


def _build(sid: str, t: list[list[Any]], c: list[list[Any]]) -> Session:
    """One session's event stream: prompts and messages in turn order, each message followed by its calls."""
    _, _, turn_ids, roles, texts, t_user, tokens, costs = t
    steps: list[Step] = []
    by_id: dict[tuple[str, int], Message] = {}
    first_by_id: dict[str, Message] = {}
    last_msg_of_user: dict[int, Message] = {}
    for pos, role in enumerate(roles):
        if role == "user":
            steps.append(UserPrompt(pos, t_user[pos]))
            continue
        msg = Message(pos, turn_ids[pos], t_user[pos], texts[pos])
        steps.append(msg)
        by_id.setdefault((turn_ids[pos], t_user[pos]), msg)
        first_by_id.setdefault(turn_ids[pos], msg)
        last_msg_of_user[t_user[pos]] = msg
    calls: list[Call] = []
    _, seqs, cids, c_turn, c_user, tools, args, k, ko, ks, rk, err, parent, ka, aargs, polls = c
    synthetic: dict[int, Message] = {}
    prev: Message | None = None
    for i in range(len(seqs)):
        tid, ut = c_turn[i], c_user[i] or 0
        msg = by_id.get((tid, ut)) if tid is not None else None
        if msg is None and tid is not None:
            msg = first_by_id.get(tid)
        if msg is None:  # no message row: the previous call's message if it is in the same user turn
            msg = prev if prev is not None and prev.user_turn == ut else last_msg_of_user.get(ut)
        if msg is None:  # a session without assistant messages: one synthetic message per user turn
            msg = synthetic.get(ut)
            if msg is None:
                msg = synthetic[ut] = Message(-1, "", ut, None)
        call = Call(
            i,
            seqs[i],
            cids[i],
            msg.turn,
            ut,
            intern(tools[i] or "?"),
            args[i] or "{}",
            k[i],
            ko[i],
            ks[i],
            rk[i],
            err[i],
            parent[i],
            action=ka[i],
            action_args=aargs[i],
            waiting=polls[i] is not None and running_poll(tools[i], _loads(args[i]), polls[i]),
        )
        calls.append(call)
        msg.calls.append(call)
        prev = msg
    for ut in sorted(synthetic, reverse=True):
        at = next((j + 1 for j in range(len(steps) - 1, -1, -1) if steps[j].user_turn <= ut), 0)
        steps.insert(at, synthetic[ut])
    return Session(sid, steps, calls, turn_ids, t_user, tokens, costs)


def load_findings(
    con: duckdb.DuckDBPyConnection, scope: str = "TRUE", params: Sequence[object] = ()
) -> tuple[dict[str, list[tuple[int, int, bool]]], set[str]]:
    """The finding spans of the matching sessions, and which sessions were scanned (``scan_state``; a store from
    before that table counts every session with a findings table as scanned)."""
    if not has_table(con, "findings"):
        return {}, set()
    out: dict[str, list[tuple[int, int, bool]]] = {}
    for sid, first, last, stuck in con.execute(
        f"SELECT session_id, first_seq, last_seq, stuck FROM findings WHERE first_seq IS NOT NULL AND {scope}",
        list(params),
    ).fetchall():
        out.setdefault(sid, []).append((first, last if last is not None else first, bool(stuck)))
    table = "scan_state" if has_table(con, "scan_state") else "sessions"
    scanned = {r[0] for r in con.execute(f"SELECT session_id FROM {table} WHERE {scope}", list(params)).fetchall()}
    return out, scanned


# -- simulation --------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Stop:
    user_turn: int
    step: int  # index in ``Session.steps`` of the message at which the run stops
    turn: int  # position of that message in the session's turns
    call: Call | None
    action: str
    reason: str
    at_message: bool = False  # a verdict at a message without calls stopped it (``call``: the run's next call)


@dataclass(slots=True)
class Simulation:
    levels: list[int]
    actions: list[str | None]
    reasons: list[str | None]
    stops: list[Stop] = field(default_factory=list)
    first_warn: Call | None = None  # the call the session's first warning applies to
    first_warn_msg: Message | None = None  # or the message, when that warning came at a message without calls
    first_warn_seen: bool = False
    warns: int = 0
    # verdicts at messages without (visible) calls: (message, verdict), in order
    msg_verdicts: list[tuple[Message, Verdict]] = field(default_factory=list)


def simulate(guard: Guard, s: Session) -> Simulation:
    """Feed one session's events to a fresh guard and collect its verdicts and the points where runs stop."""
    n = len(s.calls)
    sim = Simulation([0] * n, [None] * n, [None] * n)
    levels, actions, reasons = sim.levels, sim.actions, sim.reasons
    stopped: set[int] = set()
    batch, nested = guard.BATCH_STOP, guard.SEES_NESTED

    def stop(step_i: int, msg: Message, call: Call | None, v: Verdict) -> None:
        if msg.user_turn not in stopped:
            stopped.add(msg.user_turn)
            sim.stops.append(Stop(msg.user_turn, step_i, msg.turn, call, v.action, v.reason, call is None))

    def mark(call: Call, v: Verdict) -> None:
        i = call.index
        if v.level == WARN and levels[i] < WARN:
            sim.warns += 1
            if not sim.first_warn_seen:
                sim.first_warn_seen, sim.first_warn = True, call
        if v.level > levels[i]:
            levels[i], actions[i], reasons[i] = v.level, v.action, v.reason

    def mark_message(msg: Message, v: Verdict) -> None:
        sim.msg_verdicts.append((msg, v))
        if v.level == WARN:
            sim.warns += 1
            if not sim.first_warn_seen:
                sim.first_warn_seen, sim.first_warn_msg = True, msg

    for step_i, step in enumerate(s.steps):
        if type(step) is UserPrompt:
            guard.on_user()
            continue
        msg: Message = step  # type: ignore[assignment]
        calls = msg.calls if nested else [c for c in msg.calls if c.parent is None]
        v = guard.on_message(msg)
        if v is not None:  # a text rule: it takes effect on the message's first call, or on the message itself
            if calls:
                mark(calls[0], v)
            else:
                mark_message(msg, v)
            if v.level == HALT and not batch:
                stop(step_i, msg, calls[0] if calls else None, v)
        ran: list[Call] = []
        for c in calls:
            v = guard.on_call(c)
            if v is None:
                ran.append(c)
                continue
            mark(c, v)
            if not v.blocked:
                ran.append(c)
            if v.level == HALT and not batch:
                stop(step_i, msg, c, v)
        for c in ran:
            if c.result_key is not None:
                v = guard.on_result(c)
                if v is not None:
                    mark(c, v)
                    if v.level == HALT and not batch:
                        stop(step_i, msg, c, v)
        v = guard.on_step_end(msg)
        if v is not None:
            if calls:
                mark(calls[-1], v)
            else:
                mark_message(msg, v)
            if v.level == HALT and not batch:
                stop(step_i, msg, calls[-1] if calls else None, v)
        if batch and calls and all(levels[c.index] == HALT for c in calls):
            last = calls[-1]
            stop(step_i, msg, last, Verdict(HALT, actions[last.index] or "halt", reasons[last.index] or "", False))
    _resolve_stop_calls(s, sim.stops)
    return sim


def _resolve_stop_calls(s: Session, stops: list[Stop]) -> None:
    """A text rule stops a run at a message: point it at the first call of that message or of a later message of the
    same run."""
    for st in stops:
        if st.call is not None:
            continue
        for step in s.steps[st.step :]:
            if type(step) is UserPrompt:
                break
            if step.calls:  # type: ignore[union-attr]
                st.call = step.calls[0]  # type: ignore[union-attr]
                break


# -- rows --------------------------------------------------------------------------------------------------------------
SESSION_COLUMNS = {
    "session_id": pl.String,
    "policy": pl.String,
    "calls": pl.Int64,
    "warns": pl.Int64,
    "first_warn_call_id": pl.String,
    "first_warn_turn_id": pl.String,
    "first_warn_seq": pl.Int64,
    "halts": pl.Int64,
    "halt_call_id": pl.String,
    "halt_seq": pl.Int64,
    "halt_user_turn": pl.Int64,
    "halt_action": pl.String,
    "halt_reason": pl.String,
    "calls_after_halt": pl.Int64,
    "tokens_after_halt": pl.Int64,
    "cost_after_halt_usd": pl.Float64,
    "halt_on": pl.String,
}
HALT_COLUMNS = {
    "session_id": pl.String,
    "policy": pl.String,
    "user_turn": pl.Int64,
    "halt_call_id": pl.String,
    "halt_seq": pl.Int64,
    "halt_turn_id": pl.String,
    "action": pl.String,
    "reason": pl.String,
    "calls_after_halt": pl.Int64,
    "tokens_after_halt": pl.Int64,
    "cost_after_halt_usd": pl.Float64,
    "halt_on": pl.String,
    "session_tokens": pl.Int64,
}
VERDICT_COLUMNS = {
    "session_id": pl.String,
    "policy": pl.String,
    "at": pl.String,
    "seq": pl.Int64,
    "call_id": pl.String,
    "turn_id": pl.String,
    "user_turn": pl.Int64,
    "tool": pl.String,
    "level": pl.String,
    "action": pl.String,
    "reason": pl.String,
    "halt": pl.Boolean,
    "calls_after_halt": pl.Int64,
    "tokens_after_halt": pl.Int64,
}
TOTALS_TABLE_COLUMNS = [
    "policy",
    "sessions",
    "sessions_warned",
    "sessions_halted",
    "halts",
    "halts_stuck",
    "halts_progress",
    "halts_none",
    "calls_after_halt",
    "tokens_after_halt",
    "tokens_after_halt_pct",
    "cost_after_halt_usd",
]
SESSION_TABLE_COLUMNS = [
    "session_id",
    "policy",
    "calls",
    "first_warn_call_id",
    "halt_call_id",
    "halt_action",
    "calls_after_halt",
    "tokens_after_halt",
    "cost_after_halt_usd",
    "halt_on",
]


def classify(findings: list[tuple[int, int, bool]] | None, seq: int | None, scanned: bool) -> str | None:
    """``stuck`` / ``progress`` / ``none`` for a halting call's seq (stuck wins when findings overlap)."""
    if not scanned or seq is None:
        return None
    hit = [stuck for first, last, stuck in findings or () if first <= seq <= last]
    if not hit:
        return "none"
    return "stuck" if any(hit) else "progress"


def _after(s: Session, st: Stop, scope: str) -> tuple[int, int, float]:
    """Calls, tokens and dollars after a stop: to the end of its run, or of the session."""
    whole = scope == "session"
    calls = 0
    if st.call is not None:
        for c in s.calls[st.call.index + 1 :]:
            if not whole and c.user_turn != st.user_turn:
                break
            calls += 1
    tokens, cost = 0, 0.0
    if st.turn >= 0:
        for pos in range(st.turn + 1, len(s.turn_user)):
            if not whole and s.turn_user[pos] != st.user_turn:
                break
            tokens += s.turn_tokens[pos]
            cost += s.turn_cost[pos]
    return calls, tokens, cost


@dataclass(slots=True)
class SessionReplay:
    """Plain tuples (cheap to send back from a worker process)."""

    row: tuple
    halts: list[tuple]
    verdicts: list[tuple]


def replay_session(
    policy: Policy,
    s: Session,
    findings: list[tuple[int, int, bool]] | None,
    scanned: bool,
    scope: str = "run",
    verdicts: bool = False,
) -> SessionReplay:
    """Simulate ``policy`` on one session: its row, its halts, and (``verdicts``) its non-ok calls."""
    sim = simulate(policy.guard(), s)
    stops = sim.stops if scope == "run" else sim.stops[:1]
    session_tokens = sum(s.turn_tokens)
    halts = []
    tot_calls = tot_tokens = 0
    tot_cost = 0.0
    for st in stops:
        n_calls, tokens, cost = _after(s, st, scope)
        tot_calls += n_calls
        tot_tokens += tokens
        tot_cost += cost
        seq = st.call.seq if st.call is not None else None
        halts.append(
            (
                s.session_id,
                policy.name,
                st.user_turn,
                st.call.call_id if st.call else None,
                seq,
                s.turn_ids[st.turn] if st.turn >= 0 else None,
                st.action,
                st.reason,
                n_calls,
                tokens,
                cost,
                classify(findings, seq, scanned),
                session_tokens,
            )
        )
    first = stops[0] if stops else None
    fw, fw_msg = sim.first_warn, sim.first_warn_msg
    if fw is not None:
        fw_turn, fw_seq = _turn_id(s, fw.turn), fw.seq
    elif fw_msg is not None:
        nxt = _next_call(s, fw_msg)
        fw_turn, fw_seq = _turn_id(s, fw_msg.turn), nxt.seq if nxt else None
    else:
        fw_turn = fw_seq = None
    row = (
        s.session_id,
        policy.name,
        len(s.calls),
        sim.warns,
        fw.call_id if fw else None,
        fw_turn,
        fw_seq,
        len(stops),
        first.call.call_id if first and first.call else None,
        first.call.seq if first and first.call else None,
        first.user_turn if first else None,
        first.action if first else None,
        first.reason if first else None,
        tot_calls if first else None,
        tot_tokens if first else None,
        tot_cost if first else None,
        halts[0][11] if first else None,
    )
    vrows = []
    if verdicts:
        vrows = _verdict_rows(policy, s, sim, stops, halts)
    return SessionReplay(row, halts, vrows)


def _turn_id(s: Session, turn: int) -> str | None:
    return s.turn_ids[turn] if turn >= 0 else None


def _next_call(s: Session, msg: Message) -> Call | None:
    """The first call recorded after ``msg`` (calls are in transcript order, each message's after the message)."""
    for c in s.calls:
        if c.turn > msg.turn:
            return c
    return None


def _verdict_rows(policy: Policy, s: Session, sim: Simulation, stops: list[Stop], halts: list[tuple]) -> list[tuple]:
    """One row per call the guard warned or halted (``at`` = call) and per verdict given at a message without calls
    (``at`` = message: its turn id, and the seq of the next call). ``halt`` marks the row of each run's halt — the call
    the session and halt rows name as ``halt_call_id`` — with what that halt saves; the guard's other halt verdicts
    (gitagent's terminate results before its batch ends, later verdicts of a halted run) are not the halt."""
    by_call: dict[int, tuple[int, int]] = {}  # call index -> (calls, tokens) after the halt
    by_msg: dict[int, tuple[Call | None, int, int]] = {}  # message turn of a call-less halt -> (call, calls, tokens)
    for st, h in zip(stops, halts):
        if st.at_message:
            by_msg[st.turn] = (st.call, h[8], h[9])
        elif st.call is not None:
            by_call[st.call.index] = (h[8], h[9])
    rows: list[tuple[int, int, tuple]] = []  # (turn, order, row)
    for c in s.calls:
        lv = sim.levels[c.index]
        saved = by_call.get(c.index)
        if lv or saved:
            rows.append(
                (
                    c.turn,
                    c.index,
                    (
                        s.session_id,
                        policy.name,
                        "call",
                        c.seq,
                        c.call_id,
                        _turn_id(s, c.turn),
                        c.user_turn,
                        c.tool,
                        LEVELS[lv],
                        sim.actions[c.index],
                        sim.reasons[c.index],
                        saved is not None,
                        saved[0] if saved else None,
                        saved[1] if saved else None,
                    ),
                )
            )
    for msg, v in sim.msg_verdicts:
        stop = by_msg.pop(msg.turn, None) if v.level == HALT else None
        if stop is not None:
            call = stop[0]
            seq, cid, tool = (call.seq, call.call_id, call.tool) if call is not None else (None, None, None)
        else:
            nxt = _next_call(s, msg)
            seq, cid, tool = (nxt.seq if nxt else None), None, None
        rows.append(
            (
                msg.turn,
                -1,
                (
                    s.session_id,
                    policy.name,
                    "message",
                    seq,
                    cid,
                    _turn_id(s, msg.turn),
                    msg.user_turn,
                    tool,
                    LEVELS[v.level],
                    v.action,
                    v.reason,
                    stop is not None,
                    stop[1] if stop else None,
                    stop[2] if stop else None,
                ),
            )
        )
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r[2] for r in rows]


# -- the corpus replay -------------------------------------------------------------------------------------------------
@dataclass
class Replay:
    """The replay of one or more policies over a corpus: per-session rows, per-halt rows, per-call verdicts."""

    policies: list[Policy]
    scope: str
    unscanned: int  # replayed sessions without current findings (their halt_on is NULL)
    sessions: pl.DataFrame
    halts: pl.DataFrame
    verdicts: pl.DataFrame
    session_tokens: dict[str, int]
    session_cost: dict[str, float]

    def totals(self) -> pl.DataFrame:
        """One row per policy: how many sessions it warned and halted, on what, and what the halts saved."""
        total_tokens = sum(self.session_tokens.values())
        total_cost = sum(self.session_cost.values())
        rows = []
        for p in self.policies:
            srows = self.sessions.filter(pl.col("policy") == p.name)
            h = self.halts.filter(pl.col("policy") == p.name)
            saved = int(h["tokens_after_halt"].sum() or 0)
            on = h["halt_on"].to_list()
            rows.append(
                {
                    "policy": p.name,
                    "sessions": srows.height,
                    "calls": int(srows["calls"].sum() or 0),
                    "sessions_warned": srows.filter(pl.col("warns") > 0).height,
                    "sessions_halted": srows.filter(pl.col("halts") > 0).height,
                    "halts": h.height,
                    "halts_stuck": on.count("stuck"),
                    "halts_progress": on.count("progress"),
                    "halts_none": on.count("none"),
                    "halts_unclassified": on.count(None),
                    "calls_after_halt": int(h["calls_after_halt"].sum() or 0),
                    "tokens": total_tokens,
                    "tokens_after_halt": saved,
                    "tokens_after_halt_pct": round(100.0 * saved / total_tokens, 2) if total_tokens else None,
                    "cost_usd": total_cost,
                    "cost_after_halt_usd": float(h["cost_after_halt_usd"].sum() or 0.0),
                }
            )
        schema = {
            "policy": pl.String,
            "sessions": pl.Int64,
            "calls": pl.Int64,
            "sessions_warned": pl.Int64,
            "sessions_halted": pl.Int64,
            "halts": pl.Int64,
            "halts_stuck": pl.Int64,
            "halts_progress": pl.Int64,
            "halts_none": pl.Int64,
            "halts_unclassified": pl.Int64,
            "calls_after_halt": pl.Int64,
            "tokens": pl.Int64,
            "tokens_after_halt": pl.Int64,
            "tokens_after_halt_pct": pl.Float64,
            "cost_usd": pl.Float64,
            "cost_after_halt_usd": pl.Float64,
        }
        return pl.DataFrame(rows, schema=schema)


_CORPUS: Corpus | None = None  # the corpus a forked worker reads (inherited, never pickled)


def _run_slice(policies: list[Policy], lo: int, hi: int, scope: str, verdicts: bool) -> list[SessionReplay]:
    corpus = _CORPUS
    assert corpus is not None
    f, scanned = corpus.findings, corpus.scanned
    return [
        replay_session(p, s, f.get(s.session_id), s.session_id in scanned, scope, verdicts)
        for p in policies
        for s in corpus.sessions[lo:hi]
    ]


def _default_workers(n_calls: int) -> int:
    # A process costs ~100 ms to fork and collect; below ~200k calls one process is faster.
    return 1 if n_calls < 200_000 else min(cores(), 8)


def replay(
    corpus: Corpus, policies: Sequence[Policy], scope: str = "run", workers: int | None = None, verdicts: bool = False
) -> Replay:
    """Replay every policy over every session of ``corpus``. ``workers`` > 1 splits the sessions over forked
    processes (POSIX); ``None`` picks by corpus size."""
    global _CORPUS
    if scope not in ("run", "session"):
        raise ValueError(f"scope must be run or session, not {scope!r}")
    policies = list(policies)
    n_calls = sum(len(s.calls) for s in corpus.sessions)
    workers = _default_workers(n_calls) if workers is None else max(1, workers)
    n = len(corpus.sessions)
    _CORPUS = corpus
    try:
        if workers == 1 or n < 2 or not hasattr(os, "fork"):
            results = _run_slice(policies, 0, n, scope, verdicts)
        else:
            results = _parallel(policies, n, scope, verdicts, workers)
    finally:
        _CORPUS = None
    rows = [r.row for r in results]
    halts = [h for r in results for h in r.halts]
    vrows = [v for r in results for v in r.verdicts]
    return Replay(
        policies,
        scope,
        corpus.unscanned,
        _frame(rows, SESSION_COLUMNS),
        _frame(halts, HALT_COLUMNS),
        _frame(vrows, VERDICT_COLUMNS),
        {s.session_id: sum(s.turn_tokens) for s in corpus.sessions},
        {s.session_id: sum(s.turn_cost) for s in corpus.sessions},
    )


def _parallel(policies: list[Policy], n: int, scope: str, verdicts: bool, workers: int) -> list[SessionReplay]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    chunks = max(workers * 4, 1)
    bounds = [(n * i // chunks, n * (i + 1) // chunks) for i in range(chunks)]
    ctx = mp.get_context("fork")
    out: list[SessionReplay] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [
            pool.submit(_run_slice, [p], lo, hi, scope, verdicts) for p in policies for lo, hi in bounds if hi > lo
        ]
        for fut in futures:
            out.extend(fut.result())
    return out


def _frame(rows: list[tuple], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row")


def replay_store(
    con: duckdb.DuckDBPyConnection,
    policies: Sequence[Policy],
    flt: SessionFilter = SessionFilter(),
    scope: str = "run",
    workers: int | None = None,
    verdicts: bool = False,
) -> Replay:
    """Load the matching sessions and replay the policies over them."""
    return replay(load_corpus(con, flt), policies, scope, workers, verdicts)
