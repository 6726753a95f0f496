"""`ghindex demo`: the whole pipeline on bundled, real GitHub data, offline.

The sample (`ghindex/sample/github3py.jsonl`) holds GitHub API responses recorded
by the github3.py project, converted into exactly the nodes ghindex's GraphQL
queries return (see `examples/sample/`). The demo stores them with the same code
`ghindex fetch` uses, builds the index with the real embedding model, and runs a
few searches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ghindex.config import Settings
from ghindex.index.build import BuildReport, build
from ghindex.progress import Progress
from ghindex.query.search import Filters, Searcher, SearchResponse
from ghindex.state import cursors, items, redact, redaction
from ghindex.state.database import open_state, transaction
from ghindex.state.rows import newest_update

# (query, filters, mode): what a maintainer of these projects might look for.
QUERIES: list[tuple[str, Filters, str]] = [
    ("hide API tokens and passwords in recorded cassettes", Filters(), "hybrid"),
    ("gzip compressed response body is corrupted", Filters(states=("closed",)), "hybrid"),
    ("make it safe to use from several threads", Filters(states=("open",)), "hybrid"),
    ("two factor authentication", Filters(repos=("sigmavirus24/github3.py",)), "sparse"),
]


# sync_state surface -> key of the sample record
SURFACES = (
    ("issues", "issues"),
    ("pull_requests", "pullRequests"),
    ("discussions", "discussions"),
    ("releases", "releases"),
)


@dataclass
class DemoReport:
    workdir: str
    repos: int
    issues: int
    pull_requests: int
    build: BuildReport
    searches: list[SearchResponse] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "workdir": self.workdir,
            "repos": self.repos,
            "issues": self.issues,
            "pull_requests": self.pull_requests,
            "build": self.build.as_dict(),
            "searches": [s.as_dict() for s in self.searches],
        }


def sample_records() -> Iterator[dict[str, Any]]:
    """One record per repository: its node and its issue and pull request nodes."""
    text = (resources.files("ghindex") / "sample" / "github3py.jsonl").read_text("utf-8")
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def load_sample(settings: Settings) -> tuple[int, int, int]:
    """Store the sample as a fetch would; returns (repos, issues, pull requests)."""
    con = open_state(settings.state_path)
    repos = issues = pulls = 0
    try:
        with redact.tally(settings.redact):  # as a fetch stores GitHub's text
            for record in sample_records():
                with transaction(con):
                    repo = items.save_repository(con, record["repository"])
                    issues += items.save_issues(con, repo, record["issues"])
                    pulls += items.save_pull_requests(con, repo, record["pullRequests"])
                    items.save_discussions(con, repo, record.get("discussions", []))
                    items.replace_releases(con, repo, record.get("releases", []))
                    for surface, key in SURFACES:
                        nodes = record.get(key, [])
                        mark = newest_update(nodes)
                        cursors.set_high_water_mark(con, repo, surface, mark, len(nodes))
                repos += 1
        with transaction(con):  # its text went through the rules a fetch applies
            redaction.record(con, "github", settings.redact)
    finally:
        con.close()
    return repos, issues, pulls


def run_demo(settings: Settings, progress: Progress | None = None) -> DemoReport:
    progress = progress or Progress()
    say = progress.note
    say("loading the bundled sample")
    repos, issues, pulls = load_sample(settings)
    report = build(settings, progress=progress)
    demo = DemoReport(str(settings.workdir), repos, issues, pulls, report)
    searcher = Searcher(settings.lance_path)
    for query, filters, mode in QUERIES:
        say(f"searching: {query}")
        demo.searches.append(searcher.search(query, filters=filters, k=3, mode=mode))
    return demo
