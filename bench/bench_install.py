"""The two installs side by side: `pip install ghindex` (read) and
`pip install 'ghindex[build]'` (build), each from the wheel built from this checkout
into a fresh virtual environment, timed from a warm package cache.

For each install and round: a new venv (no system site-packages), then one
`pip install` of the wheel (with `torch==<pin>` for the build install, as the README
says), timed from the start of pip to its end; then the venv's size on disk and the
number of distributions in it (pip, setuptools and the like included, as `pip list`
counts them). Run one round of each first to fill the cache: the figures are medians
of the rounds that follow.

    python -m bench.bench_install                  # --rounds 3 --torch 2.13.0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
    )
    return next(out.glob("ghindex-*.whl"))


def disk_bytes(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(base) / name
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def one_install(wheel: Path, extra: str, torch: str, work: Path) -> dict:
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    pins = [f"torch=={torch}"] if extra else []
    start = time.perf_counter()
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *pins, target], check=True)
    seconds = time.perf_counter() - start
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    has_torch = (
        subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True)
    ).returncode == 0
    return {
        "seconds": seconds,
        "mib": disk_bytes(venv) / 2**20,
        "packages": len(json.loads(listed)),
        "torch": has_torch,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torch", default="2.13.0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ghindex-installs-") as tmp:
        wheel = build_wheel(Path(tmp) / "dist")
        results: dict[str, list[dict]] = {"": [], "build": []}
        for extra in results:  # one round each to warm the cache, not counted
            with tempfile.TemporaryDirectory(dir=tmp) as work:
                one_install(wheel, extra, args.torch, Path(work))
        for _ in range(args.rounds):
            for extra, runs in results.items():
                with tempfile.TemporaryDirectory(dir=tmp) as work:
                    runs.append(one_install(wheel, extra, args.torch, Path(work)))
    print("| install | size on disk | packages | wall time (median) | torch importable |")
    print("|---|---:|---:|---:|---|")
    for extra, runs in results.items():
        name = "`pip install 'ghindex[build]'`" if extra else "`pip install ghindex`"
        seconds = statistics.median(r["seconds"] for r in runs)
        times = ", ".join(f"{r['seconds']:.1f}" for r in runs)
        print(
            f"| {name} | {runs[-1]['mib']:.0f} MiB | {runs[-1]['packages']} | "
            f"{seconds:.1f} s ({times}) | {'yes' if runs[-1]['torch'] else 'no'} |"
        )


if __name__ == "__main__":
    main()
