"""loopscope as a live guard in front of an agent: the Claude Code hook (``claude_code``), its light entry point
(``main``, the ``loopscope-hook`` script), its per-session state (``state``), the settings calibration writes
(``settings``) and the installer that merges the hook into Claude Code's ``settings.json`` (``install``).

Everything here but ``install`` runs on every tool call: it imports only the guard engines (``analyzer.guards``) and
the detector core below them — never typer, polars, DuckDB or plotly (tests/test_architecture.py pins it).
"""
