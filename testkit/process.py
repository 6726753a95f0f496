"""Running a short script in a fresh interpreter: what a cold command imports."""

from __future__ import annotations

import subprocess
import sys


def fresh_python(script: str, *args: str) -> str:
    """What `script` prints, run by a new interpreter with `args` as sys.argv[1:]."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def cli_in_fresh_python(args: list[str], *, before: str = "", after: str = "") -> list[str]:
    """The lines a new interpreter prints running `ghindex ARGS` in its own process without
    ending it: `before` runs first and `after` last (Python source, `sys` imported)."""
    script = (
        f"import sys\n{before}\n"
        "from ghindex.cli import cli\n"
        f"cli({args!r}, standalone_mode=False)\n"
        f"{after}\n"
    )
    return fresh_python(script).strip().splitlines()
