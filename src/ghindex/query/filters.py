"""What a search or scan is narrowed to, and how that becomes a Lance `WHERE` clause.

`Filters` is the one vocabulary of filters: the CLI builds it from its options, and
`Filters.of` from the flat keyword arguments the MCP tools and the Python API take
(`repo="o/r"`, `labels=["bug"]`, `state=["open", "closed"]`).

Labels and states match whatever case they are typed in (`bug` finds `Bug`, `OPEN` finds
`open`, `STRASSE` finds `Straße`): `clauses` turns each such value into the spellings
the index holds of it (`Spellings`, which the searcher reads from its index), so stored
values stay as GitHub gave them and every door matches alike.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, date, datetime
from typing import Any

from ghindex.errors import GhindexError
from ghindex.vocabulary.limits import VALUE_CHARS, check_text, check_values
from ghindex.vocabulary.times import iso_moment
from ghindex.vocabulary.types import FILTER_TYPES

MODES = ("hybrid", "dense", "sparse")  # retrievers: both fused, meaning only, words only
SORTS = ("relevance", "updated_desc", "created_desc")
STATES = ("open", "closed", "merged")  # as people type them; the tables say OPEN, ...


@dataclass(frozen=True)
class Option:
    """One filter as people and agents type it: the CLI's options and the MCP tools'
    arguments are both made from `OPTIONS`, so they cannot drift apart."""

    field: str  # the `Filters` field it fills
    argument: str  # the MCP and Python argument; the CLI flag is its dashed form
    meaning: str  # the help line and the argument's description
    flag: str | None = None  # the CLI flag, when it is not `--argument`
    metavar: str | None = None
    kind: str = "values"  # values | text (one value) | time (an ISO date or time)
    choices: tuple[str, ...] = ()  # the values it takes, when they are known

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.argument.replace("_", "-")


OPTIONS = {
    option.argument: option
    for option in (
        Option("repos", "repo", "Only this repository, 'owner/name'.", metavar="OWNER/NAME"),
        Option(
            "types",
            "type",
            "Only this kind of item; 'issue' includes the issues' comments.",
            choices=FILTER_TYPES,
        ),
        Option("states", "state", "Only items in this state (any case).", choices=STATES),
        Option(
            "labels",
            "labels",
            "Only items carrying every one of these labels (any case).",
            flag="--label",
        ),
        Option(
            "any_labels", "any_labels", "Only items carrying one of these labels.", "--any-label"
        ),
        Option(
            "not_labels", "not_labels", "Only items carrying none of these labels.", "--not-label"
        ),
        Option("authors", "author", "Only text written by this login.", metavar="LOGIN"),
        Option("assignees", "assignee", "Only items assigned to this login.", metavar="LOGIN"),
        Option("milestones", "milestone", "Only items in this milestone (title)."),
        Option(
            "path_prefix",
            "path_prefix",
            "Only docs and diffs under this path, e.g. 'docs/'.",
            flag="--path",
            metavar="PREFIX",
            kind="text",
        ),
        Option(
            "since", "since", "Only items updated at or after this ISO date or time.", kind="time"
        ),
        Option("until", "until", "Only items updated before this ISO date or time.", kind="time"),
        Option(
            "created_since",
            "created_since",
            "Only items created at or after this ISO date or time.",
            kind="time",
        ),
        Option(
            "created_until",
            "created_until",
            "Only items created before this ISO date or time.",
            kind="time",
        ),
    )
}
# The filters each MCP tool takes (the CLI's `search` takes every one).
SEARCH_FILTERS = (
    "repo",
    "type",
    "state",
    "labels",
    "author",
    "assignee",
    "milestone",
    "path_prefix",
    "since",
    "until",
)
CONTEXT_FILTERS = ("repo", "type", "state", "labels", "author", "since", "until")

# Filters where several values mean "any of them"; the others need every value.
_ANY_OF = ("repo", "state", "author", "milestone", "type", "any_label", "assignee")
# A flat argument's name -> the field it fills (`label` and `labels` both mean all of them).
_FIELD_OF = {
    "repo": "repos",
    "type": "types",
    "state": "states",
    "label": "labels",
    "author": "authors",
    "assignee": "assignees",
    "milestone": "milestones",
}
_SINGLE = ("path_prefix", "since", "until", "created_since", "created_until")
# Fields matched in any case -> the index column whose stored spellings they take.
FOLDED = {"states": "state", "labels": "labels", "any_labels": "labels", "not_labels": "labels"}
# index column -> folded value -> the spellings the index holds of it
Spellings = Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True)
class Filters:
    """Each field narrows results. Several values in one field mean any of them,
    except `labels`, where an item must carry every label given."""

    repos: tuple[str, ...] = ()
    types: tuple[str, ...] = ()  # a document type or an entity type
    states: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # all of them
    any_labels: tuple[str, ...] = ()  # at least one
    not_labels: tuple[str, ...] = ()  # none of them
    authors: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    milestones: tuple[str, ...] = ()
    path_prefix: str | None = None
    since: datetime | None = None  # updated at or after
    until: datetime | None = None  # updated before
    created_since: datetime | None = None
    created_until: datetime | None = None

    def __post_init__(self) -> None:
        for field in fields(self):  # bounded before any work: lists and their values
            value = getattr(self, field.name)
            if isinstance(value, tuple):
                check_values("filters", field.name, value)
        check_text("filters", "path_prefix", self.path_prefix, VALUE_CHARS)
        # a date means its midnight, and a time without a zone is UTC, as GitHub's are
        for name in ("since", "until", "created_since", "created_until"):
            object.__setattr__(self, name, _utc(getattr(self, name), name))

    @classmethod
    def of(cls, **given: Any) -> Filters:
        """Filters from flat arguments: a field's name or its singular (`repo`, `label`),
        one value or a list each; None and empty values are left out."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in given.items():
            name = _FIELD_OF.get(key, key)
            if name not in known:
                names = ", ".join(sorted(known | set(_FIELD_OF)))
                raise GhindexError(f"unknown filter {key!r}: use one of {names}")
            if value is None or value == "" or value == [] or value == ():
                continue
            if name in _SINGLE:
                values[name] = value
            else:
                values[name] = (value,) if isinstance(value, str) else tuple(value)
        return cls(**values)

    def folded_columns(self) -> set[str]:
        """The index columns whose stored spellings `clauses` needs for these filters."""
        return {column for name, column in FOLDED.items() if getattr(self, name)}

    def clauses(self, spelled: Spellings | None = None) -> list[tuple[str, str, str]]:
        """(filter name, value as given, SQL predicate), one per value. A label or state
        matches each of its spellings in `spelled` (folded alike, see `fold`); a value
        `spelled` does not hold is matched as given."""
        spelled = spelled or {}

        def spellings(column: str, value: str) -> tuple[str, ...]:
            return spelled.get(column, {}).get(fold(value)) or (value,)

        found = []
        for name, column, values in (
            ("repo", "repo", self.repos),
            ("state", "state", self.states),
            ("author", "author", self.authors),
            ("milestone", "milestone", self.milestones),
        ):
            found.extend(
                (name, v, _equals(column, spellings(column, v) if name == "state" else (v,)))
                for v in values
            )
        found.extend(
            ("type", v, f"(type = {literal(v)} OR entity_type = {literal(v)})") for v in self.types
        )
        for name, values, negated in (
            ("label", self.labels, False),
            ("any_label", self.any_labels, False),
            ("not_label", self.not_labels, True),
        ):
            for v in values:
                predicate = _carries("labels", spellings("labels", v))
                found.append((name, v, f"NOT {predicate}" if negated else predicate))
        found.extend(("assignee", v, f"array_has(assignees, {literal(v)})") for v in self.assignees)
        if self.path_prefix:
            found.append(
                ("path", self.path_prefix, f"starts_with(path, {literal(self.path_prefix)})")
            )
        for name, column, op, value in (
            ("since", "updated_at", ">=", self.since),
            ("until", "updated_at", "<", self.until),
            ("created_since", "created_at", ">=", self.created_since),
            ("created_until", "created_at", "<", self.created_until),
        ):
            if value is not None:
                found.append((name, value.isoformat(), f"{column} {op} {_timestamp(value)}"))
        return found

    def where(self, spelled: Spellings | None = None) -> str | None:
        return " AND ".join(self.groups(spelled)) or None

    def groups(self, spelled: Spellings | None = None) -> list[str]:
        """One predicate per filter given (its values joined by OR or AND): the parts
        `where` joins with AND, each of which a retriever may test on its own."""
        grouped: dict[str, list[str]] = {}
        for name, _, predicate in self.clauses(spelled):
            grouped.setdefault(name, []).append(predicate)
        return [
            "(" + (" OR " if name in _ANY_OF else " AND ").join(predicates) + ")"
            for name, predicates in grouped.items()
        ]

    def as_dict(self) -> dict[str, Any]:
        shown = {}
        for key, value in asdict(self).items():
            if value in ((), None):
                continue
            shown[key] = (
                value.isoformat()
                if isinstance(value, datetime)
                else (list(value) if isinstance(value, tuple) else value)
            )
        return shown


def literal(value: str) -> str:
    """A string as a SQL literal (for Lance's `WHERE` clauses)."""
    return "'" + str(value).replace("'", "''") + "'"


def fold(value: str) -> str:
    """`value` in the one case filters compare in: Unicode's caseless matching, so `Bug`
    is `bug`, `Straße` is `STRASSE`, and a composed `é` is a decomposed one."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", value).casefold())


def spellings(stored: Iterable[str | None]) -> dict[str, tuple[str, ...]]:
    """Stored values by their folded form: {'bug': ('Bug', 'bug')}."""
    found: dict[str, set[str]] = {}
    for value in stored:
        if value:
            found.setdefault(fold(value), set()).add(value)
    return {key: tuple(sorted(values)) for key, values in found.items()}


def _equals(column: str, values: tuple[str, ...]) -> str:
    if len(values) == 1:
        return f"{column} = {literal(values[0])}"
    return f"{column} IN ({', '.join(literal(v) for v in values)})"


def _carries(column: str, values: tuple[str, ...]) -> str:
    """`column`, a list, holds one of `values`."""
    if len(values) == 1:
        return f"array_has({column}, {literal(values[0])})"
    return f"array_has_any({column}, [{', '.join(literal(v) for v in values)}])"


def _utc(value: date | datetime | str | None, name: str = "date") -> datetime | None:
    """`value` (a date, a time, or either in ISO form: `iso_moment`) as a UTC time; any
    ISO date from year 1 to 9999."""
    if value is None:
        return None
    value = iso_moment(value, f"filters: {name}")
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    try:
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:  # a zone carried it past year 1 or 9999: the end is the bound
        end = datetime.max if value.year > 1 else datetime.min
        return end.replace(tzinfo=UTC)


def _timestamp(value: datetime) -> str:
    moment = value.astimezone(UTC) if value.tzinfo else value
    return (
        f"TIMESTAMP '{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}'"
    )
