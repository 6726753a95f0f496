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
    rest = dict(body)

    def spent(part: dict[str, Any]) -> int:
        return cost({**fixed, **part})

    room = limit - SAYING
    said = []
    longest = max([0, *(_longest(v, 2 if k in whole else 0) for k, v in rest.items())])
    if longest > 1 and spent(rest) > room:
        count = _most(lambda k: spent(_shape(rest, whole, k, None)) <= room, 1, longest)
        left: list[int] = []
        rest = _shape(rest, whole, count, left)
        said.append(f"lists inside cut at {count:,} entries ({sum(left):,} left out)")
        said[-1] += f": {more}" if more else ""
    if spent(rest) > room:
        chars = _most(lambda c: spent(_cut(rest, c)) <= room, SHORTEST, max(_widest(rest), 1))
        rest = _cut(rest, chars)
        said.append(f"texts over {chars:,} characters cut (…)")
    if spent(rest) > room:
        rest = {}
        said.append("nothing of this answer fits: ask for less")
    body.clear()
    body.update({k: fixed.get(k, rest.get(k)) for k in order if k in fixed or k in rest})
    body.update(rest)
    say(body, "; ".join(said) + f" to fit the {limit:,}-token answer budget")
    return True


def _most(fits: Any, low: int, high: int) -> int:
    """The largest value from `low` to `high` that `fits` (`low` when none does)."""
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _shape(body: dict[str, Any], whole: tuple[str, ...], count: int, left: list[int] | None):
    """`body` with every cuttable list and mapping inside kept to `count` entries;
    `left`, when given, gathers what each cut left out, and the cuts are marked."""
    shaped: dict[str, Any] = {}
    for key, value in body.items():
        keep = 2 if key in whole else 0
        shaped[key] = _cap(value, count, left, keep)
        if left is not None and not keep and isinstance(value, list) and len(value) > count:
            shaped[f"{key}_omitted"] = len(value) - count
    return shaped


def _beside(mapping: dict, count: int, left: list[int] | None, keep: int):
    """The entries of `mapping` (the first `count` unless `keep`), and with `left`, a
    `<key>_omitted` count beside each list cut, and `…` for the entries cut."""
    entries = list(mapping.items())
    kept = entries if keep else entries[:count]
    for key, value in kept:
        yield key, value
        if left is not None and isinstance(value, list) and len(value) > count and keep <= 1:
            yield f"{key}_omitted", len(value) - count
    if left is not None and len(kept) < len(entries):
        left.append(len(entries) - len(kept))
        yield "…", f"{len(entries) - len(kept):,} more"


def _cap(value: Any, count: int, left: list[int] | None, keep: int = 0, beside: bool = True) -> Any:
    """`value` with every list and mapping in it kept to `count` entries; the `keep`
    levels from `value` down are kept whole. A list under a mapping's key has its cut
    counted beside it (`_beside`); one inside a list, in a last entry."""
    if isinstance(value, dict):
        return {
            k: _cap(v, count, left, max(keep - 1, 0)) for k, v in _beside(value, count, left, keep)
        }
    if isinstance(value, list):
        kept = value if keep else value[:count]
        shaped = [_cap(v, count, left, max(keep - 1, 0), beside=False) for v in kept]
        if left is not None and len(kept) < len(value):
            left.append(len(value) - len(kept))
            if not beside:
                shaped.append(f"… {len(value) - len(kept):,} more")
        return shaped
    return value


def _longest(value: Any, keep: int = 0) -> int:
    """The most entries of any list or mapping inside `value` that may be cut."""
    if not isinstance(value, (dict, list)):
        return 0
    inner = value.values() if isinstance(value, dict) else value
    found = max([0, *(_longest(v, max(keep - 1, 0)) for v in inner)])
    return found if keep else max(found, len(value))


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
