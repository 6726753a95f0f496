"""The GraphQL client: GitHub's API (or any server speaking its schema) over HTTP.

`execute("issues", ...)` sends `fetch/queries/issues.graphql` (with the fragments it
uses, see `github/graphql.py`) and returns its `data`, or raises a `GitHubError` whose
one-line message names the cause and what to do.

What it survives, and how:

- **Its own budget.** Every query asks for `rateLimit { cost remaining resetAt }`.
  Before sending, when the points left would not cover the query (its last cost, 1
  the first time), it waits until the reset, or raises `RateLimited` when that wait
  is longer than `max_wait` seconds. Committed pages stay committed either way.
- **Primary rate limit** (`RATE_LIMITED`, or a 403/429 with no points left): the same
  decision, using `X-RateLimit-Reset`.
- **Secondary rate limits** (403/429 mentioning one, or with `Retry-After`): waits
  `Retry-After` seconds, or one minute doubling per repeat as GitHub's docs ask.
- **Transient failures** (HTTP 500/502/503/504, connection errors, timeouts): up to
  `GHINDEX_HTTP_RETRIES` (default 3) retries with exponential backoff and full jitter,
  base `GHINDEX_RETRY_BASE_SECONDS` (default 1 s), capped at one minute.
- **Queries too heavy for GitHub**: its ~10-second execution timeout ("Something went
  wrong while executing your query. This may be the result of a timeout", HTTP 200 or
  502), `RESOURCE_LIMITS_EXCEEDED` and `MAX_NODE_LIMIT_EXCEEDED`. The same query would
  fail again, so a query with a page size (`$first`) is sent again with half the page,
  down to one item, and keeps the smaller page for the rest of the run; only then do
  the transient retries apply.
- **Answers that are not whole**: `data` together with `errors` (GitHub nulls what it
  could not resolve) is an error, unless the caller asked for `execute_partial`, which
  returns both so that it can tell a deleted item from a failure; bodies that are not
  GraphQL JSON are always errors.

Rate-limit waits do not use the retry budget: each is bounded by `max_wait` (longer
means `RateLimited` at once, without sleeping), and a query waits at most
`RATE_LIMIT_WAITS` times. Waits are logged as warnings on the `ghindex` logger,
retries at INFO.

The token is sent by a `requests` auth hook, never kept in headers that get printed,
and scrubbed from every message and log line built from what the server answered.

gql carries every query: `gql.Client` with a transport of our own
(`_GitHubTransport`), which makes one POST per call through a `requests` session
and classifies the answer. gql's stock `RequestsHTTPTransport` is not used: it
retries through urllib3's `Retry`, which only sees status codes, so it cannot tell
a secondary rate limit from a permission 403, never sees GraphQL-level
`RATE_LIMITED` or partial `errors`, cannot wait for a reset time it does not know,
and does not say how often it retried or how long it slept. The retry and
rate-limit loop lives in `GraphQLClient._execute`, around single transport calls.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from gql import Client, GraphQLRequest
from gql.transport import Transport
from gql.transport.exceptions import TransportQueryError
from graphql import (
    DocumentNode,
    ExecutionResult,
    OperationDefinitionNode,
    value_from_ast_untyped,
)

from ghindex import __version__
from ghindex.errors import ConfigError, GitHubError, RateLimited, RepoNotFound
from ghindex.github.graphql import load_query
from ghindex.state.redact import redact

log = logging.getLogger(__name__)

# Waits past a reset time by this much: GitHub's clock and ours disagree a little.
RESET_MARGIN = 1.0
# Backoff between retries of a transient failure never exceeds this.
BACKOFF_CAP = 60.0
# Without Retry-After, GitHub asks to wait at least a minute after a secondary limit.
SECONDARY_WAIT = 60.0
# Rate-limit waits per query before giving up: after waiting out a reset, GitHub
# should answer; if it still does not, something is off and a later run is better.
RATE_LIMIT_WAITS = 3

_TRANSIENT_STATUSES = (500, 502, 503, 504)
_TRANSIENT_GRAPHQL = "something went wrong while executing your query"
# Error types meaning "this query is too heavy": a smaller page passes.
_TOO_HEAVY = ("RESOURCE_LIMITS_EXCEEDED", "MAX_NODE_LIMIT_EXCEEDED")

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
_NOT_ACCESSIBLE = "resource not accessible by"


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
        return _query_error(errors or self.errors, self.data, self.variables, self.operation)


@cache
def _query(name: str) -> tuple[DocumentNode, str | None]:
    """The document to send for query `name` and its operation name."""
    document = load_query(name)
    operation = next(
        d.name.value if d.name else None
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    )
    return document, operation


class _GitHubTransport(Transport):
    """gql's transport for GitHub: one POST per `execute`, its answer classified by
    the client that owns it (retries and waits happen around it, not inside)."""

    def __init__(self, client: GraphQLClient) -> None:
        self._client = client

    def connect(self) -> None:
        pass

    def close(self) -> None:
        pass

    def execute(self, request: GraphQLRequest, *args: Any, **kwargs: Any) -> ExecutionResult:
        body = self._client._post(request.payload)
        data, errors = body.get("data"), body.get("errors")
        if not isinstance(data, dict) and not errors:
            raise GitHubError(
                f"{self._client._shown_url} answered with a malformed body (JSON without data "
                f"or errors): {_snippet(json.dumps(body))}"
            )
        return ExecutionResult(data=data, errors=errors)


class _BearerAuth(requests.auth.AuthBase):
    """Adds the token to each request, so it sits in no session-wide header dict.

    Passing an auth object also stops requests from swapping in ~/.netrc credentials.
    """

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_BearerAuth(<token>)"


class _Transient(Exception):
    """A failure worth retrying: `reason` for the log, `final` if retries run out;
    `heavy` when a smaller page would pass where the same query would not."""

    def __init__(self, reason: str, final: str, heavy: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final
        self.heavy = heavy


class _Refused(Exception):
    """HTTP 403 "Resource not accessible by integration": a permission the token lacks."""


class _RateLimit(Exception):
    """GitHub asked us to slow down: wait `retry_after`, or until `reset`, then retry."""

    def __init__(self, retry_after: float | None = None, reset: float | None = None) -> None:
        super().__init__("rate limited")
        self.retry_after = retry_after
        self.reset = reset  # epoch seconds


class GraphQLClient:
    """Runs ghindex's query documents against one endpoint with one token.

    After a run, `requests` (HTTP requests sent, retries included), `retries`,
    `cost` (sum of `rateLimit.cost`) and `waited_seconds` (backoff and rate-limit
    waits) describe it; `stats()` returns them as a dict. `remaining`, `reset_at`
    and `last_rate_limit` hold the last rate limit GitHub reported.

    `sleep` and `clock` (epoch seconds) are injectable for the client's own tests.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 60.0,
        max_wait: float = 3600.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"GHINDEX_GRAPHQL_URL is not an http(s) URL: {_shown(url)!r}")
        if max_wait < 0:
            raise ConfigError(f"--max-wait must be 0 or more seconds, not {max_wait:g}")
        self.url = url
        self.timeout = timeout
        self.max_wait = max_wait
        self.max_retries = _int_env("GHINDEX_HTTP_RETRIES", 3)
        self.retry_base = _float_env("GHINDEX_RETRY_BASE_SECONDS", 1.0)
        self._token = token
        self._shown_url = _shown(url)
        self._sleep = sleep
        self._clock = clock
        self._random = random.Random()
        self._auth = _BearerAuth(token)
        self._session = requests.Session()
        self._session.headers.update(
            {"User-Agent": f"ghindex/{__version__}", "Accept": "application/json"}
        )
        self._gql = Client(transport=_GitHubTransport(self)).connect_sync()
        self._last_response: requests.Response | None = None
        self._costs: dict[str, int] = {}
        self._page_sizes: dict[str, int] = {}
        self._reset: float | None = None
        self.requests = 0
        self.retries = 0
        self.smaller_pages = 0
        self.cost = 0
        self.waited_seconds = 0.0
        self.remaining: int | None = None
        self.last_rate_limit: dict[str, Any] | None = None

    @property
    def reset_at(self) -> datetime | None:
        """When GitHub last said the rate limit resets."""
        return datetime.fromtimestamp(self._reset, UTC) if self._reset is not None else None

    def stats(self) -> dict[str, Any]:
        """What this client did, for the `runs` table."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "smaller_pages": self.smaller_pages,
            "page_sizes": dict(sorted(self._page_sizes.items())),
            "cost": self.cost,
            "waited_seconds": round(self.waited_seconds, 3),
        }

    def execute(self, name: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Run query `name` and return its `data`; raise GitHubError on any failure."""
        answer = self._run(name, variables, partial=False)
        return answer.data

    def execute_partial(self, name: str, variables: dict[str, Any]) -> Answer:
        """Run query `name`; an answer with data and errors at paths comes back whole,
        for a caller that can tell which part failed. Everything else as `execute`."""
        return self._run(name, variables, partial=True)

    def _run(self, name: str, variables: dict[str, Any], partial: bool) -> Answer:
        try:
            return self._execute(name, variables, partial)
        except GitHubError as exc:
            # Last line of defence: whatever the server echoed, the token stays out.
            raise type(exc)(self._scrub(str(exc))) from None

    def _execute(self, name: str, variables: dict[str, Any], partial: bool) -> Answer:
        document, operation = _query(name)
        page = _page_size(document)
        failures = 0
        waits = 0
        while True:
            self._mind_budget(name)
            sent = dict(variables)
            if page is not None and "first" not in variables:  # a caller's size stands
                sent["first"] = self._page_sizes.setdefault(name, page)
            request = GraphQLRequest(document, variable_values=sent, operation_name=operation)
            try:
                return self._attempt(name, request, partial)
            except _Transient as problem:
                if problem.heavy and self._page_sizes.get(name, 1) > 1:
                    self._page_sizes[name] = self._page_sizes[name] // 2
                    self.smaller_pages += 1
                    log.info(
                        "%s; asking again for %d items per page",
                        self._scrub(problem.reason),
                        self._page_sizes[name],
                    )
                    self.retries += 1
                    continue
                if failures >= self.max_retries:
                    raise GitHubError(problem.final) from None
                delay = self._random.uniform(0, min(BACKOFF_CAP, self.retry_base * 2**failures))
                failures += 1
                log.info(
                    "%s; retry %d of %d in %.1fs",
                    self._scrub(problem.reason),
                    failures,
                    self.max_retries,
                    delay,
                )
                self._pause(delay)
            except _RateLimit as limit:
                waits += 1
                if waits > RATE_LIMIT_WAITS:
                    raise RateLimited(
                        f"GitHub still rate-limits after {RATE_LIMIT_WAITS} waits: "
                        "progress is saved; run again later"
                    ) from None
                self._wait_out(limit, waits)
            self.retries += 1

    # -- one HTTP round trip

    def _attempt(self, name: str, request: GraphQLRequest, partial: bool) -> Answer:
        sent = dict(request.variable_values or {})
        try:
            result = self._gql.execute(request, get_execution_result=True)
            data, errors = result.data, result.errors
        except TransportQueryError as exc:
            data, errors = exc.data, exc.errors
        except _Refused as refusal:
            raise GitHubError(
                f"GitHub refused {request.operation_name or name} (HTTP 403: {refusal}): "
                f"{permission_hint(name, str(refusal))}"
            ) from None
        response = self._last_response
        assert response is not None
        if isinstance(data, dict):
            self._note_rate_limit(name, data.get("rateLimit"))
        if errors:
            errors = errors if isinstance(errors, list) else [errors]
            errors = [e if isinstance(e, dict) else {"message": str(e)} for e in errors]
            kinds = [error_type(e) for e in errors]
            if "RATE_LIMITED" in kinds:
                raise _RateLimit(_retry_after(response), _reset_header(response) or self._reset)
            message = _one_line(errors[0].get("message") or "unknown error")
            heavy = next((k for k in kinds if k in _TOO_HEAVY), None)
            # The timeout nulls the whole answer; the same words at a path below some
            # data are one part failing, which a partial caller handles.
            timeout = any(_is_timeout(e) and not (data and error_path(e)) for e in errors)
            if heavy or timeout:
                raise _Transient(
                    f"GitHub could not finish {request.operation_name or name} "
                    f"({heavy or 'timeout'}): {message}",
                    f"GitHub could not finish {request.operation_name or name} even one "
                    f"item at a time ({heavy or 'timeout'}): {message}; run again later",
                    heavy=True,
                )
            if partial and isinstance(data, dict) and all(error_path(e) for e in errors):
                return Answer(data, errors, request.operation_name or name, sent)
            if any(_NOT_ACCESSIBLE in str(e.get("message", "")).lower() for e in errors):
                raise GitHubError(
                    f"the token may not read what {request.operation_name or name} asks for "
                    f"({message}): {permission_hint(name, message)}"
                )
            variables = request.variable_values or {}
            raise _query_error(errors, data, variables, request.operation_name or name)
        return Answer(data, [], request.operation_name or name, sent)

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One HTTP round trip: the parsed body of a 2xx answer, or a classified failure."""
        self.requests += 1
        url = self._shown_url
        try:
            response = self._session.post(
                self.url, json=payload, auth=self._auth, timeout=self.timeout
            )
        except requests.Timeout:
            raise _Transient(
                f"no answer from {url} within {self.timeout:g}s",
                f"{url} did not answer within {self.timeout:g}s after retries: "
                "GitHub may be slow; run again later",
            ) from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            reason = _connection_reason(exc)
            raise _Transient(
                f"cannot reach {url}: {reason}", f"cannot reach {url}: {reason}"
            ) from None
        except requests.RequestException as exc:
            raise GitHubError(f"GraphQL request to {url} failed: {_one_line(exc)}") from None

        self._last_response = response
        self._note_headers(response.headers)
        status = response.status_code
        if status == 401:
            raise GitHubError(
                "GitHub rejected the token (HTTP 401 Bad credentials): "
                "check that GITHUB_TOKEN holds a valid, unexpired token"
            )
        if status in (403, 429):
            limit = _rate_limit(response, self._reset)
            if limit is not None:
                raise limit
            if _NOT_ACCESSIBLE in _message(response).lower():
                raise _Refused(_message(response))
            raise GitHubError(
                f"GitHub refused the request (HTTP {status}: {_message(response)}): "
                "check the token's scopes and its access to the repository"
            )
        if status in _TRANSIENT_STATUSES:
            body = _json_or_none(response)
            if body and any(_is_timeout(e) for e in _errors_of(body)):
                return body  # GitHub's execution timeout, answered as 502: see _attempt
            raise _Transient(
                f"HTTP {status} from {url}",
                f"{url} answered HTTP {status} after retries: "
                "GitHub may be degraded; run again later",
            )
        if status == 404:
            raise GitHubError(
                f"{url} answered HTTP 404 Not Found: check GHINDEX_GRAPHQL_URL "
                "(GitHub Enterprise Server uses https://HOST/api/graphql)"
            )
        if not 200 <= status < 300:
            raise GitHubError(f"{url} answered HTTP {status}: {_message(response)}")
        return self._json(response)

    def _json(self, response: requests.Response) -> dict[str, Any]:
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise GitHubError(
                f"{self._shown_url} answered with a malformed body (not JSON): "
                f"{_snippet(response.text)}"
            )
        return body

    # -- rate limits

    def _note_headers(self, headers: Any) -> None:
        remaining = _int_or_none(headers.get("X-RateLimit-Remaining"))
        reset = _int_or_none(headers.get("X-RateLimit-Reset"))
        if remaining is not None:
            self.remaining = remaining
        if reset is not None:
            self._reset = float(reset)

    def _note_rate_limit(self, name: str, rate_limit: Any) -> None:
        if not isinstance(rate_limit, dict):
            return  # GitHub Enterprise Server without rate limiting answers null
        self.last_rate_limit = rate_limit
        cost = rate_limit.get("cost")
        if isinstance(cost, int):
            self.cost += cost
            self._costs[name] = cost
        if isinstance(rate_limit.get("remaining"), int):
            self.remaining = rate_limit["remaining"]
        reset = _parse_time(rate_limit.get("resetAt"))
        if reset is not None:
            self._reset = reset

    def _mind_budget(self, name: str) -> None:
        """Wait for the reset first when the points left would not cover query `name`."""
        if self.remaining is None or self._reset is None:
            return
        if self.remaining >= self._costs.get(name, 1):
            return
        if self._reset + RESET_MARGIN > self._clock():
            self._wait_for_reset(self._reset)
        self.remaining = None  # unknown until GitHub says again

    def _wait_out(self, limit: _RateLimit, waits: int) -> None:
        if limit.retry_after is None and limit.reset is not None:
            self._wait_for_reset(limit.reset, at_least=RESET_MARGIN)
            self.remaining = None
            return
        seconds = limit.retry_after
        if seconds is None:
            seconds = SECONDARY_WAIT * 2 ** (waits - 1)
        if seconds > self.max_wait:
            raise RateLimited(
                f"GitHub's secondary rate limit asks for a pause of {_duration(seconds)} "
                f"(more than --max-wait {self.max_wait:g}s): progress is saved; "
                "run again in a few minutes"
            )
        log.warning("secondary rate limit: waiting %s before retrying", _duration(seconds))
        self._pause(seconds)

    def _wait_for_reset(self, reset: float, at_least: float = 0.0) -> None:
        seconds = max(reset + RESET_MARGIN - self._clock(), at_least)
        until = time.strftime("%H:%M:%S", time.gmtime(reset))
        if seconds > self.max_wait:
            raise RateLimited(
                f"GitHub's rate limit is exhausted until {until} UTC (waiting would exceed "
                f"--max-wait {self.max_wait:g}s): progress is saved; run again after the reset"
            )
        log.warning(
            "rate limit: %d points left, waiting %s until %s UTC",
            self.remaining or 0,
            _duration(seconds),
            until,
        )
        self._pause(seconds)

    def _pause(self, seconds: float) -> None:
        self._sleep(seconds)
        self.waited_seconds += seconds

    def _scrub(self, text: str) -> str:
        """Our token, and any secret the server echoed, out of a message or log line."""
        return redact(text.replace(self._token, "[token]") if self._token else text)

    def close(self) -> None:
        self._gql.client.close_sync()
        self._session.close()

    def __enter__(self) -> GraphQLClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rate_limit(response: requests.Response, known_reset: float | None) -> _RateLimit | None:
    """The rate limit a 403/429 reports, or None when it is a plain refusal.

    GitHub's advice, in order: obey Retry-After; with no points left wait for
    X-RateLimit-Reset; otherwise (a secondary limit) wait at least a minute.
    """
    retry_after = _retry_after(response)
    if retry_after is not None:
        return _RateLimit(retry_after=retry_after)
    text = response.text.lower()
    primary = response.headers.get("X-RateLimit-Remaining") == "0" or any(
        marker in text for marker in ("rate_limited", "api rate limit exceeded")
    )
    if primary:
        return _RateLimit(reset=_reset_header(response) or known_reset)
    if response.status_code == 429 or "secondary rate limit" in text:
        return _RateLimit()
    return None


def _retry_after(response: requests.Response) -> float | None:
    value = (response.headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def _reset_header(response: requests.Response) -> float | None:
    reset = _int_or_none(response.headers.get("X-RateLimit-Reset"))
    return float(reset) if reset is not None else None


def _query_error(
    errors: list[dict[str, Any]], data: Any, variables: dict[str, Any], operation: str
) -> GitHubError:
    first = errors[0]
    kind = error_type(first)
    path = error_path(first)
    message = _one_line(first.get("message") or "unknown error")
    if kind == "NOT_FOUND" and path[:1] == ["repository"]:
        repo = f"{variables.get('owner')}/{variables.get('name')}"
        return RepoNotFound(
            f"repository {repo} not found, or the token cannot read it: "
            "check the name and the token's access"
        )
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    if data is not None:
        where = f" at {'.'.join(str(p) for p in path)}" if path else ""
        return GitHubError(
            f"GitHub answered {operation} with partial data and an error{where}: {message}{more}"
        )
    return GitHubError(f"GitHub answered with a GraphQL error: {message}{more}")


def _message(response: requests.Response) -> str:
    """GitHub's `message` from an error body, else the start of the body."""
    body = _json_or_none(response)
    if body and isinstance(body.get("message"), str):
        return _one_line(body["message"])
    return _snippet(response.text) or response.reason or "no body"


def _json_or_none(response: requests.Response) -> dict[str, Any] | None:
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _errors_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    errors = body.get("errors")
    return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def _is_timeout(error: dict[str, Any]) -> bool:
    """GitHub's execution timeout: "Something went wrong while executing your query..."."""
    return str(error.get("message", "")).lower().startswith(_TRANSIENT_GRAPHQL)


def _page_size(document: DocumentNode) -> int | None:
    """The default of the query's `$first` variable: its page size, or None."""
    for definition in document.definitions:
        if not isinstance(definition, OperationDefinitionNode):
            continue
        for variable in definition.variable_definitions or ():
            if variable.variable.name.value == "first" and variable.default_value is not None:
                return int(value_from_ast_untyped(variable.default_value))
    return None


def _connection_reason(exc: Exception) -> str:
    text = str(exc)
    errno = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    return errno.group(0).strip() if errno else _one_line(text)


def _shown(url: str) -> str:
    """The URL without credentials or query string, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _duration(seconds: float) -> str:
    """12m 30s, 1h 5m, 2s: whole seconds, rounded up."""
    total = math.ceil(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return " ".join(parts) or "0s"


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return max(0, int(value))
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from None


def _float_env(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0 or math.isinf(number):
        raise ConfigError(f"{name} must be a number of seconds, not {value!r}")
    return number


def _snippet(text: str) -> str:
    return _one_line(text)[:100]


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text[:300]
