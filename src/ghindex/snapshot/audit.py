"""A snapshot checked for credentials with the current rules: what `ghindex
audit-secrets` reports for a snapshot a user already has (or already published).

Everything a snapshot carries that people wrote is scanned: every column of the state
database that redaction scans (`state/redaction.scanned_columns`), every string column
of every Lance table, and the manifest. Findings name their kind and where they are
(file, table, column and the row's handle), never the value.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import INDEX_DIR, MANIFEST, NOT_BUILT, STATE_FILE
from ghindex.snapshot.local import live_root
from ghindex.snapshot.stores import Store, shown

LISTED = 1000  # findings listed one by one; the counts cover them all
_BATCH = 4096


@dataclass(frozen=True)
class Finding:
    where: str  # 'state.duckdb issues.body', 'lance/chunks text', 'manifest.json'
    handle: str | None  # the row's handle, when it has one
    kind: str


@dataclass
class AuditReport:
    source: str
    rules: str
    scanned: int = 0  # values scanned
    found: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    truncated: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit_store(store: Store) -> AuditReport:
    """The newest snapshot of `store`, pulled into a temporary folder and audited."""
    from ghindex.snapshot.pull import pull

    with tempfile.TemporaryDirectory(prefix="ghindex-audit-") as folder:
        dest = Path(folder) / "snapshot"
        pull(store, dest)
        report = audit(dest)
    report.source = shown(store.url)
    return report


def audit(given: Path) -> AuditReport:
    """Scan the snapshot (or workdir) at `given` with the current rules."""
    from ghindex.state import redact

    root = live_root(given)
    if not (root / STATE_FILE).exists() and not (root / INDEX_DIR).exists():
        raise SnapshotError(NOT_BUILT.format(given))
    report = AuditReport(source=str(given), rules=redact.rules_version())
    kinds: Counter[str] = Counter()
    for where, handle, value in _values(root):
        report.scanned += 1
        for _start, _end, kind in redact.find(value):
            kinds[kind] += 1
            if len(report.findings) < LISTED:
                report.findings.append(Finding(where, handle, kind))
            else:
                report.truncated = True
    report.kinds = dict(sorted(kinds.items()))
    report.found = sum(kinds.values())
    return report


def _values(root: Path) -> Iterator[tuple[str, str | None, str]]:
    if (root / STATE_FILE).exists():
        yield from _state_values(root / STATE_FILE)
    if (root / INDEX_DIR).is_dir():
        yield from _lance_values(root / INDEX_DIR)
    if (root / MANIFEST).exists():
        yield MANIFEST, None, (root / MANIFEST).read_text(encoding="utf-8", errors="replace")


def _state_values(path: Path) -> Iterator[tuple[str, str | None, str]]:
    import duckdb

    from ghindex.state.redaction import scanned_rows

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise SnapshotError(f"{path} cannot be opened: {str(exc).splitlines()[0]}") from None
    try:
        tables = [
            t
            for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()
        ]
        for table in tables:
            key = "handle" if "handle" in _column_names(con, table) else "NULL"
            columns, rows = scanned_rows(con, table, key)
            for handle, values in rows:
                for (column, _), value in zip(columns, values, strict=True):
                    for piece in value if isinstance(value, list) else [value]:
                        if piece:
                            yield f"{STATE_FILE} {table}.{column}", handle, str(piece)
    finally:
        con.close()


def _column_names(con, table: str) -> set[str]:
    return {
        c
        for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_name = ?",
            [table],
        ).fetchall()
    }


def _lance_values(folder: Path) -> Iterator[tuple[str, str | None, str]]:
    """Every string, and every string in a list of strings, of every Lance table, read
    in batches of those columns only (never the vectors)."""
    import lancedb
    import pyarrow as pa

    def text(kind: pa.DataType) -> bool:
        return pa.types.is_string(kind) or pa.types.is_large_string(kind)

    db = lancedb.connect(folder)
    for name in db.list_tables().tables:
        table = db.open_table(name)
        fields = [
            f.name
            for f in table.schema
            if text(f.type) or (pa.types.is_list(f.type) and text(f.type.value_type))
        ]
        if not fields:
            continue
        batches = table.search().select(fields).limit(None).to_batches(_BATCH)
        for batch in batches:
            handles = (
                batch.column("handle").to_pylist()
                if "handle" in fields
                else [None] * batch.num_rows
            )
            for column in fields:
                for handle, value in zip(handles, batch.column(column).to_pylist(), strict=True):
                    for piece in value if isinstance(value, list) else [value]:
                        if piece:
                            yield f"{INDEX_DIR}/{name} {column}", handle, piece
