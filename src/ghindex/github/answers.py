"""Reading GitHub's error answers: the type and path of each error it attaches to
`data`, an `Answer` holding both for a caller that can use part of it, and the one-line
messages built from them (a refusal's names the permission to grant).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from ghindex.errors import AnswerError, GitHubError, RepoNotFound

_TRANSIENT_GRAPHQL = "something went wrong while executing your query"

# The workflow permission (`permissions:` in a workflow, or a GitHub App's) each query
# needs when the token is a GITHUB_TOKEN or an app token: named in refusals.
PERMISSIONS = {
    "repository": "metadata: read",
    "owner_repositories": "metadata: read",
    "issues": "issues: read",
    "issue_comments": "issues: read",
    "timeline_items": "issues: read",
    "pull_requests": "pull-requests: read",
    "pull_request_reviews": "pull-requests: read",
    "pull_request_commits": "pull-requests: read",
    "review_threads": "pull-requests: read",
    "review_thread_comments": "pull-requests: read",
    "closing_references": "pull-requests: read",
    "discussions": "discussions: read",
    "discussion_comments": "discussions: read",
    "discussion_replies": "discussions: read",
    "releases": "contents: read",
}
NOT_ACCESSIBLE = "resource not accessible by"


def error_type(error: dict[str, Any]) -> str | None:
    """GitHub's error type (NOT_FOUND, FORBIDDEN, ...): top level, or in `extensions`."""
    extensions = error.get("extensions")
    kind = error.get("type") or (extensions.get("type") if isinstance(extensions, dict) else None)
    return kind if isinstance(kind, str) else None


def error_path(error: dict[str, Any]) -> list[str | int]:
    """Where an error points in `data`: a list of names and indices, [] when it says
    nothing usable (GitHub's answers are checked, not trusted)."""
    path = error.get("path")
    if isinstance(path, list) and all(isinstance(p, (str, int)) for p in path):
        return path
    return []


def describe_error(error: dict[str, Any] | None) -> str:
    """One error GitHub attached to part of an answer, as a short reason for `runs`
    and summaries: "FORBIDDEN at repository.issues.nodes.3.comments: <message>"."""
    if error is None:
        return "GitHub answered null without saying why"
    path = error_path(error)
    where = f" at {'.'.join(str(p) for p in path)}" if path else ""
    message = " ".join(str(error.get("message") or "no message").split())[:200]
    return f"{error_type(error) or 'error'}{where}: {message}"


def permission_hint(name: str, message: str = "") -> str:
    """What to grant so that query `name` is allowed, for a refusal's message. GitHub
    says who was refused: "...by integration" is a workflow's GITHUB_TOKEN or an app,
    "...by personal access token" a fine-grained token."""
    needed = PERMISSIONS.get(name, "metadata: read")
    kind, _, _level = needed.partition(": ")
    if "personal access token" in message.lower():
        title = kind.replace("-", " ").capitalize()
        return f"give the fine-grained token the repository permission {title}: Read-only"
    return (
        f"add `permissions: {needed}` to the workflow (or the app's {kind} permission), "
        "or use a token that can read the repository"
    )


@dataclass(frozen=True)
class Answer:
    """`data` together with the errors GitHub attached to parts of it (each has a `path`)."""

    data: dict[str, Any]
    errors: list[dict[str, Any]]
    operation: str = ""
    variables: dict[str, Any] = field(default_factory=dict)  # as sent, page size included

    def failure(self, errors: list[dict[str, Any]] | None = None) -> GitHubError:
        """The one-line error for `errors` (default: all of them), for a caller that
        cannot use this answer after all."""
        return query_error(errors or self.errors, self.data, self.variables, self.operation)


def query_error(
    errors: list[dict[str, Any]], data: Any, variables: dict[str, Any], operation: str
) -> GitHubError:
    """The one-line error for a query GitHub answered with `errors`: RepoNotFound for the
    repository itself, else an AnswerError (what the query asked for failed)."""
    first = errors[0]
    kind = error_type(first)
    path = error_path(first)
    message = one_line(first.get("message") or "unknown error")
    if kind == "NOT_FOUND" and path[:1] == ["repository"]:
        repo = f"{variables.get('owner')}/{variables.get('name')}"
        return RepoNotFound(
            f"repository {repo} not found, or the token cannot read it: "
            "check the name and the token's access"
        )
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    if data is not None:
        where = f" at {'.'.join(str(p) for p in path)}" if path else ""
        return AnswerError(
            f"GitHub answered {operation} with partial data and an error{where}: {message}{more}"
        )
    return AnswerError(f"GitHub answered with a GraphQL error: {message}{more}")


def response_message(response: requests.Response) -> str:
    """GitHub's `message` from an error body, else the start of the body."""
    body = json_or_none(response)
    if body and isinstance(body.get("message"), str):
        return one_line(body["message"])
    return snippet(response.text) or response.reason or "no body"


def json_or_none(response: requests.Response) -> dict[str, Any] | None:
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def errors_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    errors = body.get("errors")
    return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def is_timeout(error: dict[str, Any]) -> bool:
    """GitHub's execution timeout: "Something went wrong while executing your query..."."""
    return str(error.get("message", "")).lower().startswith(_TRANSIENT_GRAPHQL)


def snippet(text: str) -> str:
    return one_line(text)[:100]


def one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text[:300]


# Code points no UTF-8 text can hold: the halves of a surrogate pair, alone. GitHub's
# JSON carries them escaped (`\ud83d`) where an emoji was cut in two.
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def valid_text(value: Any) -> tuple[Any, int]:
    """`value` (parsed JSON) with every string made valid Unicode (each lone surrogate
    becomes U+FFFD), and how many strings needed it."""
    if isinstance(value, str):
        if _LONE_SURROGATE.search(value) is None:
            return value, 0
        return _LONE_SURROGATE.sub("\ufffd", value), 1
    if isinstance(value, list):
        repaired = 0
        for i, item in enumerate(value):
            value[i], n = valid_text(item)
            repaired += n
        return value, repaired
    if isinstance(value, dict):
        repaired = 0
        for key in list(value):
            fixed_key, n = valid_text(key)
            item, m = valid_text(value.pop(key))
            value[fixed_key] = item
            repaired += n + m
        return value, repaired
    return value, 0


def redirected(shown: str, url: str, location: str) -> str:
    """The refusal of a redirect: ghindex posts its token to the URL it was given only."""
    target = urljoin(url, location)
    host, there = urlsplit(url).netloc, urlsplit(target).netloc
    if there and there != host:
        return (
            f"{shown} redirected the request to another host ({there[:100]}): not followed, "
            "the token goes only to GHINDEX_GRAPHQL_URL; check that URL"
        )
    return (
        f"{shown} redirected the request to {urlsplit(target).path[:100] or '/'}: not "
        "followed; set GHINDEX_GRAPHQL_URL to the address it names"
    )


def json_answer(response: requests.Response, shown: str) -> tuple[dict[str, Any], int]:
    """The JSON object a 2xx answer holds, its text made valid (`valid_text`), and how
    many strings that took; a body that is not one is an error."""
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise GitHubError(
            f"{shown} answered with a malformed body (not JSON): {snippet(response.text)}"
        )
    return valid_text(body)
