"""A snapshot checked for credentials with the current rules: what `ghindex
audit-secrets` reports for a snapshot a user already has (or already published).

Everything a snapshot carries that people wrote is scanned: every column of the state
database that redaction scans (`state/redaction.scanned_columns`), every string column
of every Lance table, and the manifest. Findings name their kind and where they are
(file, table, column and the row's handle), never the value.
"""

from __future__ import annotations

import json
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

    from ghindex.state.redaction import scanned_columns

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
            columns = scanned_columns(con, table)
            if not columns:
                continue
            has_handle = any(
                c == "handle"
                for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = 'main' AND table_name = ?",
                    [table],
                ).fetchall()
            )
            key = "handle" if has_handle else "NULL"
            names = ", ".join(f'"{c}"::VARCHAR' for c, _ in columns)
            cursor = con.execute(f"SELECT {key}, {names} FROM {table}")
            while rows := cursor.fetchmany(_BATCH):
                for handle, *values in rows:
                    for (column, _), value in zip(columns, values, strict=True):
                        if value:
                            yield f"{STATE_FILE} {table}.{column}", handle, value
    finally:
        con.close()


def _lance_values(folder: Path) -> Iterator[tuple[str, str | None, str]]:
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(folder)
    for name in db.list_tables().tables:
        table = db.open_table(name)
        strings = [
            f.name
            for f in table.schema
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        ]
        if not strings:
            continue
        has_handle = "handle" in strings
        for batch in table.to_arrow().select(strings).to_batches(_BATCH):
            columns = {c: batch.column(c).to_pylist() for c in strings}
            handles = columns["handle"] if has_handle else [None] * batch.num_rows
            for column in strings:
                for handle, value in zip(handles, columns[column], strict=True):
                    if value:
                        yield f"{INDEX_DIR}/{name} {column}", handle, value


def summary_lines(report: AuditReport) -> list[str]:
    """The report for a person: one line of totals, one per kind, then where."""
    if not report.found:
        return [
            f"no secrets found in {report.source}: {report.scanned:,} values scanned "
            f"with rules {report.rules}"
        ]
    lines = [
        f"{report.found:,} secrets found in {report.source} ({report.scanned:,} values "
        f"scanned with rules {report.rules}); values are not shown"
    ]
    lines += [f"  {kind:<32} {n:>6,}" for kind, n in report.kinds.items()]
    for finding in report.findings:
        lines.append(
            f"  {finding.kind}: {finding.where}" + (f" {finding.handle}" if finding.handle else "")
        )
    if report.truncated:
        lines.append(
            f"  … the first {LISTED:,} listed; --json lists the same, the counts cover all"
        )
    lines.append("to replace them: run `ghindex update` (or fetch and build) and publish again")
    return lines


def as_json(report: AuditReport) -> str:
    return json.dumps(report.as_dict(), sort_keys=True)
