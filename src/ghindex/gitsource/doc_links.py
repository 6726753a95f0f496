"""Links written in docs and wiki pages, as rows of `edges`.

A doc (`docs` kind `doc`) links to another doc of its repository with

- Markdown links and images, `[text](guide/install.md#linux)`, `![x](../img.md)`;
- reference-style definitions, `[install]: guide/install.md`;
- HTML, `<a href="guide/install.md">`;
- reStructuredText, `` `Install <guide/install.rst>`_ ``, `.. _install: guide/install.rst`
  and Sphinx's `` :doc:`guide/install` `` (extension optional);
- any of those holding a github.com URL of the same repository
  (`https://github.com/owner/repo/blob/main/guide/install.md`, `/tree/`, `/raw/`), or of
  its wiki (`https://github.com/owner/repo/wiki/Page`).

Relative paths resolve against the doc's folder, a leading `/` against the repository's
root; anchors and query strings are dropped, `%20` is decoded, and a link to a folder
means the folder's README. A path that leaves the repository, or names no doc, is no link.

A wiki page (`docs` kind `wiki`) links to another page with `[[Page Name]]`,
`[[text|Page-Name]]` and Markdown links by page name (`[text](Page-Name)`), matched
case-insensitively with spaces as hyphens, as GitHub does.

Both kinds of doc mention issues and pull requests the way bodies do
(`ghindex.state.mentions.mentioned_handles`): those are `mentions` links.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote

import duckdb

from ghindex.gitsource.docs import wiki_page
from ghindex.state.mentions import mentioned_handles
from ghindex.state.rows import Row, insert, now
from ghindex.vocabulary.edges import check_kind
from ghindex.vocabulary.handles import wiki_page_name

SOURCE_FIELDS = ("doc", "wiki")

_MD_INLINE = re.compile(r"\]\(\s*(<[^>\n]*>|[^\s)]+)")
_MD_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)", re.M)
_HTML_HREF = re.compile(r"<a\s[^>]*?\bhref\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.I)
_RST_LINK = re.compile(r"`[^`<\n]*<([^>`\n]+)>`__?")
_RST_TARGET = re.compile(r"^[ \t]*\.\. _[^:\n]+:[ \t]+(\S+)[ \t]*$", re.M)
_RST_DOC = re.compile(r":doc:`(?:[^`<\n]*<([^>`\n]+)>|([^`<\n]+))`")
_WIKI_LINK = re.compile(r"\[\[([^\]\n]+)\]\]")
_ANCHOR_TARGET = re.compile(r"\]\(\s*#[^)\s]*\s*\)")  # [1. Intro](#1-intro) is no mention of #1
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)")
_RST_LITERAL = re.compile(r"``[^`\n]+``")
_GITHUB = re.compile(
    r"^(?:https?://(?:www\.)?github\.com)?/([^/\s]+)/([^/\s]+)/(blob|tree|raw|wiki)(?:/(.*))?$",
    re.I,
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")
_SPHINX_SUFFIXES = (".rst", ".md", ".txt")


@dataclass
class _Repo:
    """The docs and wiki pages of one repository, by how links name them."""

    docs: dict[str, str] = field(default_factory=dict)  # path -> handle
    readmes: dict[str, str] = field(default_factory=dict)  # folder ('' for the root) -> handle
    pages: dict[str, str] = field(default_factory=dict)  # lowercased page name -> handle

    def doc_at(self, path: str) -> str | None:
        return self.docs.get(path) or self.readmes.get(path)

    def page(self, name: str) -> str | None:
        return self.pages.get(name.strip().replace(" ", "-").lower())


@dataclass(frozen=True)
class _Doc:
    handle: str
    repo: str
    kind: str  # doc | wiki
    path: str
    body: str


def doc_links(con: duckdb.DuckDBPyConnection, repo: str | None = None) -> list[Row]:
    """The `links_to` and `mentions` edges of every doc and wiki page (of `repo`, if given),
    ordered by doc, then by where the link first appears."""
    docs = _read_docs(con, repo)
    repos: dict[str, _Repo] = {}
    for doc in docs:  # links stay inside a repository
        _index(repos.setdefault(doc.repo, _Repo()), doc)
    fetched_at = now()
    rows: list[Row] = []
    for doc in docs:
        seen: set[tuple[str, str]] = set()
        for dst, kind in _links(doc, repos[doc.repo]):
            if dst != doc.handle and (dst, kind) not in seen:
                seen.add((dst, kind))
                rows.append(
                    {
                        "src": doc.handle,
                        "dst": dst,
                        "kind": check_kind(kind),
                        "source_handle": doc.handle,
                        "source_field": doc.kind,
                        "repo": doc.repo,
                        "created_at": None,
                        "fetched_at": fetched_at,
                    }
                )
    return rows


def replace_doc_links(con: duckdb.DuckDBPyConnection, repo: str | None = None) -> int:
    """Replace the edges docs hold (source_field 'doc' or 'wiki', of `repo` if given) with
    the links the docs hold now; returns how many there are. Callers wrap it in a
    transaction (`store.state.transaction`) together with the docs it reads."""
    rows = doc_links(con, repo)
    if repo is None:
        con.execute("DELETE FROM edges WHERE list_contains(?, source_field)", [list(SOURCE_FIELDS)])
    else:
        con.execute(
            "DELETE FROM edges WHERE list_contains(?, source_field) AND repo = ?",
            [list(SOURCE_FIELDS), repo],
        )
    insert(con, "edges", rows)
    return len(rows)


def _read_docs(con: duckdb.DuckDBPyConnection, repo: str | None) -> list[_Doc]:
    sql = "SELECT handle, repo, kind, path, body FROM docs"
    params: list[object] = []
    if repo is not None:
        sql += " WHERE repo = ?"
        params.append(repo)
    return [_Doc(*row) for row in con.execute(f"{sql} ORDER BY handle", params).fetchall()]


def _index(repo: _Repo, doc: _Doc) -> None:
    if doc.kind == "wiki":
        repo.pages.setdefault(wiki_page_name(doc.handle).lower(), doc.handle)
        return
    repo.docs[doc.path] = doc.handle
    folder, _, name = doc.path.rpartition("/")
    # a folder's README.md wins over its README.rst or README, as on GitHub
    is_readme = name.split(".", 1)[0].upper() == "README"
    if is_readme and (folder not in repo.readmes or name.lower().endswith(".md")):
        repo.readmes[folder] = doc.handle


def _links(doc: _Doc, repo: _Repo) -> Iterator[tuple[str, str]]:
    """(handle, kind) of every link in the doc, in order of appearance, repeats included."""
    rst = doc.path.lower().endswith(".rst")
    text = _without_code(doc.body, rst)
    targets: list[tuple[int, str, str]] = []  # (offset, form, target)
    for pattern, form in (
        (_MD_INLINE, "url"),
        (_MD_REFERENCE, "url"),
        (_HTML_HREF, "url"),
        (_RST_LINK, "url"),
        (_RST_TARGET, "url"),
        (_RST_DOC, "sphinx"),
    ):
        for match in pattern.finditer(text):
            target = next(g for g in (*match.groups(), "") if g is not None)
            targets.append((match.start(), form, target))
    if doc.kind == "wiki":
        for match in _WIKI_LINK.finditer(text):
            targets.append((match.start(), "page", match.group(1).rsplit("|", 1)[-1]))
    for _, form, target in sorted(targets, key=lambda t: t[0]):
        dst = _resolve(doc, repo, form, target)
        if dst:
            yield dst, "links_to"
    for handle in mentioned_handles(_ANCHOR_TARGET.sub("]()", doc.body), doc.repo):
        yield handle, "mentions"


def _resolve(doc: _Doc, repo: _Repo, form: str, target: str) -> str | None:
    target = target.strip().removeprefix("<").removesuffix(">").strip()
    if form == "page":
        return repo.page(_strip_anchor(target))
    github = _GITHUB.match(target)
    if github and (found := _resolve_github(doc, repo, github)):
        return found
    if github and not target.startswith("/"):
        return None  # another repository, or nothing of this one
    if not target or _SCHEME.match(target):
        return None
    path = unquote(_strip_anchor(target))
    if not path:
        return None  # an anchor in the same doc
    if doc.kind == "wiki":
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return repo.page(wiki_page(name) or name)  # 'Page-Name' or 'Page-Name.md'
    base = "" if path.startswith("/") else posixpath.dirname(doc.path)
    joined = _normalise(posixpath.join(base, path.lstrip("/")))
    if joined is None:
        return None
    if form == "sphinx":  # a document name: the extension is usually left out
        named = (repo.docs[joined + s] for s in _SPHINX_SUFFIXES if joined + s in repo.docs)
        return next(named, None) or repo.doc_at(joined)
    return repo.doc_at(joined)


def _resolve_github(doc: _Doc, repo: _Repo, match: re.Match[str]) -> str | None:
    owner, name, section, rest = match.groups()
    if f"{owner}/{name}".lower() != doc.repo.lower():
        return None
    rest = unquote(_strip_anchor(rest or ""))
    if section.lower() == "wiki":
        return repo.page(rest.split("/", 1)[0] or "Home")
    # blob/<ref>/<path>: a ref may hold slashes (feature/x), so try the shortest ref first
    parts = rest.strip("/").split("/")
    for cut in range(1, len(parts) + 1):
        path = _normalise("/".join(parts[cut:]))
        if path is not None and (found := repo.doc_at(path)):
            return found
    return None


def _normalise(path: str) -> str | None:
    """A path inside the repository ('' for its root), or None when it leaves it."""
    normal = posixpath.normpath(path) if path else "."
    if normal == ".":
        return ""
    if normal == ".." or normal.startswith("../"):
        return None
    return normal


def _strip_anchor(target: str) -> str:
    return re.split(r"[#?]", target, maxsplit=1)[0]


def _without_code(text: str, rst: bool) -> str:
    """The text with code blocks and code spans blanked, so links in code are no links."""
    if rst:
        return _RST_LITERAL.sub(" ", text)
    lines = []
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            lines.append("")
        elif fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            lines.append("")
        else:
            lines.append(_MD_CODE_SPAN.sub(" ", line))
    return "\n".join(lines)
