"""The answer budget: every MCP answer fits an agent's context.

Agents' clients cap one tool answer at about 25,000 tokens, and an answer near that
pushes the task itself out of the context. So each answer is held to a budget
(`GHINDEX_MCP_MAX_TOKENS`, default 8,000, at most 20,000), counted as the client will
receive it (the JSON text, indented) with the one token estimate
(`vocabulary/tokens.py`). What does not fit is cut at a whole result, row or neighbour,
with `truncated: true`, `truncated_reason` naming what was left out, and `next_offset`
to ask for the rest. Whatever still does not fit is held by `hold`, for every answer:
every list or mapping inside it is cut at a whole entry (with a count of what was left
out beside it), then every text too long is cut inside (`…`).
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from ghindex.config import ENVIRONMENT, env
from ghindex.vocabulary.tokens import estimate

_SETTING = ENVIRONMENT["GHINDEX_MCP_MAX_TOKENS"]
DEFAULT_TOKENS = int(_SETTING.default)  # type: ignore[call-overload]
MOST_TOKENS = int(_SETTING.most or 0)
SAYING = 120  # tokens left for what is said about a cut
SHORTEST = 16  # characters a text is cut to at the least
LONG = 400  # characters of a text cut before records lose entries
# what `hold` never cuts: the envelope, what is said about the cut and the way on
FIXED = (
    "snapshot_id",
    "snapshot_age_seconds",
    "truncated",
    "truncated_reason",
    "next_offset",
    "next",
)


def budget() -> int:
    """The answer budget in tokens (`GHINDEX_MCP_MAX_TOKENS`)."""
    return env("GHINDEX_MCP_MAX_TOKENS")


def cost(body: Any) -> int:
    """Tokens of `body` as the client receives it."""
    return estimate(pydantic_core.to_json(body, fallback=str, indent=2).decode())


def fit(
    body: dict[str, Any],
    key: str,
    limit: int,
    offset: int | None = 0,
    what: str = "",
    *,
    most: int | None = None,
) -> bool:
    """Drop whole entries from the end of `body[key]` until `body` costs at most `limit`
    tokens (at least one entry stays); say so in `body` and return whether it was cut.
    `offset`: where `body[key]` starts in the whole answer (None: an answer's extra list,
    with no way on but a narrower call); `most`: the largest offset the tool accepts,
    past which no `next_offset` is given."""
    entries = body.get(key) or []
    if cost(body) <= limit or len(entries) <= 1:
        return False
    low, high = 1, len(entries) - 1  # the most entries that fit, by halving
    while low < high:
        middle = (low + high + 1) // 2
        body[key] = entries[:middle]
        if cost(body) + SAYING <= limit:
            low = middle
        else:
            high = middle - 1
    body[key] = entries[:low]
    said = (
        f"cut at {low} of {len(entries)} {what or key} ({len(entries) - low} left out) to "
        f"fit the {limit:,}-token answer budget"
    )
    if offset is None:
        said += ": ask for fewer to see them all"
    elif most is not None and offset + low > most:
        said += f": the rest lies past offset {most}, the last one taken: narrow the call"
    else:
        said += f": ask again with offset={offset + low}"
        body["next_offset"] = offset + low
    say(body, said)
    return True


def say(body: dict[str, Any], said: str) -> None:
    """Mark `body` cut, adding `said` to what is already said about it."""
    body["truncated"] = True
    earlier = body.get("truncated_reason")
    body["truncated_reason"] = f"{earlier}; {said}" if earlier else said


def hold(body: dict[str, Any], limit: int, *, more: str = "", whole: tuple[str, ...] = ()) -> bool:
    """Hold `body` to `limit` tokens, whatever it holds, and return whether it was cut:
    every list and mapping inside it (not `body` itself, nor the lists of `whole` and
    their entries, which stay aligned) keeps as many whole entries as fit alike, with
    `<key>_omitted` beside it counting the rest (in a list, a last entry saying how many
    more); then every text (and key) over what fits is cut inside, ending in `…`.
    `more`: how to see what the cut lists left out. An answer that still cannot fit
    keeps only its envelope and what is said about the cut."""
    if cost(body) <= limit:
        return False
    order = list(body)
    fixed = {k: body.pop(k) for k in FIXED if k in body}
    content = dict(body)
    room = limit - SAYING - 2 * estimate(more)
    while True:
        rest, said = _held(content, fixed, room, more, whole)
        body.clear()
        body.update({k: fixed.get(k, rest.get(k)) for k in order if k in fixed or k in rest})
        body.update(rest)
        say(body, "; ".join(said) + f" to fit the {limit:,}-token answer budget")
        over = cost(body) - limit
        if over <= 0 or not rest:
            return True
        room -= over  # what is said took more than was left for it


def _held(
    content: dict[str, Any], fixed: dict[str, Any], room: int, more: str, whole: tuple[str, ...]
) -> tuple[dict[str, Any], list[str]]:
    """`content` cut (see `hold`) until with `fixed` it costs at most `room`, and what
    was cut."""

    def spent(part: dict[str, Any]) -> int:
        return cost({**fixed, **part})

    rest, said = content, []
    # whole entries of lists first, records kept whole; then long texts cut inside (one
    # huge title); then mappings too (status's repositories); then any text
    for step in ("lists", "long texts", "lists and mappings", "texts"):
        if spent(rest) <= room:
            break
        if step.endswith("texts"):
            shortest = LONG if step == "long texts" else SHORTEST
            widest = _widest(rest)
            if widest <= shortest:
                continue

            def short(chars: int, part: dict = rest) -> bool:
                return spent(_cut(part, chars)) <= room

            chars = _most(short, shortest, widest)
            rest = _cut(rest, chars)
            said.append(f"texts over {chars:,} characters cut (…)")
            continue
        maps = step != "lists"
        keeps = {k: 2 if k in whole else 0 for k in rest}
        longest = max([0, *(_longest(v, keeps[k], maps) for k, v in rest.items())])
        if longest <= 1:
            continue

        def fits(count: int, part: dict = rest, maps: bool = maps) -> bool:
            return spent(_shape(part, whole, count, None, maps)) <= room

        count = _most(fits, 1, longest)
        left: list[int] = []
        rest = _shape(rest, whole, count, left, maps)
        said.append(f"{step} inside cut at {count:,} entries ({sum(left):,} left out)")
        said[-1] += f": {more}" if more else ""
    if spent(rest) > room:
        rest = {}
        said.append("nothing of this answer fits: ask for less")
    return rest, said


def _most(fits: Any, low: int, high: int) -> int:
    """The largest value from `low` to `high` that `fits` (`low` when none does)."""
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _shape(
    body: dict[str, Any], whole: tuple[str, ...], count: int, left: list[int] | None, maps: bool
) -> dict[str, Any]:
    """`body` with every cuttable list (and with `maps`, mapping) inside kept to `count`
    entries; `left`, when given, gathers what each cut left out, and the cuts are marked."""
    cut = Cut(count, left, maps)
    return cut.mapping(body, {key: 2 if key in whole else 0 for key in body})


class Cut:
    """One way of cutting what an answer holds: lists (and with `maps`, mappings) kept
    to `count` entries; with `left`, what each cut left out is gathered and marked."""

    def __init__(self, count: int, left: list[int] | None, maps: bool) -> None:
        self.count, self.left, self.maps = count, left, maps

    def cuts(self, value: Any, keep: int) -> bool:
        """Whether `value`, kept whole for `keep` levels, is cut here."""
        if keep or not (isinstance(value, list) or (self.maps and isinstance(value, dict))):
            return False
        return len(value) > self.count

    def mapping(self, mapping: dict, keeps: dict) -> dict:
        """The entries of `mapping`, each value cut (`keeps`: how many levels of it stay
        whole), with a `<key>_omitted` count beside each value cut."""
        shaped: dict[Any, Any] = {}
        for key, value in mapping.items():
            if key in shaped:  # a count of an earlier cut, added to below
                continue
            keep = keeps.get(key, 0)
            shaped[key] = self.value(value, keep, beside=True)
            if self.left is not None and self.cuts(value, keep):
                earlier = mapping.get(f"{key}_omitted", 0)
                shaped[f"{key}_omitted"] = len(value) - self.count + earlier
        return shaped

    def value(self, value: Any, keep: int = 0, beside: bool = False) -> Any:
        """`value` cut; the `keep` levels from it down are kept whole. A cut under a
        mapping's key (`beside`) is counted beside it; one inside a list, in a last
        entry."""
        if not isinstance(value, list | dict):
            return value
        inner = max(keep - 1, 0)
        whole = not self.cuts(value, keep)
        if isinstance(value, dict):
            entries = value if whole else dict(list(value.items())[: self.count])
            shaped: Any = self.mapping(entries, dict.fromkeys(entries, inner))
        else:
            entries = value if whole else value[: self.count]
            shaped = [self.value(v, inner) for v in entries]
        dropped = len(value) - len(entries)
        if self.left is not None and dropped:
            self.left.append(dropped)
            if not beside and isinstance(shaped, dict):
                shaped["…"] = f"{dropped:,} more"
            elif not beside:
                shaped.append(f"… {dropped:,} more")
        return shaped


def _longest(value: Any, keep: int, maps: bool) -> int:
    """The most entries of any list (with `maps`, or mapping) inside `value` that may
    be cut."""
    if not isinstance(value, dict | list):
        return 0
    inner = value.values() if isinstance(value, dict) else value
    found = max([0, *(_longest(v, max(keep - 1, 0), maps) for v in inner)])
    cuttable = not keep and (isinstance(value, list) or maps)
    return max(found, len(value)) if cuttable else found


def _widest(value: Any) -> int:
    """The longest text (or key) inside `value`."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max([0, *(max(len(str(k)), _widest(v)) for k, v in value.items())])
    if isinstance(value, list):
        return max([0, *(_widest(v) for v in value)])
    return 0


def _cut(value: Any, chars: int) -> Any:
    """`value` with every text and key over `chars` characters cut to them, with `…`."""
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + "…"
    if isinstance(value, list):
        return [_cut(v, chars) for v in value]
    if isinstance(value, dict):
        shaped = {}
        for key, inner in value.items():
            name = _cut(str(key), chars)
            while name in shaped:  # two long keys alike at their start
                name += "'"
            shaped[name] = _cut(inner, chars)
        return shaped
    return value
