"""When to stop following a connection's pages, whatever GitHub answers.

Every paginated read (a repository's issues, an issue's comments, an organisation's
repositories, a timeline) follows `pageInfo.endCursor` while `hasNextPage` is true,
through one `Pager`. A server that answers wrongly must not keep a fetch going for
ever, so the pager stops, raising `Unpageable` with the reason, when a page:

- has no `pageInfo` (or a null one), or says there is more without a cursor;
- names a cursor seen before in this read (the previous one, or any earlier: A→B→A);
- brings nothing new: no item it has not seen already (an empty page, or the same
  items again), an item counting as new when its id (and `updatedAt`) is;
- would take the read past what `totalCount` said there is, plus a margin for items
  added while it is read (`MARGIN` and a tenth), or past `MOST_ITEMS` when no count
  was given.

The caller turns the reason into a gap for that item or surface (`fetch_gaps`), which
the next run reads again; what was read before the stop is kept.
"""

from __future__ import annotations

import json
from typing import Any

# Items a read may bring beyond what `totalCount` said, for items added meanwhile.
MARGIN = 100
# A read with no usable `totalCount` stops after this many distinct items (GitHub's
# largest repositories hold a few hundred thousand issues).
MOST_ITEMS = 2_000_000


class Unpageable(Exception):
    """A connection whose pages cannot be followed to their end: `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Pager:
    """Follows one connection's pages: `follow(connection)` for each page in turn
    returns the cursor to ask with next, or None when the read is complete. `what`
    names the connection in reasons ("comments", "octo/hello issues"); `after` is the
    cursor the first page was asked with."""

    def __init__(self, what: str, after: str | None = None) -> None:
        self.what = what
        self.pages = 0
        self.total: int | None = None
        self._cursors = {after} if after is not None else set()
        self._seen: set[Any] = set()

    def follow(self, connection: Any, keys: list[Any] | None = None) -> str | None:
        """The cursor after this page, None at the end. `keys` identify the page's items
        (default: `item_key` of each node)."""
        info = page_info(connection, self.what)
        self.pages += 1
        total = connection.get("totalCount")
        if type(total) is int and total >= 0:
            self.total = max(self.total or 0, total)
        if keys is None:
            keys = [item_key(node) for node in connection["nodes"]]
        fresh = {key for key in keys if key not in self._seen}
        self._seen |= fresh
        if not info["hasNextPage"]:
            return None
        cursor = info.get("endCursor")
        if not isinstance(cursor, str) or not cursor:
            raise Unpageable(f"GitHub said there are more {self.what} but gave no cursor")
        if cursor in self._cursors:
            raise Unpageable(
                f"GitHub's pages of {self.what} went in a circle (page {self.pages} "
                "named a cursor seen before)"
            )
        if not fresh:
            kind = "an empty page" if not keys else "only items seen before"
            raise Unpageable(f"page {self.pages} of {self.what} brought nothing new ({kind})")
        if len(self._seen) > self.bound:
            counted = f"the {self.total} it counted" if self.total is not None else "any bound"
            raise Unpageable(f"GitHub kept giving {self.what} past {counted}")
        self._cursors.add(cursor)
        return cursor

    @property
    def bound(self) -> int:
        """The most distinct items this read may bring."""
        if self.total is None:
            return MOST_ITEMS
        return min(self.total, MOST_ITEMS) + MARGIN + self.total // 10


def page_info(connection: Any, what: str) -> dict[str, Any]:
    """A connection's `pageInfo`, checked for the shape every reader relies on."""
    info = connection.get("pageInfo") if isinstance(connection, dict) else None
    if not isinstance(info, dict) or not isinstance(info.get("hasNextPage"), bool):
        raise Unpageable(f"GitHub answered its {what} without pageInfo")
    if not isinstance(connection.get("nodes"), list):
        raise Unpageable(f"GitHub answered its {what} without a list of nodes")
    return info


def item_key(node: Any) -> Any:
    """What makes an item new to a read: its id and update time, or all of it when it
    has no id (a timeline event)."""
    if isinstance(node, dict) and isinstance(node.get("id"), str):
        updated = node.get("updatedAt")
        return ("id", node["id"], updated if isinstance(updated, str) else None)
    return ("value", json.dumps(node, sort_keys=True, default=str))
