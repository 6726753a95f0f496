"""Where the shared retrieval evaluation sets are: GHINDEX_EVAL_DIR, else `shared/eval`
beside this repository's checkout (`../shared/eval` from its root)."""

from __future__ import annotations

import os
from pathlib import Path

EVAL = (
    Path(os.environ["GHINDEX_EVAL_DIR"])
    if os.environ.get("GHINDEX_EVAL_DIR")
    else Path(__file__).resolve().parents[2] / "shared" / "eval"
)


def eval_set(name: str) -> Path:
    """The folder of the evaluation set `name` (e.g. "httpx-changelog")."""
    return EVAL / name
