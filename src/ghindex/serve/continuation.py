"""Continuations: where a cut answer goes on, as a token bound to the snapshot and the
tool that gave it.

A tool answer cut to fit (`budget.py`, a row limit) says `next_offset`. Inside the
tools it is a position (the 20th result on); what the agent is given is a token,
`"20.1a2b3c4d"`: the position and a tag of the snapshot (its id and build time) and
the tool. Passed back as `offset`, a token from the snapshot being served goes on where
the answer stopped; one from another snapshot (the server synced a newer one meanwhile)
is refused in one line saying to ask again, rather than answered from a ranking of
other items. Every token a tool gives, it takes: a position past what the tool pages
through is not given as a token (the answer says to narrow the question instead).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ghindex.errors import GhindexError
from ghindex.query.snapshot import Snapshot

TOKEN_CHARS = 20  # the longest token: a position of up to six digits, a dot, the tag
_TOKEN = re.compile(r"([0-9]{1,6})\.([0-9a-f]{8})")
_AGAIN = {"search": "search again", "related": "ask for related again", "sql": "run it again"}


def _tag(snapshot: Snapshot, tool: str) -> str:
    built = snapshot.manifest.get("built_at") if isinstance(snapshot.manifest, dict) else None
    seed = f"{tool}\x00{snapshot.snapshot_id}\x00{built}"
    return hashlib.sha256(seed.encode()).hexdigest()[:8]


def start(given: str | None, snapshot: Snapshot, tool: str, most: int) -> int:
    """The position `given` (a token this tool gave on this snapshot) stands for; 0 for
    None. Anything else is refused in one line."""
    if given is None:
        return 0
    found = _TOKEN.fullmatch(given)
    again = _AGAIN.get(tool, "ask again")
    if found is None:
        raise GhindexError(
            f"{tool}: offset {given[:40]!r} is not a continuation: pass a previous answer's "
            "next_offset as it was given, or leave offset out to start"
        )
    if found.group(2) != _tag(snapshot, tool):
        raise GhindexError(
            f"{tool}: offset {given!r} continues an answer from another snapshot (or another "
            f"tool) than the one served now ({snapshot.snapshot_id}): {again} without offset"
        )
    position = int(found.group(1))
    if position > most:  # not one this tool gave: it gives none past `most`
        raise GhindexError(f"{tool}: offset {given!r} is past the last this tool goes on from")
    return position


def tokened(answer: dict[str, Any], snapshot: Snapshot, tool: str, most: int) -> dict[str, Any]:
    """`answer` with its `next_offset` (a position) given as a token, and said so in its
    `truncated_reason`; a position past `most` is left out, and the reason says why."""
    position = answer.get("next_offset")
    if not isinstance(position, int) or isinstance(position, bool):
        return answer
    reason = answer.get("truncated_reason") or ""
    if position > most:
        del answer["next_offset"]
        said = f"; ask again with offset={position}"
        answer["truncated_reason"] = reason.replace(said, "") + (
            f"; the rest lies past the {most:,} this tool pages through: narrow the question"
        )
        return answer
    token = f"{position}.{_tag(snapshot, tool)}"
    answer["next_offset"] = token
    if reason:
        answer["truncated_reason"] = reason.replace(f"offset={position}", f'offset="{token}"')
    return answer
