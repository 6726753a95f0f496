"""What a workflow run costs after GitHub starts the job: scenario 2 of tests/actions/
(the artifact example's `issues` run after one issue is edited, from warm caches), run
under nektos/act on this machine, its wall time split into the steps act reports.

    .venv/bin/python bench/bench_actions.py [--rounds 3]

Each round runs the scenario's test (a first `push` run, then the measured `issues`
run) with pytest and reads the measured run's log, which the harness keeps beside it.
Prints one Markdown table: the median of the rounds per step, and the wall time of the
`act` process.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = re.compile(
    r"^\[(?P<job>[^\]]+)\]\s+✅\s+Success - (?P<stage>Main|Pre|Post) (?P<name>.*) "
    r"\[(?P<took>[^\]]+)\]$"
)
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
WALL = re.compile(r"^act wall (?P<seconds>[\d.]+)$", re.M)


def seconds(duration: str) -> float:
    """A Go duration as act prints it (`1m2.5s`, `640ms`) in seconds."""
    return sum(
        float(number) * UNITS[unit]
        for number, unit in re.findall(r"([\d.]+)(h|ms|µs|us|ns|m|s)", duration)
    )


def steps(log: str) -> dict[str, float]:
    """Top-level and composite steps of the publishing job, in order, in seconds."""
    found: dict[str, float] = {}
    for line in log.splitlines():
        match = STEP.match(line)
        if match and match["stage"] == "Main" and not match["name"].startswith("python3 "):
            found[match["name"]] = found.get(match["name"], 0.0) + seconds(match["took"])
    return found


def one_round(basetemp: Path) -> tuple[float, dict[str, float]]:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/actions/test_scenarios.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "test_2_",
            f"--basetemp={basetemp}",
        ],
        cwd=ROOT,
        check=True,
    )
    (log_file,) = basetemp.glob("test_2_*0/repository/run-1002.log")
    log = log_file.read_text()
    return float(WALL.search(log)["seconds"]), steps(log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    walls, all_steps = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-actions-") as tmp:
            wall, took = one_round(Path(tmp))
        walls.append(wall)
        all_steps.append(took)
    print("| step of the `issues` run | median s |")
    print("|---|---:|")
    for name in all_steps[0]:
        values = [s.get(name, 0.0) for s in all_steps]
        print(f"| {name} | {statistics.median(values):.1f} |")
    print(f"| **act process, wall** | **{statistics.median(walls):.1f}** |")


if __name__ == "__main__":
    main()
