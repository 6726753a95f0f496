"""Secrets out of everything ghindex stores.

People paste credentials into issues, comments, diffs, docs, even label and branch
names, and a snapshot is copied to buckets, CI artifacts and agents' machines. So text
is redacted once, at ingestion, before it is written to `state.duckdb`: every row
written through `state/rows.py` has every string scanned (`scrub_rows`), except the
columns GitHub and git generate (ids, hashes, enums: `NEVER_SCANNED`). The index,
`show`, the MCP tools, SQL, exports and the report only ever see redacted text. A
redaction is a visible marker that keeps the kind, `[redacted:github-pat]`.

Detectors, merged:

1. Kingfisher's maintained rule set for provider formats (`state/secret_library.py`:
   about 490 rules, Betterleaks' and Google's Veles, updated as providers add
   prefixes);
2. ghindex's own rules for what no provider pattern sees (`state/secret_rules.py`):
   key material found whole, a JWT as one, `Authorization:` headers, credentials in
   URLs of any scheme, secret-named assignments in every form whatever the value's
   alphabet, AWS secret keys in prose;
3. base64 runs whose decoded text either of those finds (a kubeconfig's
   `client-key-data`, an encoded credentials file), replaced whole.

Spans found by several detectors are merged and replaced once, so redacting is
idempotent: a marker matches no rule. Counts per kind are tallied for the run
(`tally`), never the secrets themselves. The rules' identity (`rules_version()`) is
recorded with the stored text; a newer one redacts it again (`state/redaction.py`).
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ghindex.state import secret_formats, secret_library, secret_rules, secret_text

# Bump when ghindex's own rules change (a new detector wheel changes the version by
# itself): stored text is then redacted again (`state/redaction.py`).
RULES_VERSION = 4
MARKER = re.compile(r"\[redacted:([a-z0-9-]+)\]")
_SHORTEST = 8  # no credential any rule finds is shorter

# Columns of what GitHub or git generate, never what people wrote: they are not scanned
# (a node id or a hash is no credential, and a cursor must stay as GitHub gave it).
# Every other string column, and every string in a list or JSON column, is.
NEVER_SCANNED: dict[str, frozenset[str]] = {
    "*": frozenset(
        {
            "repo",
            "node_id",
            "state",
            "state_reason",
            "author_type",
            "author_association",
            "parent_type",
            "commit_oid",
            "original_commit_oid",
            "thread_id",
        }
    ),
    "repos": frozenset({"handle", "owner", "name"}),
    "commits": frozenset({"sha", "parents"}),
    "commit_files": frozenset({"sha", "status"}),
    "docs": frozenset({"kind", "commit_sha", "blob_sha", "last_commit_sha"}),
    "releases": frozenset({"tag_commit"}),
    "edges": frozenset({"kind", "source_field"}),
    "fetch_gaps": frozenset({"surface"}),
    "runs": frozenset({"run_id", "command", "status", "ghindex_version", "repos"}),
    "sync_state": frozenset({"surface", "cursor"}),
    "ghindex_meta": frozenset({"key", "value"}),
    "schema_migrations": frozenset({"name"}),
}

_tally: ContextVar[Counter[str] | None] = ContextVar("ghindex_redactions", default=None)
_enabled: ContextVar[bool] = ContextVar("ghindex_redaction_enabled", default=True)


def rules_version() -> str:
    """What the stored text was redacted with: ghindex's rules and the detector's."""
    return f"v{RULES_VERSION}+{secret_library.rules_version()}"


@contextmanager
def tally(enabled: bool = True) -> Iterator[Counter[str]]:
    """Within the block, count redactions per kind (and switch redaction off with
    `enabled=False`, the `redact = false` setting)."""
    counts: Counter[str] = Counter()
    counting = _tally.set(counts)
    switch = _enabled.set(enabled)
    try:
        yield counts
    finally:
        _tally.reset(counting)
        _enabled.reset(switch)


def enabled() -> bool:
    return _enabled.get()


def find(text: str) -> list[tuple[int, int, str]]:
    """Every secret-looking span of `text` as (start, end, kind), merged, in order."""
    if len(text) < _SHORTEST:
        return []
    paired = secret_formats.aws_secret_pairs(text)  # also beside a redacted key id
    markers = [m.span() for m in MARKER.finditer(text)]
    if markers:  # scanned as `xxxx…` (a placeholder to every rule), and never matched
        pieces, last = [], 0
        for start, end in markers:
            pieces += [text[last:start], "x" * (end - start)]
            last = end
        text = "".join([*pieces, text[last:]])
    spans = _scanned(text) + paired
    hidden = secret_text.normalised(text)
    if hidden is not None:  # also as it renders or decodes: `ghp\_…`, `&#95;`, a ZWSP inside
        for low, high in hidden.windows():
            found = _scanned(hidden.text[low:high])
            spans += hidden.to_original([(s + low, e + low, k) for s, e, k in found])
    if markers:
        starts = [b for b, _ in markers]
        spans = [s for s in spans if not _overlaps(s, markers, starts)]
    return _merge(spans)


def _overlaps(
    span: tuple[int, int, str], markers: list[tuple[int, int]], starts: list[int]
) -> bool:
    """Whether `span` overlaps one of `markers` (sorted, apart; `starts` their starts)."""
    before = bisect.bisect_left(starts, span[1]) - 1
    return before >= 0 and markers[before][1] > span[0]


# Provider patterns want a token to stand apart (space, quote, `=` before it); in a
# branch name, a path or a label it is glued on by `/`, `#`, `(`... The library sees the
# text a second time with those as spaces (same length, so offsets hold).
_GLUE = str.maketrans({c: " " for c in "/\\|#()[]{}<>*~^!,;"})


def _scanned(text: str) -> list[tuple[int, int, str]]:
    return _plain(text) + secret_rules.encoded(text, _plain)


def _plain(text: str) -> list[tuple[int, int, str]]:
    spans = secret_rules.own_spans(text) + secret_library.spans(text)
    loose = text.translate(_GLUE)
    if loose != text:
        spans += secret_library.spans(loose)
    return spans


def redact(text: str) -> str:
    """`text` with every secret-looking span replaced by `[redacted:<kind>]`.

    Applied until nothing more is found (a rule may see a new match once its
    neighbour is a marker), so redacting redacted text changes nothing."""
    if not text or not _enabled.get():
        return text
    for _ in range(_PASSES):
        spans = find(text)
        if not spans:
            return text
        text = _replace(text, spans)
    return text


_PASSES = 4


def _replace(text: str, spans: list[tuple[int, int, str]]) -> str:
    counts = _tally.get()
    pieces, last = [], 0
    for start, end, kind in spans:
        pieces += [text[last:start], f"[redacted:{kind}]"]
        last = end
        if counts is not None:
            counts[kind] += 1
    pieces.append(text[last:])
    return "".join(pieces)


def redact_value(value: Any) -> Any:
    """`value` with every string in it redacted: a string, a list, a dict (JSON)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def scanned(table: str, column: str) -> bool:
    """Whether `column` of `table` holds text people wrote (and so is scanned)."""
    return column not in NEVER_SCANNED["*"] and column not in NEVER_SCANNED.get(table, ())


def scrub_rows(table: str, rows: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """`rows` for `table` with every scanned value redacted (new dicts, when needed)."""
    if not _enabled.get():
        return rows
    scrubbed = []
    for row in rows:
        changed = {}
        for column, value in row.items():
            if isinstance(value, (str, list, dict)) and scanned(table, column):
                fresh = redact_value(value)
                if fresh != value:
                    changed[column] = fresh
        scrubbed.append({**row, **changed} if changed else row)
    return scrubbed


def scrub_json(text: str | None) -> str | None:
    """A JSON document (a run's stats) with every string in it redacted."""
    if not text:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return redact(text)
    fresh = redact_value(value)
    return text if fresh == value else json.dumps(fresh, sort_keys=True, default=str)


def _merge(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans as one, keeping the kind of the one that starts first (the
    longest when two start together)."""
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            merged[-1] = (last_start, max(last_end, end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged
