"""The answer budget: every MCP answer fits an agent's context.

Agents' clients cap one tool answer at about 25,000 tokens, and an answer near that
pushes the task itself out of the context. So each answer is held to a budget
(`GHINDEX_MCP_MAX_TOKENS`, default 8,000, at most 20,000), counted as the client will
receive it (the JSON text, indented) with the estimate the `context` tool packs by
(`query/context.py`). What does not fit is cut at a whole result, row or neighbour,
with `truncated: true`, `truncated_reason` naming what was left out, and `next_offset`
to ask for the rest.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from ghindex.config import ENVIRONMENT, env
from ghindex.query.context import tokens

_SETTING = ENVIRONMENT["GHINDEX_MCP_MAX_TOKENS"]
DEFAULT_TOKENS = int(_SETTING.default)  # type: ignore[call-overload]
MOST_TOKENS = int(_SETTING.most or 0)


def budget() -> int:
    """The answer budget in tokens (`GHINDEX_MCP_MAX_TOKENS`)."""
    return env("GHINDEX_MCP_MAX_TOKENS")


def cost(body: Any) -> int:
    """Tokens of `body` as the client receives it."""
    return tokens(pydantic_core.to_json(body, fallback=str, indent=2).decode())


def fit(body: dict[str, Any], key: str, limit: int, offset: int | None = 0, what: str = "") -> bool:
    """Drop whole entries from the end of `body[key]` until `body` costs at most `limit`
    tokens (at least one entry stays); say so in `body` and return whether it was cut.
    `offset`: where `body[key]` starts in the whole answer (None: an answer's extra list,
    with no way on but a narrower call)."""
    entries = body.get(key) or []
    if cost(body) <= limit:
        return False
    if len(entries) <= 1:
        return _squeeze(body, key, limit)
    low, high = 1, len(entries) - 1  # the most entries that fit, by halving
    while low < high:
        middle = (low + high + 1) // 2
        body[key] = entries[:middle]
        if cost(body) + 80 <= limit:  # room for what is said about the cut
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
    else:
        said += f": ask again with offset={offset + low}"
        body["next_offset"] = offset + low
    _say(body, said)
    return True


def _say(body: dict[str, Any], said: str) -> None:
    """Mark `body` cut, adding `said` to what is already said about it."""
    body["truncated"] = True
    earlier = body.get("truncated_reason")
    body["truncated_reason"] = f"{earlier}; {said}" if earlier else said


def _squeeze(body: dict[str, Any], key: str, limit: int) -> bool:
    """The one entry of `body[key]` with its long texts cut (`…`) until `body` fits."""
    for _ in range(6):
        spent = cost(body)
        if spent <= limit or not body.get(key):
            break
        body[key] = _cut(body[key], max(limit / spent * 0.9, 0.05))
    else:
        return False
    if spent > limit:
        return False
    body["truncated"] = True
    body.setdefault("truncated_reason", None)
    body["truncated_reason"] = f"long text cut to fit the {limit:,}-token answer budget" + (
        f" ({body['truncated_reason']})" if body["truncated_reason"] else ""
    )
    return True


def _cut(value: Any, ratio: float) -> Any:
    """`value` with each text over 200 characters kept to `ratio` of its length."""
    if isinstance(value, str) and len(value) > 200:
        return value[: max(int(len(value) * ratio), 200)] + "…"
    if isinstance(value, list):
        return [_cut(v, ratio) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v, ratio) for k, v in value.items()}
    return value
