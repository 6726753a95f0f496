"""Are a local snapshot's files whole? Two checks, for `ghindex status`.

`check_files` is cheap and always runs: the state database opens and its counts query
runs, and the index's chunks table opens and counts its rows. It catches a truncated or
overwritten state file and an index whose table cannot be opened; a damaged file is
refused with one line naming it and what to do.

`verify` (`ghindex status --verify`) reads every byte: each file the manifest lists is
hashed as `publish` hashes it (`hash_file`) and compared with the manifest's size and
sha256, which catches a single flipped bit anywhere. Only a pulled snapshot has a file
list; a workdir built here has nothing to compare against, and says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ghindex.errors import GhindexError, IndexUnusable, SnapshotError, first_line
from ghindex.progress import BYTES, Progress
from ghindex.snapshot.layout import INDEX_DIR, MANIFEST, NOT_BUILT, STATE_FILE, Manifest, hash_file
from ghindex.snapshot.local import live_root

BUSY = "in use by another process (not checked)"
# Where Rust's (or C++'s) source location is appended to a library's error.
_SOURCE_PATH = re.compile(r",?\s*\S+\.(?:rs|cpp|cc|h|hpp):\d+(?::\d+)?")
_LANCE_PREFIX = re.compile(r"^(?:lance error:\s*)?(?:LanceError\(\w+\):\s*)?", re.I)


def check_files(root: Path, counts: dict[str, Any]) -> dict[str, Any]:
    """Open the state database and the chunks table of the snapshot in `root` (its live
    version) and run a query on each: what was checked, or the damaged file's error.
    `counts` are the manifest's: an index it counts chunks of must be there."""
    from ghindex.index.table import CHUNKS

    checked: dict[str, Any] = {"state": _check_state(root / STATE_FILE)}
    if (root / INDEX_DIR / f"{CHUNKS}.lance").exists() or counts.get("chunks"):
        checked["index_rows"] = _count_chunks(root / INDEX_DIR)
        checked["index"] = "ok"
    return checked


def _check_state(path: Path) -> str:
    if not path.exists():
        return "absent"
    from ghindex.state.database import StateBusy, named_damage, open_state

    try:
        con = open_state(path, read_only=True, wait=0.0)
    except StateBusy:
        return BUSY
    try:
        with named_damage(path):
            tables = [
                name
                for (name,) in con.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_type = 'BASE TABLE' ORDER BY table_name"
                ).fetchall()
            ]
            if tables:
                con.execute(
                    " UNION ALL ".join(f'SELECT count(*) FROM "{name}"' for name in tables)
                ).fetchall()
    finally:
        con.close()
    return "ok"


def _count_chunks(lance: Path) -> int:
    from ghindex.index.table import CHUNKS, connect

    where = f"{INDEX_DIR}/{CHUNKS}.lance"
    if not lance.is_dir():
        raise IndexUnusable(
            f"{INDEX_DIR}/ is missing though the manifest counts chunks: restore it with "
            "`ghindex pull`, or rebuild it with `ghindex build --full`"
        )
    try:
        return connect(lance).open_table(CHUNKS).count_rows()
    except Exception as exc:  # lance raises RuntimeError, ValueError, OSError alike
        raise lance_damaged(exc, where) from None


def unusable(root: Path, counts: dict[str, Any]) -> str | None:
    """Why the snapshot in `root` (a workdir to publish, a pulled copy before the switch)
    cannot be read, or None. The state database is opened read-only: a newer ghindex's is
    refused, a current one must hold every table, and each table is counted; the index's
    chunks table must open with every column and count its rows. One line, naming files
    by their place in the snapshot."""
    from ghindex.vocabulary.tables import TABLES

    state = root / STATE_FILE
    if state.is_dir():
        return f"{STATE_FILE} is a folder, not a database"
    if (root / INDEX_DIR).is_file():
        return f"{INDEX_DIR} is a file, not a folder"
    if state.exists():
        import duckdb

        from ghindex.state.database import needs_writer

        try:
            with duckdb.connect(str(state), read_only=True) as con:
                if needs_writer(con, state):
                    return None  # an older ghindex's: the next fetch upgrades it
                tables = {
                    name
                    for (name,) in con.execute(
                        "SELECT table_name FROM information_schema.tables "
                        "WHERE table_type = 'BASE TABLE'"
                    ).fetchall()
                }
                missing = [name for name in TABLES if name not in tables]
                if missing:
                    return f"{STATE_FILE} lacks the table{'s' * (len(missing) > 1)} " + (
                        ", ".join(missing)
                    )
                con.execute(
                    " UNION ALL ".join(f'SELECT count(*) FROM "{name}"' for name in TABLES)
                ).fetchall()
        except GhindexError as exc:  # a newer ghindex's state
            return first_line(exc).replace(f"{state}", STATE_FILE)
        except Exception as exc:  # duckdb raises its own types alike
            return f"{STATE_FILE} cannot be read ({short_cause(exc)})"
    return _index_unusable(root / INDEX_DIR, counts)


def _index_unusable(lance: Path, counts: dict[str, Any]) -> str | None:
    from ghindex.index.table import CHUNKS, chunks_schema, connect, index_model

    where = f"{INDEX_DIR}/{CHUNKS}.lance"
    if not (lance / f"{CHUNKS}.lance").exists() and not counts.get("chunks"):
        return None  # nothing indexed: a state-only snapshot
    if (lance / f"{CHUNKS}.lance").is_file():
        return f"{where} is a file, not a table"
    if not (lance / f"{CHUNKS}.lance").is_dir():
        return f"{where} is missing though the manifest counts chunks"
    try:
        db = connect(lance)
        model = index_model(db)
        table = db.open_table(CHUNKS)
        expected = chunks_schema(*(model or ("", 1))).names
        lacking = [name for name in expected if name not in table.schema.names]
        if model is None or lacking:
            return f"{where} is not a ghindex index (no model, or no column {lacking[:3]})"
        table.count_rows()
    except Exception as exc:  # lance raises RuntimeError, ValueError, OSError alike
        return f"{where} cannot be read ({short_cause(exc)})"
    return None


def lance_fault(exc: BaseException) -> bool:
    """Whether `exc` is Lance failing to read its own files (a block that does not
    decode, a file cut short or gone, a panic on a length read from flipped bits), not
    a query it refused. Told by where it was raised: inside Lance's libraries."""
    text = str(exc).lower()
    if "invalid user input" in text or "invalidinput" in text:
        return False
    innermost = exc.__traceback__
    while innermost is not None and innermost.tb_next is not None:
        innermost = innermost.tb_next
    module = innermost.tb_frame.f_globals.get("__name__", "") if innermost else ""
    return module.split(".")[0] in {"lance", "lancedb"} or "lance error" in text


def lance_damaged(exc: BaseException, where: str) -> IndexUnusable:
    """The one error for an index file that cannot be read: one line naming it, the
    library's cause without its source paths, and what to do."""
    return IndexUnusable(
        f"{where} is damaged ({short_cause(exc)}): restore it with `ghindex pull`, or "
        "rebuild it with `ghindex build --full`"
    )


def short_cause(exc: BaseException, limit: int = 120) -> str:
    """A library error's first line without the source locations Rust and C++ append."""
    text = _LANCE_PREFIX.sub("", _SOURCE_PATH.sub("", first_line(exc))).strip(" ,;:")
    return (text or type(exc).__name__)[:limit]


# ------------------------------------------------------------------------------- verify


@dataclass
class Difference:
    path: str
    problem: str  # "missing", "size" or "sha256"
    expected_size: int
    size: int | None
    expected_sha256: str
    sha256: str | None = None


@dataclass
class Verification:
    source: str
    snapshot_id: str | None
    verified: bool  # False: nothing to verify against (`reason` says why)
    files: int = 0
    bytes: int = 0
    differ: list[Difference] = field(default_factory=list)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return not self.differ

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify(given: Path, *, progress: Progress | None = None) -> Verification:
    """Hash every file the manifest of the snapshot in `given` lists and compare it with
    the manifest's size and sha256; `progress` counts the bytes read."""
    root = live_root(given)
    path = root / MANIFEST
    if not path.exists():
        raise SnapshotError(NOT_BUILT.format(given))
    data = path.read_bytes()
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise SnapshotError(f"{path} is not valid JSON ({first_line(exc)})") from None
    if not isinstance(body, dict) or not body.get("files"):
        return Verification(
            str(given),
            body.get("snapshot_id") if isinstance(body, dict) else None,
            verified=False,
            reason=f"{MANIFEST} lists no files (a build of this workdir, never pulled): "
            "nothing to verify against",
        )
    manifest = Manifest.from_bytes(data, str(path))
    report = Verification(str(given), manifest.snapshot_id, verified=True)
    report.files = len(manifest.files)
    report.bytes = sum(entry.size for entry in manifest.files)
    with (progress or Progress()).task("verify", unit=BYTES, verb="read") as counted:
        counted.set_total(report.bytes)
        for entry in manifest.files:
            found = root / entry.path
            difference = Difference(entry.path, "", entry.size, None, entry.sha256)
            if not found.is_file():
                difference.problem = "missing"
            elif (size := found.stat().st_size) != entry.size:
                difference.problem, difference.size = "size", size
            else:
                difference.size = size
                difference.sha256 = hash_file(found, entry.path).sha256
                if difference.sha256 != entry.sha256:
                    difference.problem = "sha256"
            counted.advance(entry.size)
            if difference.problem:
                report.differ.append(difference)
    return report
