#!/usr/bin/env python3
"""Restore the labelled transcripts that are not committed (sources without a licence) from git mirrors.

    python tests/realdata/tools/fetch_manifest.py [--mirrors DIR]

Every row of `tests/realdata/sources/*.tsv` whose `local_path` is under `tests/realdata/fetched/` is written there
byte-exact from `DIR/<owner>+<repo>/repo` (a bare git clone or mirror of the repository, by default
$LOOPSCOPE_MIRRORS or /work/.mirror), by its blob sha, and checked with git's own hash. Files already present with the
right content are left alone. Nothing is fetched over the network: clone or mirror the repositories first. The folder
is ignored by git; the benchmark and the tests score these files when they are present.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from realdata_labels import FETCHED, manifest_rows  # noqa: E402


def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def git_dir(mirrors: Path, repo: str) -> Path | None:
    base = mirrors / repo.replace("/", "+")
    for d in (base / "repo", base, mirrors / repo.replace("/", "__")):
        if (d / "objects").is_dir() or (d / ".git").is_dir():
            return d
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, default=Path(os.environ.get("LOOPSCOPE_MIRRORS", "/work/.mirror")))
    args = ap.parse_args()
    wanted = [r for r in manifest_rows() if (ROOT / r["local_path"]).is_relative_to(FETCHED)]
    done = present = 0
    missing: dict[str, int] = {}
    for row in wanted:
        dest = ROOT / row["local_path"]
        if dest.is_file() and blob_sha(dest.read_bytes()) == row["blob_sha"]:
            present += 1
            continue
        gd = git_dir(args.mirrors, row["repo"])
        if gd is None:
            missing[row["repo"]] = missing.get(row["repo"], 0) + 1
            continue
        data = subprocess.run(
            ["git", f"--git-dir={gd}", "cat-file", "blob", row["blob_sha"]], capture_output=True, check=False
        ).stdout
        if blob_sha(data) != row["blob_sha"]:
            missing[row["repo"]] = missing.get(row["repo"], 0) + 1
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        done += 1
    print(
        f"{len(wanted)} manifest-only files: {present} already present, {done} restored, "
        f"{sum(missing.values())} missing"
    )
    for repo, n in sorted(missing.items()):
        print(f"  {repo}: {n} files (no mirror under {args.mirrors}, or the blob is not in it)")
    return 0 if not missing else 1


if __name__ == "__main__":
    sys.exit(main())
