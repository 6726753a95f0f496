"""docs/schema.md, generated from the migrations, so the reference cannot drift.

Every table, column and view is read from `state/migrations/*.sql`: a table's
description is the comment block above its CREATE statement, a column's meaning
the `--` comment on its line; a view's columns are what DuckDB describes once every
migration has run. Edge kinds and their meanings come from
`ghindex.vocabulary.edges`, strongest first.

    python -m ghindex.analysis.schema_doc > docs/schema.md
"""

from __future__ import annotations

import re

from ghindex.state.database import migrations
from ghindex.vocabulary import edges

# Meanings of columns that recur in many tables; a comment in the DDL overrides them.
COMMON = {
    "handle": "the item's durable handle (see the contract's handle table)",
    "repo": "the repository, 'owner/name'",
    "number": "the issue, pull request or discussion number",
    "node_id": "GitHub's global node id",
    "database_id": "GitHub's numeric id (the one in URLs)",
    "title": "title as on GitHub",
    "body": "the text as written, Markdown",
    "url": "the page on GitHub",
    "author": "login of the author; NULL for a deleted account",
    "author_type": "User, Bot, Organization, Mannequin or EnterpriseUserAccount",
    "author_association": "the author's relation to the repository: OWNER, MEMBER, "
    "COLLABORATOR, CONTRIBUTOR, FIRST_TIME_CONTRIBUTOR, FIRST_TIMER or NONE",
    "parent_handle": "handle of the issue, pull request or discussion it belongs to",
    "created_at": "when it was created",
    "updated_at": "when GitHub last saw it change",
    "closed_at": "when it was closed; NULL while open",
    "fetched_at": "when ghindex last stored it",
    "locked": "conversation locked",
    "reactions_count": "number of reactions (not fetched for comments: see docs/fetching.md)",
    "comments_count": "number of comments GitHub reports",
    "milestone_number": "number of its milestone",
    "owner": "the owning user or organisation",
    "name": "the repository's name",
    "description": "the repository's description",
    "default_branch": "the default branch",
    "is_private": "private repository",
    "is_archived": "archived repository",
    "is_fork": "a fork",
    "pushed_at": "last push",
    "color": "label colour, hex",
    "label": "label name",
    "login": "a user's login",
    "due_on": "milestone due date",
    "sha": "full commit sha",
    "path": "file path in the repository",
    "merged_at": "when it was merged",
    "is_draft": "a draft",
    "merged": "merged into its base",
    "additions": "lines added",
    "deletions": "lines removed",
    "changed_files": "files changed",
    "status": "ok or failed",
    "error": "the one-line error of a failed run",
    "stats": "counts and client figures of the run, JSON",
    "started_at": "when the run started",
    "finished_at": "when the run ended",
    "command": "fetch, build or demo",
    "repos": "repositories the run covered",
    "run_id": "a unique id per run",
    "ghindex_version": "version of ghindex that ran",
    "items_seen": "items stored under this cursor, summed over runs",
    "high_water_mark": "newest updatedAt whose items are all stored",
    "cursor": "a git sha for git sources, else unused",
    "requests": "HTTP requests the run sent",
    "published_at": "when the release was published",
    "tag": "the release's git tag",
    "size": "bytes",
    "milestone": "title of its milestone",
    "base_ref": "branch the pull request merges into",
    "head_ref": "branch the pull request comes from",
    "is_minimized": "hidden on GitHub (spam, off-topic, outdated, resolved)",
    "commit_oid": "sha of the commit the review or comment was made on",
    "submitted_at": "when the review was submitted",
    "line": "line of the file the comment is on (NULL when the line is gone)",
    "original_line": "line when the comment was written",
    "start_line": "first line of a multi-line comment",
    "diff_hunk": "the diff hunk the comment points at",
    "original_commit_oid": "sha of the commit the comment was first written on",
    "resolved_by": "login who resolved the thread",
    "is_prerelease": "marked as a pre-release",
    "is_latest": "GitHub's latest release",
    "category": "discussion category",
    "answer_chosen_at": "when the answer was chosen",
    "answer_chosen_by": "login who chose the answer",
    "upvote_count": "upvotes",
    "src": "handle the link goes from",
    "dst": "handle the link goes to (may be in a repository that is not indexed)",
    "kind": "edge kind: see the table at the end of this page",
    "author_name": "commit author's name (no e-mail is stored)",
    "committer_name": "committer's name",
    "committer_login": "committer's login, from a GitHub noreply address",
    "authored_at": "when the commit was authored",
    "committed_at": "when the commit was committed",
    "is_binary": "a binary file: no patch",
}

# Meanings of the views' own columns (their SQL carries none: applied migrations are
# never edited, so they live here); a view column also named in COMMON means that.
VIEW_COLUMNS = {
    "state": "OPEN or CLOSED (pull requests also MERGED), as GitHub says",
    "first_response_at": "the first comment by someone other than the author (no bots)",
    "hours_to_first_response": "hours from opening to that comment, two decimals; NULL "
    "until it happens",
    "hours_to_close": "hours from opening to closing; NULL while open",
    "first_review_at": "the first submitted review by someone other than the author",
    "hours_to_first_review": "hours from opening to that review; NULL until it happens",
    "hours_to_merge": "hours from opening to merging; NULL unless merged",
    "days_waiting": "days since the pull request was opened, one decimal",
    "days_idle": "days since GitHub last saw the issue change, one decimal",
    "week": "the ISO week, as its Monday",
    "issues_opened": "issues opened that week",
    "issues_closed": "issues closed that week",
    "prs_opened": "pull requests opened that week",
    "prs_merged": "pull requests merged that week",
    "comments": "comments written (per week in `weekly_activity`, in all in `top_commenters`)",
    "open_issues": "open issues carrying the label",
    "closed_issues": "closed issues carrying the label",
    "open_prs": "open pull requests carrying the label",
    "closed_prs": "closed or merged pull requests carrying the label",
    "total": "issues and pull requests carrying the label",
    "threads": "distinct issues, pull requests and discussions commented on",
    "first_comment": "when the first of those comments was written",
    "last_comment": "when the last of those comments was written",
    "reviews": "reviews submitted",
    "pull_requests": "distinct pull requests reviewed",
    "approvals": "reviews that approved",
    "changes_requested": "reviews that requested changes",
    "comments_only": "reviews that only commented",
    "issue": "handle of the closed issue",
    "issue_title": "the issue's title",
    "issue_state": "the issue's state",
    "closed_by": "handle of the pull request or commit that closed it",
    "closer_type": "pull_request or commit",
    "closer_title": "the pull request's title (NULL for a commit)",
}

_CREATE = re.compile(r"CREATE (TABLE|VIEW) (\w+)")
_ALTER = re.compile(
    r"ALTER TABLE (\w+) ADD COLUMN (\w+) ([A-Z\[\]]+(?: [A-Z]+)*);(?:\s*--\s*(.*))?"
)
_COLUMN = re.compile(
    r"^\s+(\w+)\s+([A-Z][A-Z0-9_\[\]]*(?:\s+WITH TIME ZONE)?)[^-]*?(?:--\s*(.*))?$"
)
_SKIP = {"PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT"}


def relations() -> list[dict]:
    """Tables and views in creation order, with descriptions and columns."""
    found: dict[str, dict] = {}
    for name, sql in migrations():
        comments: list[str] = []
        lines = sql.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            if line.startswith("--"):
                comments.append(line.lstrip("- ").rstrip())
                index += 1
                continue
            alter = _ALTER.match(line.strip())
            created = _CREATE.match(line.strip())
            if alter:
                table, column, kind, meaning = alter.groups()
                found[table]["columns"].append((column, kind, (meaning or "").strip(), name))
            elif created:
                kind, relation = created.groups()
                entry = {
                    "name": relation,
                    "kind": kind.lower(),
                    "migration": name,
                    "about": " ".join(c for c in comments if c),
                    "columns": [],
                }
                found[relation] = entry
                if kind == "TABLE":
                    index += 1
                    while index < len(lines) and not lines[index].startswith(")"):
                        column = _COLUMN.match(lines[index])
                        if column and column.group(1).upper() not in _SKIP:
                            meaning = (column.group(3) or "").strip()
                            entry["columns"].append(
                                (column.group(1), column.group(2), meaning, name)
                            )
                        index += 1
            if not line.startswith("--"):  # a description sits right above its statement
                comments = []
            index += 1
    return list(found.values())


def view_columns() -> dict[str, list[tuple[str, str]]]:
    """Each view's columns and types, as DuckDB describes them once every migration has
    run (in memory)."""
    import duckdb

    con = duckdb.connect()
    try:
        for _name, sql in migrations():
            con.execute(sql)
        names = [
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        ]
        return {
            name: [(c[0], c[1]) for c in con.execute(f'DESCRIBE "{name}"').fetchall()]
            for name in names
        }
    finally:
        con.close()


def render() -> str:
    out = [
        "# The state database",
        "",
        "Generated from `src/ghindex/state/migrations/` by",
        "`python -m ghindex.analysis.schema_doc`; a test keeps this page equal to its output.",
        "Every entity row has `handle` and `repo` ('owner/name'); times are `TIMESTAMPTZ`",
        "(UTC). Open it with `duckdb -readonly state.duckdb` or `ghindex sql`; docs/analysis.md",
        "has examples.",
        "",
        "## Tables",
        "",
    ]
    views = []
    for relation in relations():
        if relation["kind"] == "view":
            views.append(relation)
            continue
        out += [f"### `{relation['name']}`", "", relation["about"] or "", ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        for column, kind, meaning, _ in relation["columns"]:
            meaning = meaning or COMMON.get(column, "")
            out.append(f"| `{column}` | {kind} | {meaning.replace('|', '/')} |")
        out.append("")
    out += ["## Views", "", "Each view is plain SQL over the tables; `SELECT * FROM` it.", ""]
    described = view_columns()
    for view in views:
        out += [f"### `{view['name']}`", "", view["about"], ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        for column, kind in described[view["name"]]:
            meaning = VIEW_COLUMNS.get(column) or COMMON.get(column, "")
            out.append(f"| `{column}` | {kind} | {meaning.replace('|', '/')} |")
        out.append("")
    out += [
        "## Edge kinds",
        "",
        "`edges.kind` takes these values, strongest first:",
        "",
        "| kind | meaning |",
        "|---|---|",
    ]
    out += [f"| `{kind}` | {meaning} |" for kind, meaning in edges.MEANINGS.items()]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
