"""The tables and views of the state database (`state.duckdb`).

The migrations (`ghindex/state/migrations/*.sql`) create them and docs/schema.md
describes them; a test keeps these names equal to what a fresh database holds.
"""

from __future__ import annotations

# In the order the migrations create them.
TABLES = (
    "repos",
    "issues",
    "pull_requests",
    "labels",
    "issue_labels",
    "assignees",
    "milestones",
    "sync_state",
    "runs",
    "comments",
    "reviews",
    "review_comments",
    "releases",
    "discussions",
    "edges",
    "docs",
    "commits",
    "commit_files",
    "fetch_gaps",
    "ghindex_meta",
)

VIEWS = (
    "issue_response_times",
    "pr_review_times",
    "open_prs_awaiting_review",
    "stale_issues",
    "weekly_activity",
    "label_distribution",
    "top_commenters",
    "top_reviewers",
    "issues_closed_by",
)

# The log of applied migrations (ghindex.state.database): not data, never exported.
MIGRATION_LOG = "schema_migrations"
