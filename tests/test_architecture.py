"""The house rules, checked over the import graph: every module sits on a layer, imports only from its own layer's
lower floors, and no two modules import each other round a circle. Type-only imports count: a reader follows them too.

Layers, lowest first (siblings on one floor must not import each other):

    analyzer.errors               the exception tree (and the package's version)
    analyzer.tables | analyzer.results | analyzer.machine
                                  facts every stage shares: how tables and types are declared, the plain results
                                  replay and calibration hand to the report, the cores to use
    analyzer.detect               the detector core: calls in, signals and findings out; knows no format or DuckDB
    analyzer.store                the DuckDB store: schema, connection, queries (the Store object sits above the
                                  stages it runs: analyzer.library)
    analyzer.ingest | analyzer.scan | analyzer.guards | analyzer.evaluate
                                  files -> store | store -> signals, findings | guards, policies, replay | scoring
                                  findings against a person's labels
    analyzer.calibrate | reports.data | analyzer.spark | analyzer.hook
                                  sweeps and recommendations | the report's data layer (its queries) | the pipeline
                                  on Spark | the live Claude Code hook
    reports                       rendering only: plain data in, HTML out (reports.data excepted, a floor below)
    analyzer.analyze              the end-to-end job
    analyzer.library              the Store, the library's one object: each stage above as a method
    analyzer.commands             the CLI's commands, thin over the Store
    analyzer.cli                  the typer app
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS: list[list[str]] = [
    ["analyzer.errors", "analyzer"],
    ["analyzer.tables", "analyzer.results", "analyzer.machine"],
    ["analyzer.detect"],
    ["analyzer.store"],
    ["analyzer.ingest", "analyzer.scan", "analyzer.guards", "analyzer.evaluate"],
    ["analyzer.calibrate", "reports.data", "analyzer.spark", "analyzer.hook"],
    ["reports"],
    ["analyzer.analyze"],
    ["analyzer.library"],
    ["analyzer.commands"],
    ["analyzer.cli"],
]


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in ("analyzer", "reports"):
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    is_pkg = path.name == "__init__.py"
    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _layer(module: str) -> tuple[int, str]:
    best: tuple[int, int, str] | None = None
    for rank, group in enumerate(LAYERS):
        for prefix in group:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix), prefix)
    assert best is not None, f"{module} sits on no layer: add it to LAYERS"
    return best[0], best[2]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known) for m, p in mods.items()}


def test_every_layer_names_an_existing_module_or_package() -> None:
    """A layer naming no module checks nothing and misleads the reader of the table above."""
    known = set(_modules())
    missing = [name for group in LAYERS for name in group if name not in known]
    assert not missing, f"LAYERS names modules that do not exist: {missing}"


def test_no_import_runs_up_a_layer_or_across_siblings() -> None:
    bad = []
    for mod, deps in sorted(_graph().items()):
        rank, group = _layer(mod)
        for dep in sorted(deps):
            drank, dgroup = _layer(dep)
            if drank > rank or (drank == rank and dgroup != group and "analyzer" not in (group, dgroup)):
                bad.append(f"{mod} ({group}) imports {dep} ({dgroup})")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_import_circle() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


# The hook runs before every tool call: its entry point reaches only the guard engines and what they stand on.
HOOK_ENTRY = "analyzer.hook.main"
HOOK_MAY_REACH = (
    "analyzer",
    "analyzer.errors",
    "analyzer.tables",
    "analyzer.detect",
    "analyzer.guards",
    "analyzer.hook",
)
HEAVY = ("typer", "polars", "duckdb", "plotly", "rich", "pyarrow", "jinja2", "click")


def test_the_hook_entry_point_imports_only_the_guard_engines() -> None:
    graph = _graph()
    seen, todo = set(), [HOOK_ENTRY]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(graph[m])
    outside = sorted(
        m for m in seen if not any(m == p or m.startswith(p + ".") for p in HOOK_MAY_REACH[1:]) and m != "analyzer"
    )
    assert not outside, f"{HOOK_ENTRY} reaches {outside}"
    assert "analyzer.hook.install" not in seen


def test_the_hook_process_loads_no_heavy_library(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    code = (
        "import sys, io; from analyzer.hook.main import main; "
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode())); main(['claude-code']); "
        "print('\\n' + ' '.join(sorted(sys.modules)), file=sys.stderr)"
    )
    payload = json.dumps(
        {
            "session_id": "arch",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_use_id": "t1",
        }
    )
    env = {**os.environ, "LOOPSCOPE_CACHE_DIR": str(tmp_path), "LOOPSCOPE_CONFIG_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    modules = set(proc.stderr.strip().splitlines()[-1].split())
    assert "analyzer.hook.claude_code" in modules and "analyzer.guards.engines.loopscope" in modules
    loaded = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not loaded, f"the hook loaded {loaded}"
