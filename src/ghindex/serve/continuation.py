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

`fetch` goes on the same way: its `next.skip` (and the cut item's `next_skip`), pieces
of the first handle already read, is a token of this kind, passed back as `skip`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ghindex.errors import GhindexError
from ghindex.query.snapshot import Snapshot
from ghindex.serve import budget

TOKEN_CHARS = 20  # the longest token: a position of up to six digits, a dot, the tag
_TOKEN = re.compile(r"([0-9]{1,6})\.([0-9a-f]{8})")
_AGAIN = {
    "search": "search again",
    "related": "ask for related again",
    "sql": "run it again",
    "fetch": "fetch again",
}
# the argument a tool takes a continuation as, and where its answer gives one
_ARGUMENT = {"fetch": ("skip", "next.skip")}


def argument(tool: str | None) -> tuple[str, str, str]:
    """The argument `tool` takes a continuation as, the answer field that gives it, and
    what to do when one is refused (without that argument)."""
    name, field = _ARGUMENT.get(tool or "", ("offset", "next_offset"))
    return name, field, _AGAIN.get(tool or "", "ask again")


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
    name, field, again = argument(tool)
    if found is None:
        raise GhindexError(
            f"{tool}: {name} {given[:40]!r} is not a continuation: pass a previous answer's "
            f"{field} as it was given, or {again} without {name}"
        )
    if found.group(2) != _tag(snapshot, tool):
        raise GhindexError(
            f"{tool}: {name} {given!r} continues an answer from another snapshot (or another "
            f"tool) than the one served now ({snapshot.snapshot_id}): {again} without {name}"
        )
    position = int(found.group(1))
    if position > most:  # not one this tool gave: it gives none past `most`
        raise GhindexError(
            f"{tool}: {name} {given!r} is past the last this tool goes on from: "
            f"{again} without {name}"
        )
    return position


def token(position: int, snapshot: Snapshot, tool: str) -> str:
    """The token `tool` gives for `position` on `snapshot`, which `start` takes back."""
    return f"{position}.{_tag(snapshot, tool)}"


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
    given = token(position, snapshot, tool)
    answer["next_offset"] = given
    if reason:
        answer["truncated_reason"] = reason.replace(f"offset={position}", f'offset="{given}"')
    return answer


def fetch_tokened(answer: dict[str, Any], snapshot: Snapshot, most: int) -> dict[str, Any]:
    """`fetch`'s `answer` with its `next.skip` and the cut item's `next_skip` (positions)
    given as tokens; past `most` the way on is left out, and the answer says why."""
    onward = answer.get("next") if isinstance(answer.get("next"), dict) else {}
    items = [item for item in answer.get("items") or [] if isinstance(item, dict)]
    for place, key in [(onward, "skip")] + [(item, "next_skip") for item in items]:
        position = place.get(key)
        if not isinstance(position, int) or isinstance(position, bool):
            continue
        if position <= most:
            place[key] = token(position, snapshot, "fetch")
            continue
        del place[key]
        if place is onward:
            del answer["next"]
            first = onward["handles"][0]
            said = f"the rest of {first} lies past piece {most:,}, the last fetch goes on from"
            budget.say(answer, said)
    return answer
