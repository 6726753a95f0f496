"""The GraphQL client: GitHub's API (or any server speaking its schema) over HTTP.

Query documents live in `fetch/queries/*.graphql`; `execute("issues", ...)` runs
`issues.graphql`. Every failure becomes a `GitHubError` whose message names the
cause: a bad token, a repository that cannot be seen, GraphQL `errors`, or an
HTTP failure that survived the transport's retries.
"""

from __future__ import annotations

import logging
import os
from functools import cache
from importlib import resources
from typing import Any

from gql import Client, GraphQLRequest, gql
from gql.transport.exceptions import (
    TransportError,
    TransportQueryError,
    TransportServerError,
)
from gql.transport.requests import RequestsHTTPTransport
from graphql import DocumentNode

from ghindex import __version__
from ghindex.errors import ConfigError, GitHubError, RepoNotFound

log = logging.getLogger(__name__)

# HTTP statuses worth retrying; GitHub answers 502 on slow queries now and then.
_RETRY_STATUSES = (429, 500, 502, 503, 504)


@cache
def query_document(name: str) -> DocumentNode:
    """The parsed query `fetch/queries/<name>.graphql`."""
    text = (resources.files("ghindex.fetch") / "queries" / f"{name}.graphql").read_text("utf-8")
    return gql(text).document


class GraphQLClient:
    """Runs ghindex's query documents against one endpoint with one token."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"GHINDEX_GRAPHQL_URL is not an http(s) URL: {url!r}")
        self.url = url
        retries = _int_env("GHINDEX_HTTP_RETRIES", 3)
        self._transport = RequestsHTTPTransport(
            url=url,
            headers={
                "Authorization": f"bearer {token}",
                "User-Agent": f"ghindex/{__version__}",
            },
            timeout=int(timeout),
            retries=retries,
            retry_backoff_factor=1.0,
            retry_status_forcelist=_RETRY_STATUSES,
        )
        self._client = Client(transport=self._transport, execute_timeout=timeout)
        self._session = self._client.connect_sync()
        self.requests = 0
        self.last_rate_limit: dict[str, Any] | None = None

    def execute(self, name: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Run query `name` and return its `data`; raise GitHubError on any failure."""
        request = GraphQLRequest(query_document(name), variable_values=variables)
        self.requests += 1
        try:
            data = self._session.execute(request)
        except TransportQueryError as exc:
            raise _query_error(exc, variables) from None
        except TransportServerError as exc:
            raise _http_error(exc.code, self.url) from None
        except TransportError as exc:
            raise GitHubError(f"GraphQL request to {self.url} failed: {_one_line(exc)}") from None
        except OSError as exc:  # connection refused, DNS, TLS
            raise GitHubError(f"cannot reach {self.url}: {_one_line(exc)}") from None
        self.last_rate_limit = data.get("rateLimit") or self.last_rate_limit
        return data

    def close(self) -> None:
        self._client.close_sync()

    def __enter__(self) -> GraphQLClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _query_error(exc: TransportQueryError, variables: dict[str, Any]) -> GitHubError:
    errors = exc.errors or [{"message": str(exc)}]
    first = errors[0] if isinstance(errors[0], dict) else {"message": str(errors[0])}
    kind = first.get("type") or (first.get("extensions") or {}).get("type")
    message = _one_line(first.get("message") or "unknown error")
    if kind == "NOT_FOUND" and (first.get("path") or [None])[0] == "repository":
        repo = f"{variables.get('owner')}/{variables.get('name')}"
        return RepoNotFound(
            f"repository {repo} not found, or the token cannot read it: "
            "check the name and the token's access"
        )
    if kind == "RATE_LIMITED":
        return GitHubError(
            f"GitHub's rate limit is exhausted ({message}): run again after it resets"
        )
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return GitHubError(f"GitHub answered with a GraphQL error: {message}{more}")


def _http_error(status: int | None, url: str) -> GitHubError:
    if status == 401:
        return GitHubError(
            "GitHub rejected the token (HTTP 401 Bad credentials): "
            "check that GITHUB_TOKEN holds a valid, unexpired token"
        )
    if status == 403:
        return GitHubError(
            "GitHub refused the request (HTTP 403): the token lacks access or a secondary "
            "rate limit was hit; check the token's scopes or wait and run again"
        )
    return GitHubError(
        f"{url} answered HTTP {status} after retries: GitHub may be degraded; run again later"
    )


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return max(0, int(value))
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from None


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text[:300]
