"""Running a short script in a fresh interpreter: what a cold command imports."""

from __future__ import annotations

import subprocess
import sys


def fresh_python(script: str, *args: str) -> str:
    """What `script` prints, run by a new interpreter with `args` as sys.argv[1:]."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout
