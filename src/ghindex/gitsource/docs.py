"""Docs and wiki pages: the Markdown/RST files of one commit, as rows of `docs`.

Content always comes from git objects (`git cat-file --batch`), never from the work
tree, so an uncommitted edit is never indexed. Which files count as docs, and how a
wiki file becomes a page, is decided here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import duckdb

from ghindex.errors import GitSourceError
from ghindex.gitsource.repo import (
    Git,
    Objects,
    has_commit,
    path_text,
    read_raw_change,
    tree_path,
)
from ghindex.state.rows import upsert
from ghindex.vocabulary.handles import doc_handle, wiki_handle, wiki_page_name

# Files with these extensions are docs, anywhere in the tree but under node_modules/.
DOC_EXTENSIONS = frozenset({".md", ".markdown", ".mdx", ".rst"})
# ... and so are these well-known names without an extension or with .txt.
WELL_KNOWN_NAMES = frozenset(
    {
        "README",
        "CHANGELOG",
        "CHANGES",
        "HISTORY",
        "NEWS",
        "CONTRIBUTING",
        "CODE_OF_CONDUCT",
        "SECURITY",
        "SUPPORT",
        "GOVERNANCE",
        "AUTHORS",
        "CONTRIBUTORS",
        "MAINTAINERS",
    }
)
# The markups GitHub renders as wiki pages.
WIKI_EXTENSIONS = frozenset(
    {
        ".md",
        ".markdown",
        ".mdown",
        ".mkdn",
        ".mkd",
        ".mdwn",
        ".textile",
        ".rdoc",
        ".org",
        ".creole",
        ".mediawiki",
        ".wiki",
        ".rst",
        ".asciidoc",
        ".adoc",
        ".asc",
        ".pod",
    }
)
# Larger files, and binary ones (a NUL byte, or `_binary`), are not prose: skipped.
MAX_DOC_BYTES = 1_000_000

_REGULAR_MODES = ("100644", "100755")


@dataclass
class DocsChange:
    added: int = 0
    updated: int = 0  # content changed at the same handle
    removed: int = 0
    renamed: int = 0  # a rename counts here, not as one added and one removed
    read: int = 0  # blobs read from git
    skipped: int = 0  # too large or binary

    @property
    def seen(self) -> int:
        """Documents whose content this sync stored."""
        return self.added + self.updated + self.renamed

    def report(self) -> dict[str, int]:
        """The counts as `GitReport` names them."""
        return {f"docs_{name}": value for name, value in asdict(self).items()}


@dataclass(frozen=True)
class DocKind:
    """How one kind of source maps files to rows."""

    kind: str  # doc | wiki
    surface: str  # its sync_state surface

    def handle(self, repo: str, path: str) -> str | None:
        """The handle of the file at `path`, or None if `path` is not indexed (or would
        leave the repository: `docs/../x.md` from a crafted tree)."""
        if tree_path(path.encode("utf-8", "surrogateescape")) is None:
            return None
        if self.kind == "doc":
            return doc_handle(repo, path) if is_doc_path(path) else None
        page = wiki_page(path)
        return None if page is None else wiki_handle(repo, page)

    def url(self, web_url: str, repo: str, commit: str, path: str, handle: str) -> str:
        if self.kind == "doc":
            return f"{web_url}/{repo}/blob/{commit}/{quote(path)}"
        return f"{web_url}/{repo}/wiki/{quote(wiki_page_name(handle))}"

    def title(self, text: str, path: str, handle: str) -> str:
        if self.kind == "wiki":  # GitHub titles a wiki page with its name
            return wiki_page_name(handle).replace("-", " ")
        return doc_title(text) or path.rsplit("/", 1)[-1]


DOCS = DocKind("doc", "git_docs")
WIKI = DocKind("wiki", "git_wiki")


def is_doc_path(path: str) -> bool:
    if path.startswith("node_modules/") or "/node_modules/" in path:
        return False
    name = path.rsplit("/", 1)[-1]
    stem, dot, ext = name.rpartition(".")
    if not dot:
        return name.upper() in WELL_KNOWN_NAMES
    ext = "." + ext.lower()
    return ext in DOC_EXTENSIONS or (ext == ".txt" and stem.upper() in WELL_KNOWN_NAMES)


def wiki_page(path: str) -> str | None:
    """The page name of a wiki file ('Page-Name' for 'Page-Name.md'), or None.

    Like GitHub, folders do not enter the name, and `_Sidebar`, `_Footer` and
    other files starting with '_' are not pages.
    """
    name = path.rsplit("/", 1)[-1]
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or stem.startswith("_"):
        return None
    return stem if "." + ext.lower() in WIKI_EXTENSIONS else None


_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`:._])\1+\s*$")
_H1_HTML = re.compile(r"<h1\b[^>]*>(.*?)</h1>", re.I | re.S)
_FRONT_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.M)


def doc_title(text: str) -> str | None:
    """The first heading of a Markdown or reStructuredText document, cleaned of markup."""
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":  # front matter
        end = next((i for i, ln in enumerate(lines[1:], 1) if ln.strip() in ("---", "...")), 0)
        if end:
            found = _FRONT_TITLE.search("\n".join(lines[1:end]))
            title = _clean(found.group(1).strip("'\"")) if found else ""
            if title:
                return title
            start = end + 1
    fenced = False
    for i in range(start, len(lines)):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _ATX.match(line)
        if heading and (title := _clean(heading.group(1))):
            return title
        html = _H1_HTML.search(line)
        if html and (title := _clean(html.group(1))):
            return title
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if (
            line.strip()
            and not _UNDERLINE.match(line)
            and _UNDERLINE.match(following)
            and len(following.strip()) >= min(3, len(line.strip()))
            and (title := _clean(line))
        ):
            return title
    return None


# Characters no prose holds: what bytes that are not UTF-8 decode to, and control
# characters other than whitespace. A file with more than 1 in 100 of them (at least 8)
# is binary, NUL byte or not; a Latin-1 README with a few accents is still read.
_NOT_PROSE = re.compile(r"[\ufffd\x01-\x08\x0e-\x1f\x7f]")


def _binary(text: str) -> bool:
    return len(_NOT_PROSE.findall(text)) > max(8, len(text) // 100)


def _clean(text: str) -> str:
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)  # images
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links
    text = re.sub(r"(\*{1,3}|__)(\S(?:.*?\S)?)\1", r"\2", text)  # emphasis
    text = text.replace("`", "")
    return " ".join(text.split())


def sync_docs(
    con: duckdb.DuckDBPyConnection,
    git: Git,
    objects: Objects,
    source: DocKind,
    *,
    repo: str,
    head: str,
    previous: str | None,
    mode: str,
    shallow: frozenset[str],
    web_url: str,
    now: datetime,
) -> DocsChange:
    """Bring `repo`'s rows of one kind to exactly the docs of commit `head`.

    `mode` is 'incremental' (head descends from previous: only changed files are
    read), 'unchanged', or 'initial' / 'reconcile' / 'full' (every doc is read
    again, so every row points at `head`).
    """
    change = DocsChange()
    if mode == "unchanged":
        return change
    stored = {
        handle: (path, blob)
        for handle, path, blob in con.execute(
            "SELECT handle, path, blob_sha FROM docs WHERE repo = ? AND kind = ?",
            [repo, source.kind],
        ).fetchall()
    }
    renames: list[tuple[str, str]] = []
    if mode == "incremental" and source.kind == "doc" and previous is not None:
        to_read, to_remove, renames = _diff_changes(git, source, repo, previous, head)
    else:
        wanted = _tree_docs(git, source, repo, head)
        skipped = {h for h, (_, _, size) in wanted.items() if size > MAX_DOC_BYTES}
        change.skipped += len(skipped)
        to_remove = set(stored) - (set(wanted) - skipped)
        to_read = {
            h: (path, blob)
            for h, (path, blob, _) in wanted.items()
            if h not in skipped and (mode != "incremental" or stored.get(h) != (path, blob))
        }
        if previous is not None and has_commit(git, previous):
            renames = _renames(git, source, repo, previous, head)
        else:  # no old commit to ask git: exact renames only
            gone = {stored[h][1]: h for h in to_remove}
            renames = [
                (gone[b], h) for h, (_, b) in to_read.items() if h not in stored and b in gone
            ]

    rows, unreadable = _read(objects, source, repo, head, to_read, web_url, now)
    change.read = len(to_read)
    change.skipped += len(unreadable)
    to_remove = (to_remove | unreadable) - {row["handle"] for row in rows}
    stop_at = previous if mode == "incremental" else None
    last = last_changes(git, {row["path"] for row in rows}, head, stop_at, shallow)
    for row in rows:
        row["last_commit_sha"], row["last_changed_at"] = last.get(row["path"], (None, None))

    removed = to_remove & set(stored)
    written = {row["handle"]: row["blob_sha"] for row in rows}
    added = set(written) - set(stored)
    pairs = {(old, new) for old, new in renames if old in removed and new in added}
    change.renamed = len(pairs)
    change.added = len(added) - len(pairs)
    change.removed = len(removed) - len(pairs)
    change.updated = sum(1 for h, blob in written.items() if h in stored and stored[h][1] != blob)

    if removed:
        con.execute(
            "DELETE FROM docs WHERE repo = ? AND kind = ? AND list_contains(?, handle)",
            [repo, source.kind, sorted(removed)],
        )
    upsert(con, "docs", "handle", rows)
    return change


def _tree_docs(
    git: Git, source: DocKind, repo: str, commit: str
) -> dict[str, tuple[str, str, int]]:
    """handle -> (path, blob, size) of every indexed file at `commit`."""
    found: dict[str, tuple[str, str, int]] = {}
    with git.stream("ls-tree", "-r", "-z", "-l", "--full-tree", commit) as out:
        while (entry := out.until(b"\0")) is not None:
            meta, _, raw_path = entry.partition(b"\t")
            mode, kind, blob, size = meta.split()
            if kind != b"blob" or mode.decode() not in _REGULAR_MODES:
                continue
            path = path_text(raw_path)
            handle = source.handle(repo, path)
            if handle is None:
                continue
            # Two wiki files can name the same page: the shallowest path wins, like GitHub.
            if handle in found and _page_rank(found[handle][0]) <= _page_rank(path):
                continue
            found[handle] = (path, blob.decode(), int(size))
    return found


def _page_rank(path: str) -> tuple[int, str]:
    return path.count("/"), path


def _raw_diff(git: Git, old: str, new: str) -> list[tuple[str, str | None, str, str, str]]:
    """(status letter, old path, path, new mode, new blob) of every changed file."""
    entries = []
    with git.stream("diff-tree", "-r", "-z", "-M", "--raw", old, new) as out:
        while (meta := out.until(b"\0")) is not None:
            if not meta:
                continue
            change = read_raw_change(out, meta)
            old_path, path = (
                (change.path, change.new_path)
                if change.new_path is not None
                else (None, change.path)
            )
            entries.append((change.status[0], old_path, path, change.new_mode, change.new_blob))
    return entries


def _diff_changes(
    git: Git, source: DocKind, repo: str, old: str, new: str
) -> tuple[dict[str, tuple[str, str]], set[str], list[tuple[str, str]]]:
    to_read: dict[str, tuple[str, str]] = {}
    to_remove: set[str] = set()
    renames = []
    for status, old_path, path, mode, blob in _raw_diff(git, old, new):
        if old_path is not None and (old_handle := source.handle(repo, old_path)) is not None:
            to_remove.add(old_handle)
        handle = source.handle(repo, path)
        if handle is None:
            continue
        if status == "D" or mode not in _REGULAR_MODES:
            to_remove.add(handle)
            continue
        to_read[handle] = (path, blob)
        if status == "R" and old_path is not None and (old_handle := source.handle(repo, old_path)):
            renames.append((old_handle, handle))
    return to_read, to_remove - set(to_read), renames


def _renames(git: Git, source: DocKind, repo: str, old: str, new: str) -> list[tuple[str, str]]:
    pairs = []
    for status, old_path, path, _, _ in _raw_diff(git, old, new):
        if status != "R" or old_path is None:
            continue
        old_handle, handle = source.handle(repo, old_path), source.handle(repo, path)
        if old_handle is not None and handle is not None:
            pairs.append((old_handle, handle))
    return pairs


def _read(
    objects: Objects,
    source: DocKind,
    repo: str,
    commit: str,
    to_read: dict[str, tuple[str, str]],
    web_url: str,
    now: datetime,
) -> tuple[list[dict], set[str]]:
    rows, unreadable = [], set()
    wanted = sorted(to_read.items())
    contents = objects.get_many([blob for _, (_, blob) in wanted])
    for (handle, (path, blob)), found in zip(wanted, contents, strict=True):
        if found is None:
            raise GitSourceError(
                f"blob {blob} of {path} is missing from the repository: "
                "clone without --filter, or fetch the missing objects"
            )
        data = found[1]
        text = data.decode("utf-8", "replace").removeprefix("\ufeff")
        if len(data) > MAX_DOC_BYTES or b"\0" in data or _binary(text):
            unreadable.add(handle)
            continue
        rows.append(
            {
                "handle": handle,
                "repo": repo,
                "kind": source.kind,
                "path": path,
                "title": source.title(text, path, handle),
                "body": text,
                "commit_sha": commit,
                "blob_sha": blob,
                "size": len(data),
                "last_commit_sha": None,
                "last_changed_at": None,
                "url": source.url(web_url, repo, commit, path, handle),
                "fetched_at": now,
            }
        )
    return rows, unreadable


def last_changes(
    git: Git, paths: Iterable[str], head: str, stop_at: str | None, shallow: frozenset[str]
) -> dict[str, tuple[str, datetime]]:
    """path -> (sha, committed time) of the newest non-merge commit that touched it.

    Walks `git log` from `head` (down to `stop_at` when given) and stops as soon as
    every path is found. A shallow clone's boundary commits are not trusted: git
    sees every file there as added.
    """
    wanted = set(paths)
    found: dict[str, tuple[str, datetime]] = {}
    if not wanted:
        return found
    revs = [head, f"^{stop_at}"] if stop_at else [head]
    args = ("log", "-z", "--no-merges", "--no-renames", "--name-only", "--format=%x01%H %ct")
    with git.stream(*args, *revs, "--") as out:
        current: tuple[str, datetime] | None = None
        while (token := out.until(b"\0")) is not None:
            if token.startswith(b"\x01"):
                sha, seconds = token[1:].decode().split()
                current = (
                    None if sha in shallow else (sha, datetime.fromtimestamp(int(seconds), UTC))
                )
                continue
            path = path_text(token.removeprefix(b"\n"))
            if current is not None and path in wanted and path not in found:
                found[path] = current
                if len(found) == len(wanted):
                    break
    return found
