"""``loopscope spark run`` where pyspark cannot be imported: one line naming the extra to install and exit 2 (the
README's exit-code table), never a traceback. Runs whether or not pyspark is installed here: a fake ``pyspark``
package first on ``PYTHONPATH`` raises ImportError as a missing one would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, SAMPLE_DATA


def test_spark_run_without_pyspark_says_what_to_install(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "pyspark"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'pyspark'\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", "spark", "run", str(SAMPLE_DATA), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: pyspark is not installed: pip install 'loopscope[spark]'"]
    assert proc.stdout == "" and not out.exists()
