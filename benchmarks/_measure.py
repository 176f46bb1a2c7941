"""Run a command and measure it the way the benchmarks report it: wall time, and peak memory of the whole process
tree (the ingest spawns parser workers, so the main process's own peak says too little).

Two memory figures, because neither alone is the truth: ``peak_tree_rss`` samples the summed RSS of the process and all
its descendants every 20 ms (what the machine had to hold at once; a sample can miss a short spike), and
``max_process_rss`` is the kernel's exact high-water mark of the largest single process (``wait4`` rusage, the
max over the child and every descendant it reaped).
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Run:
    seconds: float
    returncode: int
    peak_tree_rss: int  # bytes
    max_process_rss: int  # bytes
    max_processes: int
    main_rss: int  # sampled peak of the command's own process (bytes)
    workers_rss: int  # sampled peak of the largest descendant (bytes)
    cpu_seconds: float  # user + system time of the command and every descendant it reaped (wait4)
    stdout: str
    stderr: str


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split(b" ", 2)[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_bytes().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def run(cmd: list[str], env: dict[str, str] | None = None, interval: float = 0.02) -> Run:
    """Run ``cmd`` to completion, sampling its process tree."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak, procs = 0, 0
    per_pid: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, procs
        while not done.is_set():
            pids = _tree(proc.pid)
            rss = {p: _rss(p) for p in pids}
            for p, r in rss.items():
                per_pid[p] = max(per_pid.get(p, 0), r)
            peak = max(peak, sum(rss.values()))
            procs = max(procs, len(pids))
            done.wait(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    readers = [
        threading.Thread(target=lambda s, b: b.append(s.read()), args=(proc.stdout, out_chunks)),
        threading.Thread(target=lambda s, b: b.append(s.read()), args=(proc.stderr, err_chunks)),
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    done.set()
    th.join()
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    main = per_pid.pop(proc.pid, 0)
    return Run(
        seconds,
        proc.returncode,
        peak,
        usage.ru_maxrss * 1024,
        procs,
        main,
        max(per_pid.values(), default=0),
        usage.ru_utime + usage.ru_stime,
        b"".join(out_chunks).decode(errors="replace"),
        b"".join(err_chunks).decode(errors="replace"),
    )


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def verdict(ok: bool) -> str:
    return "yes" if ok else "**no**"


def paired_ratio(after: Sequence[float], before: Sequence[float]) -> str | None:
    """``after`` ÷ ``before`` run by run (each pair ran back to back, so it saw the same machine): the median ratio
    with the lowest and highest, e.g. ``0.90x (0.87–1.06)``; None without a pair (a ``before`` of 0 pairs with
    nothing)."""
    ratios = [a / b for a, b in zip(after, before) if b > 0]
    if not ratios:
        return None
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f})"


@dataclass(frozen=True)
class Checkout:
    """A loopscope checkout to measure: its source tree and the venv that runs it.

    The checkout's own folder goes first on ``PYTHONPATH``: a venv's editable install may point at another checkout
    (a worktree's venv made from the main one does), and a benchmark must time the code of the tree it names.
    """

    root: Path | None  # None: run the entry point as installed
    exe: Path  # the ``loopscope`` entry point

    @classmethod
    def at(cls, path: Path) -> Checkout:
        """A checkout folder (run by its own ``.venv``, or by this one's when it has none), or a ``loopscope``
        entry point (run as installed)."""
        path = path.resolve()
        if path.is_file():
            return cls(None, path)
        if not (path / "analyzer").is_dir():
            raise SystemExit(f"{path} is neither a loopscope checkout nor a `loopscope` entry point")
        exe = path / ".venv" / "bin" / "loopscope"
        return cls(path, exe if exe.exists() else Path(sys.executable).with_name("loopscope"))

    @property
    def python(self) -> Path:
        """The interpreter the entry point runs under (its ``#!`` line), with the checkout's own packages."""
        first = self.exe.read_bytes()[:1024].split(b"\n", 1)[0]
        if first.startswith(b"#!") and Path(first[2:].decode(errors="replace").split()[0]).exists():
            return Path(first[2:].decode().split()[0])
        return self.exe.with_name("python")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.root is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.root), env.get("PYTHONPATH")]))
        return env

    def source(self) -> str:
        """Where this checkout's ``analyzer`` package is imported from (what will actually be measured)."""
        r = subprocess.run(
            [str(self.python), "-c", "import analyzer; print(analyzer.__file__)"],
            env=self.env(),
            capture_output=True,
            text=True,
            cwd="/",
        )  # not ours: ``-c`` puts the cwd first
        return str(Path(r.stdout.strip()).parent.parent) if r.returncode == 0 else f"? ({r.stderr.strip()[-200:]})"

    def compile(self) -> None:
        """Write the checkout's bytecode, as an install does (pip compiles what it installs). Where
        ``PYTHONDONTWRITEBYTECODE`` is set and nothing is compiled yet, every measured process would compile the
        ``analyzer`` and ``reports`` sources again: ~5% of a scan, and start-up a user never pays twice."""
        if self.root is not None:
            for package in ("analyzer", "reports"):
                compileall.compile_dir(str(self.root / package), quiet=1)

    def help(self, command: str) -> str:
        return subprocess.run([str(self.exe), command, "--help"], env=self.env(), capture_output=True, text=True).stdout

    def run(self, *args: str) -> Run:
        """Run ``loopscope ARGS``, measured; a failure ends the benchmark with its stderr."""
        r = run([str(self.exe), *args], env=self.env())
        if r.returncode:
            raise SystemExit(f"loopscope {args[0]} ({self.exe}) failed ({r.returncode}):\n{r.stderr[-4000:]}")
        return r


CHECKOUT = Checkout(Path(__file__).resolve().parents[1], Path(sys.executable).with_name("loopscope"))


def loopscope(*args: str) -> Run:
    """Run this checkout's ``loopscope`` command, measured; a failure ends the benchmark with its stderr."""
    return CHECKOUT.run(*args)
