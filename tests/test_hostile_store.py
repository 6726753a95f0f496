"""A store is hostile input: a corpus of crafted stores, each refused by `pull` with one
line, writing nothing outside the destination and keeping the previous snapshot.

Every case starts from a real snapshot, published to a local store and pulled into
DEST, then crafts the store's NEXT snapshot (a manifest under a new id and pointer
generation 2, checksummed unless the case is about the checksum) the way an attacker
or a broken publisher could. Canaries sit beside DEST and at an absolute path; the
cases that name `..` or an absolute path aim at them.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shutil
import sys
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.errors import SnapshotError
from ghindex.serve import SnapshotHolder
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.layout import (
    MAX_FILES,
    PIECE_SIZE,
    blob_path,
    manifest_path,
    new_snapshot_id,
    ref_path,
)
from ghindex.snapshot.local import live_root
from testkit.state import built_workdir

ISSUES = 5
LOCK = ".ghindex.lock"  # its text names the pid of the last pull that held it


@pytest.fixture(scope="session")
def small_template(tmp_path_factory):
    """A workdir with a few issues, fetched state and a built index (embedded once)."""
    work = tmp_path_factory.mktemp("hostile-template") / "work"
    return built_workdir(work, ISSUES, topics=3, repeat=10)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listing(root: Path, *, skip: Path | None = None, lock_text: bool = True) -> dict[str, str]:
    """Every entry under `root` (not following links): a folder as 'dir', a link as its
    target text, a file as its sha256; `skip` (a folder) is left out entirely."""
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if here / d != skip)
        for name in sorted(dirs + names):
            path = here / name
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[key] = "link -> " + os.readlink(path)
            elif path.is_dir():
                found[key] = "dir"
            elif name == LOCK and not lock_text:
                found[key] = "lock"
            else:
                with open(path, "rb") as handle:
                    found[key] = "file " + hashlib.file_digest(handle, "sha256").hexdigest()
    return found


@dataclass
class Good:
    """A store holding one real snapshot, and DEST holding it pulled."""

    tmp: Path
    store_dir: Path
    dest: Path
    old_id: str
    old_raw: bytes
    canary: Path  # in a folder beside DEST
    secret: Path  # a file at an absolute path under the test's tmp dir
    monkeypatch: pytest.MonkeyPatch

    @property
    def old(self) -> dict[str, Any]:
        return json.loads(self.old_raw)

    def files(self) -> list[dict[str, Any]]:
        """The previous snapshot's file entries (all of them valid)."""
        return copy.deepcopy(self.old["files"])

    def body(self, snapshot_id: str, files: Any, **changes: Any) -> dict[str, Any]:
        document = {**self.old, "snapshot_id": snapshot_id, "parent": self.old_id}
        document["files"] = files
        document.update(changes)
        return document

    def write(self, relative: str, data: bytes) -> Path:
        """Write an object of the store directly on disk, as anything could."""
        path = self.store_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def put_blobs(self, data: bytes) -> None:
        """The pieces of `data`, each as its blob."""
        for piece in pieces(data):
            self.write(blob_path(sha(piece)), piece)

    def put_manifest(self, snapshot_id: str, document: Any) -> bytes:
        data = document if isinstance(document, bytes) else encode(document)
        self.write(manifest_path(snapshot_id), data)
        return data

    def put_pointer(
        self,
        snapshot_id: str,
        manifest_bytes: bytes | None = None,
        *,
        generation: int = 2,
        raw: bytes | None = None,
        **changes: Any,
    ) -> None:
        pointer = {
            "generation": generation,
            "snapshot_id": snapshot_id,
            "manifest_sha256": sha(manifest_bytes or b""),
            "created_at": "2026-11-30T06:00:00+00:00",
            **changes,
        }
        self.write(ref_path(2), raw if raw is not None else encode(pointer))

    def next(self, files: Any = None, *, snapshot_id: str | None = None, **changes: Any) -> str:
        """Publish a crafted next snapshot: its manifest, and a pointer that matches it."""
        snapshot_id = snapshot_id or new_snapshot_id()
        document = self.body(snapshot_id, self.files() if files is None else files, **changes)
        self.put_pointer(snapshot_id, self.put_manifest(snapshot_id, document))
        return snapshot_id


def encode(document: Any) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def pieces(data: bytes) -> list[bytes]:
    return [data[i : i + PIECE_SIZE] for i in range(0, len(data), PIECE_SIZE)] or [b""]


def entry(path: Any, data: bytes, *, whole: str | None = None) -> dict[str, Any]:
    """A manifest entry for `data`: right sizes and piece hashes, whole hash `whole`."""
    return {
        "path": path,
        "size": len(data),
        "sha256": whole or sha(data),
        "pieces": [{"sha256": sha(p), "size": len(p)} for p in pieces(data)],
    }


@pytest.fixture
def good(small_template, isolated, monkeypatch) -> Good:
    work = isolated / "work"
    shutil.copytree(small_template, work)
    store_dir = isolated / "store"
    store_dir.mkdir()
    published = publish(work, Store(str(store_dir)))
    dest = isolated / "dest"
    assert pull(Store(str(store_dir)), dest).snapshot_id == published.snapshot_id
    canary = isolated / "canary" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text("the canary beside DEST\n")
    secret = isolated / "secret" / "abs-canary.txt"
    secret.parent.mkdir()
    secret.write_text("the canary at an absolute path\n")
    return Good(
        tmp=isolated,
        store_dir=store_dir,
        dest=dest,
        old_id=published.snapshot_id,
        old_raw=(store_dir / manifest_path(published.snapshot_id)).read_bytes(),
        canary=canary,
        secret=secret,
        monkeypatch=monkeypatch,
    )


# ---------------------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Case:
    name: str
    craft: Callable[[Good], None]
    expect: Callable[[Good], str] | str  # a phrase the one-line refusal contains
    max_traced: int | None = None  # a bound on Python memory allocated during the pull


CASES: list[Case] = []


def case(name: str, expect: Callable[[Good], str] | str, **options: Any):
    def register(craft: Callable[[Good], None]) -> Callable[[Good], None]:
        CASES.append(Case(name, craft, expect, **options))
        return craft

    return register


def hostile_entry(good: Good, path: Any, data: bytes = b"owned\n", **options: Any) -> None:
    """The previous snapshot's files plus one entry named `path`, its blob in the store."""
    good.put_blobs(data)
    good.next([*good.files(), entry(path, data, **options)])


def quoted(value: object) -> str:
    """A value as a refusal quotes it: its repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def outside(path: str) -> str:
    return f"names a file outside the snapshot: {quoted(path)}"


# -- names of files: relative, under lance/ (or the state file), plain ASCII, no '..'

# Staging is DEST/snapshots/.incoming-x: three levels up is the folder DEST is in.
UP_TO_CANARY = "../../../canary/canary.txt"


# Names refused as they stand: each case adds one entry of that name, its blob present.
BAD_NAMES = {
    "dotdot-to-the-canary-beside-dest": UP_TO_CANARY,
    "dotdot-below-lance-to-the-canary": "lance/../../../../canary/canary.txt",
    "dotdot-below-lance": "lance/../../x",
    "backslash-dotdot": "lance\\..\\x",
    "nul-in-path": "lance/x\x00y",
    "one-dot-leader-look-alike-of-dotdot": "lance/\u2024\u2024/x",
    "fullwidth-look-alike-of-dotdot": "lance/\uff0e\uff0e/x",
    "empty-path": "",
    "path-is-the-manifest": "manifest.json",
    "path-outside-the-allow-list": "etc/passwd",
    "path-is-the-lance-folder-itself": "lance",
    "hidden-segment": "lance/.ghindex.lock",
    "empty-segment": "lance//x",
    "too-deep": "lance/a/b/c/d/e/f/g/h",
}
for _name, _path in BAD_NAMES.items():
    case(_name, outside(_path))(lambda good, path=_path: hostile_entry(good, path))


def four_up(good: Good) -> str:
    return f"../../../../{good.tmp.name}/canary/canary.txt"


@case("dotdot-four-levels-to-the-canary", lambda good: outside(four_up(good)))
def _(good):
    hostile_entry(good, four_up(good))


@case("absolute-path-blob-missing", lambda good: outside(str(good.secret)))
def _(good):
    good.next([*good.files(), entry(str(good.secret), b"owned\n")])  # no blob in the store


@case("absolute-path-wrong-whole-hash", lambda good: outside(str(good.secret)))
def _(good):
    hostile_entry(good, str(good.secret), whole="0" * 64)


@case("path-is-a-number", "names a file by a int, not a path")
def _(good):
    hostile_entry(good, 5)


@case("newline-ending-a-segment", outside("lance/x\n"))
def _(good):
    # `$` in a Python regex also matches before a final newline: a name that is
    # otherwise valid must still be refused, not written as 'lance/x\n'
    hostile_entry(good, "lance/x\n")


# -- the list of files as a whole


@case("a-file-listed-twice", "twice")
def _(good):
    files = good.files()
    good.next([*files, files[-1]])


@case("two-names-differing-only-in-case", "lists 'lance/data.bin' twice")
def _(good):
    good.next([*good.files(), entry("lance/Data.bin", b"a"), entry("lance/data.bin", b"b")])


@case("a-file-and-a-folder-of-one-name", "lists 'lance/a' both as a file and as a folder")
def _(good):
    good.next([*good.files(), entry("lance/a", b"a"), entry("lance/a/b", b"b")])


@case("a-file-and-a-folder-differing-in-case", "'lance/A' both as a file and as a folder")
def _(good):
    good.next([*good.files(), entry("lance/A", b"a"), entry("lance/a/b", b"b")])


@case("too-many-files", f"lists {MAX_FILES + 1:,} files, more than {MAX_FILES:,}")
def _(good):
    good.next([0] * (MAX_FILES + 1))


# -- sizes and pieces


@case("pieces-that-do-not-add-up", "declares pieces that do not add up to its size 300,000")
def _(good):
    piece = b"p" * PIECE_SIZE
    declared = entry("lance/x.bin", piece)
    declared["size"] = 300_000
    good.put_blobs(piece)
    good.next([*good.files(), declared])


@case(
    "one-piece-of-a-terabyte",
    "(lance/huge.bin) declares pieces that do not add up to its size 1,000,000,000,000",
    max_traced=1 << 20,
)
def _(good):
    digest = sha(b"huge")
    good.next(
        [
            *good.files(),
            {
                "path": "lance/huge.bin",
                "size": 10**12,
                "sha256": digest,
                "pieces": [{"sha256": digest, "size": 10**12}],
            },
        ]
    )


def publish_cut(good: Good, data: bytes, sizes: list[int]) -> None:
    """A next snapshot with `data` as lance/x.bin, cut into pieces of these sizes."""
    declared, at = entry("lance/x.bin", data), 0
    declared["pieces"] = []
    for size in sizes:
        declared["pieces"].append({"sha256": sha(data[at : at + size]), "size": size})
        at += size
    good.put_blobs(data)
    good.next([*good.files(), declared])


@case("a-short-piece-in-the-middle", "declares pieces that do not add up to its size 600,000")
def _(good):
    # only the first and the last piece may be short: a store cannot make a reader fetch
    # a file in many small requests
    publish_cut(
        good, b"m" * 600_000, [PIECE_SIZE, 1000, PIECE_SIZE, 600_000 - 2 * PIECE_SIZE - 1000]
    )


@case("two-pieces-more-than-needed", "declares pieces that do not add up to its size 300,000")
def _(good):
    publish_cut(good, b"t" * 300_000, [100_000, 100_000, 100_000])


@case("an-empty-piece-of-a-file-that-is-not", "declares pieces that do not add up to its size")
def _(good):
    publish_cut(good, b"e" * 1000, [0, 1000])


@case("a-size-beyond-the-limit", "declares a file size 2199023255552, outside 0..1,099,511")
def _(good):
    declared = entry("lance/x.bin", b"x")
    declared["size"] = 1 << 41
    good.next([*good.files(), declared])


@case("a-negative-size", "declares a file size -1, outside 0..")
def _(good):
    declared = entry("lance/x.bin", b"")
    declared["size"] = -1
    good.next([*good.files(), declared])


@case("a-piece-hash-that-is-not-hex", "has an invalid sha256 '../../../canary/canary.txt'")
def _(good):
    declared = entry("lance/x.bin", b"x")
    declared["pieces"][0]["sha256"] = UP_TO_CANARY
    good.next([*good.files(), declared])


# -- blobs


def declared_piece() -> bytes:
    return b"D" * PIECE_SIZE  # not part of the previous snapshot: it must be downloaded


@case(
    "a-blob-far-longer-than-its-piece",
    lambda good: (
        f"{blob_path(sha(declared_piece()))} in {good.store_dir} is larger than "
        f"the {PIECE_SIZE:,} bytes it may be"
    ),
    max_traced=2 << 20,  # refused by its size, never read whole (3 MiB)
)
def _(good):
    data = declared_piece()
    good.write(blob_path(sha(data)), b"L" * (3 << 20))
    good.next([*good.files(), entry("lance/long.bin", data)])


@case(
    "a-blob-that-is-a-directory",
    lambda good: (
        f"{blob_path(sha(declared_piece()))} in {good.store_dir} is not a regular file "
        "(a folder, a link, a pipe or a device): the store is damaged"
    ),
)
def _(good):
    data = declared_piece()
    (good.store_dir / blob_path(sha(data))).mkdir(parents=True)
    good.next([*good.files(), entry("lance/dir.bin", data)])


@case(
    "a-blob-with-wrong-content",
    lambda good: (
        f"lance/wrong.bin: blob {sha(declared_piece())[:12]}… from {good.store_dir} "
        "fails verification"
    ),
)
def _(good):
    data = declared_piece()
    good.write(blob_path(sha(data)), b"W" * PIECE_SIZE)  # same length, other bytes
    good.next([*good.files(), entry("lance/wrong.bin", data)])


@case("a-blob-shorter-than-its-piece", "fails verification: the store is damaged")
def _(good):
    data = declared_piece()
    good.write(blob_path(sha(data)), data[:-1])
    good.next([*good.files(), entry("lance/short.bin", data)])


@case(
    "a-whole-file-hash-that-does-not-match",
    lambda good: f"lance/whole.bin from {good.store_dir} fails verification against the manifest",
)
def _(good):
    hostile_entry(good, "lance/whole.bin", declared_piece() + b"tail", whole="1" * 64)


@case(
    "ten-thousand-files-with-missing-blobs",
    lambda good: f"{blob_path(sha(b'file 0'))} is missing from {good.store_dir}",
)
def _(good):
    many = [entry(f"lance/many/{n:05d}.bin", f"file {n}".encode()) for n in range(10_000)]
    good.next([*good.files(), *many])


@case(
    "ten-thousand-files-larger-than-the-free-disk",
    lambda good: f"bytes and {good.dest} has 1,000,000,000 free: free some space",
)
def _(good):
    # the disk: 1 GB free, as the check sees it (crafting 10,000 files that outgrow a
    # real disk would mean a manifest of hundreds of MB); the store claims 10 GB
    module = sys.modules["ghindex.snapshot.pull"]  # the package's `pull` is the function
    good.monkeypatch.setattr(module, "free_bytes", lambda path: 10**9)
    files = []
    for n in range(10_000):
        declared = entry(f"lance/big/{n:05d}.bin", b"")
        size = 10**6
        declared["size"] = size
        declared["pieces"] = [
            {"sha256": sha(b"%d-%d" % (n, i)), "size": min(PIECE_SIZE, size - i * PIECE_SIZE)}
            for i in range(-(-size // PIECE_SIZE))
        ]
        files.append(declared)
    good.next([*good.files(), *files])


# -- snapshot ids and the pointer

TRAVERSAL = "x/../../../somedir"


def plant_somedir(good: Good) -> None:
    """What `TRAVERSAL` reaches from the store and from DEST/snapshots: a folder beside
    both, which must survive (a version named by the id would be removed and replaced)."""
    (good.tmp / "somedir").mkdir()
    (good.tmp / "somedir" / "keep.txt").write_text("keep me\n")
    (good.store_dir / "snapshots" / "x").mkdir()
    (good.dest / "snapshots" / "x").mkdir()


@case("a-traversal-id-in-pointer-and-manifest", f"names an invalid snapshot id {TRAVERSAL!r}")
def _(good):
    plant_somedir(good)
    data = encode(good.body(TRAVERSAL, good.files()))
    (good.tmp / "somedir" / "manifest.json").write_bytes(data)  # where the id leads to
    good.put_pointer(TRAVERSAL, data)


@case("a-traversal-id-in-the-manifest", f"names an invalid snapshot id {TRAVERSAL!r}")
def _(good):
    plant_somedir(good)
    snapshot_id = new_snapshot_id()
    data = good.put_manifest(snapshot_id, good.body(TRAVERSAL, good.files()))
    good.put_pointer(snapshot_id, data)


@case("a-pointer-and-a-manifest-naming-different-snapshots", "says it is snapshot")
def _(good):
    pointed, claimed = new_snapshot_id(), new_snapshot_id()
    data = good.put_manifest(pointed, good.body(claimed, good.files()))
    good.put_pointer(pointed, data)


def other_prefix(good: Good, up: str) -> None:
    """A second, valid store beside this one, and a pointer into it."""
    other = good.tmp / "other"
    shutil.copytree(good.store_dir, other)
    snapshot_id = new_snapshot_id()
    data = encode(good.body(snapshot_id, good.files()))
    (other / manifest_path(snapshot_id)).parent.mkdir(parents=True)
    (other / manifest_path(snapshot_id)).write_bytes(data)
    good.put_pointer(f"{up}other/snapshots/{snapshot_id}", data)


@case("a-pointer-into-a-sub-prefix", "names an invalid snapshot id '../other/snapshots/")
def _(good):
    other_prefix(good, "../")


@case("a-pointer-into-a-sibling-prefix", "names an invalid snapshot id '../../other/snapshots/")
def _(good):
    other_prefix(good, "../../")


@case("a-manifest-that-does-not-match-the-pointer", "does not match the pointer's checksum")
def _(good):
    snapshot_id = new_snapshot_id()
    good.put_manifest(snapshot_id, good.body(snapshot_id, good.files()))
    good.put_pointer(snapshot_id, b"another manifest")


@case("a-pointer-to-a-missing-manifest", "whose manifest is missing: the store is damaged")
def _(good):
    good.put_pointer(new_snapshot_id(), b"")


@case("an-id-with-a-trailing-newline", "names an invalid snapshot id")
def _(good):
    snapshot_id = new_snapshot_id() + "\n"
    good.put_pointer(
        snapshot_id, good.put_manifest(snapshot_id, good.body(snapshot_id, good.files()))
    )


@case("an-id-in-fullwidth-digits", "names an invalid snapshot id")
def _(good):
    ascii_id = new_snapshot_id()
    snapshot_id = ascii_id[:8].translate({ord(d): ord(d) + 0xFEE0 for d in "0123456789"})
    good.next(snapshot_id=snapshot_id + ascii_id[8:])


@case(
    "a-pointer-that-is-not-json",
    lambda good: f"{ref_path(2)} in {good.store_dir} is not a ghindex pointer (",
)
def _(good):
    good.put_pointer(new_snapshot_id(), raw=b"\x00not json{")


@case("a-pointer-nested-fifty-thousand-deep", "is not a ghindex pointer")
def _(good):
    good.put_pointer(new_snapshot_id(), raw=b"[" * 50_000)


@case("a-pointer-whose-generation-is-not-its-name", "says it is generation 3")
def _(good):
    snapshot_id = new_snapshot_id()
    data = good.put_manifest(snapshot_id, good.body(snapshot_id, good.files()))
    good.put_pointer(snapshot_id, data, generation=3)


@case("a-pointer-with-an-invalid-checksum", "has an invalid sha256 'not a checksum'")
def _(good):
    snapshot_id = new_snapshot_id()
    good.put_manifest(snapshot_id, good.body(snapshot_id, good.files()))
    good.put_pointer(snapshot_id, manifest_sha256="not a checksum")


@case(
    "a-pointer-over-its-size-limit",
    lambda good: f"{ref_path(2)} in {good.store_dir} is larger than the 65,536 bytes it may be",
)
def _(good):
    snapshot_id = new_snapshot_id()
    data = good.put_manifest(snapshot_id, good.body(snapshot_id, good.files()))
    good.put_pointer(snapshot_id, data, padding="p" * 70_000)


# -- the manifest document


@case("format-version-as-a-string", "has an invalid format version '2'")
def _(good):
    good.next(format_version="2")


@case("format-version-as-a-bool", "has an invalid format version True")
def _(good):
    good.next(format_version=True)


@case("a-newer-format-version", "has format version 99, newer than this ghindex reads (2)")
def _(good):
    good.next(format_version=99)


@case("files-not-a-list", "is not a ghindex manifest (no list of files)")
def _(good):
    good.next(files={"lance/x": entry("lance/x", b"x")})


@case("no-files-at-all", "lists no state.duckdb: the store is damaged")
def _(good):
    good.next(files=[])


@case("only-an-index-no-state", "lists no state.duckdb: the store is damaged")
def _(good):
    good.next(files=[f for f in good.files() if f["path"] != "state.duckdb"])


@case("a-manifest-that-is-a-list", "is not a ghindex manifest (no list of files)")
def _(good):
    snapshot_id = new_snapshot_id()
    good.put_pointer(snapshot_id, good.put_manifest(snapshot_id, [good.old]))


@case("a-manifest-that-is-not-json", "is not a ghindex manifest (")
def _(good):
    snapshot_id = new_snapshot_id()
    good.put_pointer(snapshot_id, good.put_manifest(snapshot_id, b"\xff\xfe not json"))


@case("a-manifest-nested-a-hundred-thousand-deep", "is not a ghindex manifest")
def _(good):
    snapshot_id = new_snapshot_id()
    good.put_pointer(snapshot_id, good.put_manifest(snapshot_id, b"[" * 100_000))


@case(
    "a-manifest-over-the-real-size-limit",
    "/manifest.json in {store} is larger than the 67,108,864 bytes it may be",
)
def _(good):
    snapshot_id = new_snapshot_id()
    path = good.write(manifest_path(snapshot_id), b"")
    os.truncate(path, (64 << 20) + 1)  # sparse: cheap to make
    with open(path, "rb") as handle:
        good.put_pointer(
            snapshot_id, manifest_sha256=hashlib.file_digest(handle, "sha256").hexdigest()
        )


@case(
    "a-manifest-over-a-lowered-size-limit",
    "/manifest.json in {store} is larger than the 4,096 bytes it may be",
)
def _(good):
    good.monkeypatch.setattr("ghindex.snapshot.refs.MAX_MANIFEST_BYTES", 4096)
    good.next()  # the real manifest, about 8 KB


# ------------------------------------------------------------------------------ the checks


def expected(case: Case, good: Good) -> str:
    phrase = case.expect(good) if callable(case.expect) else case.expect
    return phrase.replace("{store}", str(good.store_dir))


@dataclass
class Before:
    outside: dict[str, str]
    dest: dict[str, str]
    version: Path
    tree: dict[str, str]


def observe(good: Good, dest: Path) -> Before:
    version = live_root(dest)
    return Before(
        outside=listing(good.tmp, skip=dest),
        dest=listing(dest, lock_text=False),
        version=version,
        tree=listing(version),
    )


def assert_unchanged(good: Good, dest: Path, before: Before) -> None:
    """Nothing outside DEST changed (canaries included), and DEST still holds the previous
    snapshot, unchanged, openable, with no staging left behind."""
    assert listing(good.tmp, skip=dest) == before.outside
    assert live_root(dest) == before.version
    assert before.version.name == good.old_id
    assert listing(before.version) == before.tree
    assert listing(dest, lock_text=False) == before.dest
    assert [p.name for p in (dest / "snapshots").iterdir() if p.name.startswith(".")] == []
    assert good.canary.read_text() == "the canary beside DEST\n"
    assert good.secret.read_text() == "the canary at an absolute path\n"
    con = duckdb.connect(str(dest / "state.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM issues").fetchone() == (ISSUES,)
    finally:
        con.close()
    assert json.loads((dest / "manifest.json").read_bytes())["snapshot_id"] == good.old_id


def assert_one_line(message: str) -> None:
    assert message and message == message.strip()
    assert len(message.splitlines()) == 1 and "\r" not in message and "\n" not in message


def test_the_corpus_is_large_and_named_uniquely():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) >= 22


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.slow
def test_a_hostile_store_is_refused_and_changes_nothing(case, good):
    case.craft(good)
    before = observe(good, good.dest)

    started = time.perf_counter()
    if case.max_traced is not None:
        tracemalloc.start()
    try:
        with pytest.raises(SnapshotError) as refused:
            pull(Store(str(good.store_dir)), good.dest)
    finally:
        if case.max_traced is not None:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    seconds = time.perf_counter() - started

    message = str(refused.value)
    assert expected(case, good) in message
    assert_one_line(message)
    assert seconds < 10, f"refused only after {seconds:.1f} s"
    if case.max_traced is not None:
        assert peak < case.max_traced, f"the pull allocated {peak:,} bytes"
    assert_unchanged(good, good.dest, before)


# ---------------------------------------------------------------------------- other surfaces


@pytest.mark.slow
def test_the_cli_refuses_a_hostile_store_in_one_line(good, run):
    hostile_entry(good, UP_TO_CANARY)
    before = observe(good, good.dest)

    result = run("pull", "--store", str(good.store_dir), "--dest", str(good.dest))

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.endswith("\n")
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: ")
    assert lines[0].endswith(f"names a file outside the snapshot: {UP_TO_CANARY!r}")
    assert "Traceback" not in result.output
    assert_unchanged(good, good.dest, before)


@pytest.mark.slow
def test_a_server_keeps_serving_when_the_store_turns_hostile(good):
    cache = good.tmp / "serve"
    holder = SnapshotHolder(store=Store(str(good.store_dir)), cache=cache, interval=300)
    try:
        assert holder.sync_once() is True
        assert holder.current.manifest["snapshot_id"] == good.old_id
        hostile_entry(good, str(good.secret))
        before = observe(good, cache)

        swapped = holder.sync_once()

        assert swapped is False
        assert holder.current.manifest["snapshot_id"] == good.old_id
        assert holder.current.root == live_root(cache) == cache / "snapshots" / good.old_id
        error = holder.sync.last_error
        assert error is not None
        assert error.endswith(outside(str(good.secret)))
        assert_one_line(error)
        assert holder.sync.syncs == 1
        with holder.use() as snapshot, snapshot.searcher.state() as con:
            assert con.execute("SELECT count(*) FROM issues").fetchone() == (ISSUES,)
        # nothing outside the cache changed; inside it, the served version is as it was
        assert listing(good.tmp, skip=cache) == before.outside
        assert listing(before.version) == before.tree
        assert [p.name for p in (cache / "snapshots").iterdir()] == [good.old_id]
    finally:
        holder.stop()
        if holder.current is not None:
            holder.current.close()
            holder.current.held.close()


# ------------------------------------------- stores cannot hang a reader (#49, family 8)


def _replace_with(path: Path, kind: str, elsewhere: Path) -> None:
    """Put something that is not a regular file where the store's object `path` was: a
    pipe (no writer: reading it would wait forever), a link to a copy of the same bytes
    outside the store, or a folder."""
    data = path.read_bytes()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        elsewhere.write_bytes(data)
        path.symlink_to(elsewhere)
    else:
        path.mkdir()
        (path / "inside").write_bytes(data)


def _unblock(path: Path) -> None:
    """Give a pipe a writer that closes at once, so a reader stuck on it gets its end."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)


@given(
    target=st.sampled_from(["pointer", "manifest", "blob"]),
    kind=st.sampled_from(["fifo", "link", "folder"]),
)
@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "9")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_only_regular_files_are_read_from_a_local_store(good, target, kind):
    """A pipe, a link or a folder in place of the pointer, the manifest or a blob never
    blocks a pull: it is refused in one line, or (a pointer the listing does not show)
    left unread; nothing in DEST changes either way."""
    state = good.files()[0]
    assert state["path"] == "state.duckdb"
    data = (live_root(good.dest) / "state.duckdb").read_bytes() + b"\0" * 7
    good.put_blobs(data)
    snapshot_id = good.next([entry("state.duckdb", data), *good.files()[1:]])
    path = {
        "pointer": good.store_dir / ref_path(2),
        "manifest": good.store_dir / manifest_path(snapshot_id),
        "blob": good.store_dir / blob_path(sha(pieces(data)[-1])),
    }[target]
    _replace_with(path, kind, good.tmp / f"elsewhere-{uuid.uuid4().hex[:8]}")
    before = listing(good.dest, lock_text=False)
    outcome: list[object] = []

    def attempt() -> None:
        try:
            outcome.append(pull(Store(str(good.store_dir)), good.dest).snapshot_id)
        except Exception as exc:  # anything but a SnapshotError fails below
            outcome.append(exc)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():
        _unblock(path)
        reader.join(timeout=30)
        pytest.fail(f"a {kind} as the {target} blocked the pull")
    try:
        [result] = outcome
        if isinstance(result, str):  # a pointer not listed: the snapshot before it
            assert (target, kind) in {("pointer", "fifo"), ("pointer", "folder")}
            assert result == good.old_id
        else:
            assert isinstance(result, SnapshotError), repr(result)
            assert_one_line(str(result))
            assert str(result).endswith(
                "is not a regular file (a folder, a link, a pipe or a device): the store is damaged"
            )
        assert listing(good.dest, lock_text=False) == before
    finally:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
