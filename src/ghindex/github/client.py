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
`RATE_LIMIT_WAITS` times. GitHub's numbers (Retry-After, reset times, costs, points
left) are clamped to what they can mean, with a warning (`github/ratelimit.py`).
Waits are logged as warnings on the `ghindex` logger, retries at INFO.

The token is sent by a `requests` auth hook, never kept in headers that get printed,
and scrubbed from every message and log line built from what the server answered.

gql carries every query: `gql.Client` with a transport of our own
(`GitHubTransport`, in `github/transport.py`), which makes one POST per call through
a `requests` session and classifies the answer. gql's stock `RequestsHTTPTransport`
is not used: it retries through urllib3's `Retry`, which only sees status codes, so
it cannot tell a secondary rate limit from a permission 403, never sees GraphQL-level
`RATE_LIMITED` or partial `errors`, cannot wait for a reset time it does not know,
and does not say how often it retried or how long it slept. The retry and
rate-limit loop lives in `GraphQLClient._execute`, around single transport calls;
the waits themselves in `github/ratelimit.py`, the reading of GitHub's errors in
`github/answers.py`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from gql import Client, GraphQLRequest
from gql.transport.exceptions import TransportQueryError
from graphql import DocumentNode, OperationDefinitionNode, value_from_ast_untyped

from ghindex import __version__
from ghindex.config import env
from ghindex.errors import ConfigError, GitHubError, RateLimited
from ghindex.github.answers import (
    NOT_ACCESSIBLE,
    Answer,
    error_path,
    error_type,
    errors_of,
    is_timeout,
    json_answer,
    json_or_none,
    one_line,
    permission_hint,
    query_error,
    redirected,
    response_message,
)
from ghindex.github.graphql import load_query
from ghindex.github.ratelimit import (
    RATE_LIMIT_WAITS,
    RateLimit,
    RateLimitBudget,
    rate_limit_of,
    reset_header,
    retry_after_header,
)
from ghindex.github.transport import (
    BearerAuth,
    GitHubTransport,
    Refused,
    Transient,
    connection_reason,
    read_body,
)
from ghindex.progress import Progress
from ghindex.state.redact import redact

log = logging.getLogger(__name__)

# Backoff between retries of a transient failure never exceeds this.
BACKOFF_CAP = 60.0

_TRANSIENT_STATUSES = (500, 502, 503, 504)
# Error types meaning "this query is too heavy": a smaller page passes.
_TOO_HEAVY = ("RESOURCE_LIMITS_EXCEEDED", "MAX_NODE_LIMIT_EXCEEDED")


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


class GraphQLClient(RateLimitBudget):
    """Runs ghindex's query documents against one endpoint with one token.

    After a run, `requests` (HTTP requests sent, retries included), `retries`,
    `cost` (sum of `rateLimit.cost`) and `waited_seconds` (backoff and rate-limit
    waits) describe it; `stats()` returns them as a dict. `remaining`, `reset_at`
    and `last_rate_limit` hold the last rate limit GitHub reported.

    `sleep` and `clock` (epoch seconds) are injectable for the client's own tests;
    `progress` shows each rate-limit wait while it lasts.
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
        progress: Progress | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"GHINDEX_GRAPHQL_URL is not an http(s) URL: {_shown(url)!r}")
        if max_wait < 0:
            raise ConfigError(f"--max-wait must be 0 or more seconds, not {max_wait:g}")
        self.url = url
        self.timeout = timeout
        self.max_wait = max_wait
        self.max_retries = env("GHINDEX_HTTP_RETRIES")
        self.retry_base = env("GHINDEX_RETRY_BASE_SECONDS")
        self._token = token
        self._shown_url = _shown(url)
        self._sleep = sleep
        self._clock = clock
        self.progress = progress or Progress()
        self._random = random.Random()
        self._auth = BearerAuth(token)
        self._session = requests.Session()
        self._session.headers.update(
            {"User-Agent": f"ghindex/{__version__}", "Accept": "application/json"}
        )
        self._gql = Client(transport=GitHubTransport(self._post, self._shown_url)).connect_sync()
        self._last_response: requests.Response | None = None
        self._costs: dict[str, int] = {}
        self._page_sizes: dict[str, int] = {}
        self._reset: float | None = None
        self.requests = 0
        self.repaired_texts = 0  # strings with invalid code points made valid
        self.deadline = env("GHINDEX_HTTP_DEADLINE") or max(2 * timeout, 120.0)
        self.max_answer = env("GHINDEX_HTTP_MAX_MB") * 2**20
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
            "repaired_texts": self.repaired_texts,
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
            except Transient as problem:
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
            except RateLimit as limit:
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
        except Refused as refusal:
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
                reset = reset_header(response, self._clock()) or self._reset
                raise RateLimit(retry_after_header(response), reset)
            message = one_line(errors[0].get("message") or "unknown error")
            heavy = next((k for k in kinds if k in _TOO_HEAVY), None)
            # The timeout nulls the whole answer; the same words at a path below some
            # data are one part failing, which a partial caller handles.
            timeout = any(is_timeout(e) and not (data and error_path(e)) for e in errors)
            if heavy or timeout:
                raise Transient(
                    f"GitHub could not finish {request.operation_name or name} "
                    f"({heavy or 'timeout'}): {message}",
                    f"GitHub could not finish {request.operation_name or name} even one "
                    f"item at a time ({heavy or 'timeout'}): {message}; run again later",
                    heavy=True,
                )
            if partial and isinstance(data, dict) and all(error_path(e) for e in errors):
                return Answer(data, errors, request.operation_name or name, sent)
            if any(NOT_ACCESSIBLE in str(e.get("message", "")).lower() for e in errors):
                raise GitHubError(
                    f"the token may not read what {request.operation_name or name} asks for "
                    f"({message}): {permission_hint(name, message)}"
                )
            variables = request.variable_values or {}
            raise query_error(errors, data, variables, request.operation_name or name)
        return Answer(data, [], request.operation_name or name, sent)

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One HTTP round trip: the parsed body of a 2xx answer, or a classified failure."""
        self.requests += 1
        url = self._shown_url
        started = time.monotonic()
        try:
            response = self._session.post(
                self.url,
                json=payload,
                auth=self._auth,
                timeout=self.timeout,
                stream=True,  # read below, under a total deadline and a size cap
                allow_redirects=False,
            )
            read_body(response, started, self.deadline, self.max_answer, self._shown_url)
        except requests.Timeout:
            raise Transient(
                f"no answer from {url} within {self.timeout:g}s",
                f"{url} did not answer within {self.timeout:g}s after retries: "
                "GitHub may be slow; run again later",
            ) from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            reason = connection_reason(exc)
            raise Transient(
                f"cannot reach {url}: {reason}", f"cannot reach {url}: {reason}"
            ) from None
        except requests.RequestException as exc:
            raise GitHubError(f"GraphQL request to {url} failed: {one_line(exc)}") from None

        self._last_response = response
        self._note_headers(response.headers)
        status = response.status_code
        if status in (301, 302, 303, 307, 308):
            raise GitHubError(redirected(url, self.url, response.headers.get("Location", "")))
        if status == 401:
            raise GitHubError(
                "GitHub rejected the token (HTTP 401 Bad credentials): "
                "check that GITHUB_TOKEN holds a valid, unexpired token"
            )
        if status in (403, 429):
            limit = rate_limit_of(response, self._reset, self._clock())
            if limit is not None:
                raise limit
            if NOT_ACCESSIBLE in response_message(response).lower():
                raise Refused(response_message(response))
            raise GitHubError(
                f"GitHub refused the request (HTTP {status}: {response_message(response)}): "
                "check the token's scopes and its access to the repository"
            )
        if status in _TRANSIENT_STATUSES:
            body = json_or_none(response)
            if body and any(is_timeout(e) for e in errors_of(body)):
                return body  # GitHub's execution timeout, answered as 502: see _attempt
            raise Transient(
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
            raise GitHubError(f"{url} answered HTTP {status}: {response_message(response)}")
        return self._json(response)

    def _json(self, response: requests.Response) -> dict[str, Any]:
        body, repaired = json_answer(response, self._shown_url)
        self.repaired_texts += repaired
        return body

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


def _page_size(document: DocumentNode) -> int | None:
    """The default of the query's `$first` variable: its page size, or None."""
    for definition in document.definitions:
        if not isinstance(definition, OperationDefinitionNode):
            continue
        for variable in definition.variable_definitions or ():
            if variable.variable.name.value == "first" and variable.default_value is not None:
                return int(value_from_ast_untyped(variable.default_value))
    return None


def _shown(url: str) -> str:
    """The URL without credentials or query string, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
