"""gql's transport for GitHub and what one HTTP round trip needs: the auth hook that
adds the token, and the failures a round trip is classified into (worth retrying, or
refused for a permission the token lacks).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import requests
import urllib3
from gql import GraphQLRequest
from gql.transport import Transport
from graphql import ExecutionResult

from ghindex.errors import GitHubError
from ghindex.github.answers import one_line, snippet


class GitHubTransport(Transport):
    """gql's transport for GitHub: one POST per `execute`, made by `post` (the owner's
    HTTP round trip, which classifies the answer); retries and waits happen around it,
    not inside. `url` is the endpoint as messages show it."""

    def __init__(self, post: Callable[[dict[str, Any]], dict[str, Any]], url: str) -> None:
        self._post = post
        self._url = url

    def connect(self) -> None:
        pass

    def close(self) -> None:
        pass

    def execute(self, request: GraphQLRequest, *args: Any, **kwargs: Any) -> ExecutionResult:
        body = self._post(request.payload)
        data, errors = body.get("data"), body.get("errors")
        if not isinstance(data, dict) and not errors:
            raise GitHubError(
                f"{self._url} answered with a malformed body (JSON without data "
                f"or errors): {snippet(json.dumps(body))}"
            )
        return ExecutionResult(data=data, errors=errors)


class BearerAuth(requests.auth.AuthBase):
    """Adds the token to each request, so it sits in no session-wide header dict.

    Passing an auth object also stops requests from swapping in ~/.netrc credentials.
    """

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "BearerAuth(<token>)"


class Transient(Exception):
    """A failure worth retrying: `reason` for the log, `final` if retries run out;
    `heavy` when a smaller page would pass where the same query would not."""

    def __init__(self, reason: str, final: str, heavy: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final
        self.heavy = heavy


class Refused(Exception):
    """HTTP 403 "Resource not accessible by integration": a permission the token lacks."""


def connection_reason(exc: Exception) -> str:
    text = str(exc)
    errno = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    return errno.group(0).strip() if errno else one_line(text)


def read_body(
    response: requests.Response, started: float, deadline: float, most: int, url: str
) -> None:
    """Read the answer's body into `response` within the total `deadline` (seconds since
    `started`: connect and every read together, so a server sending a byte every 20 s is
    cut off) and `most` bytes, counted compressed and decompressed; decompression goes a
    socket read at a time, so a small gzip bomb never grows the process."""
    pieces, size = [], 0
    try:
        while piece := response.raw.read1(16_384, decode_content=True):  # one recv
            size += len(piece)
            if size > most or response.raw.tell() > most:
                response.close()
                raise GitHubError(
                    f"{url} sent an answer larger than {most // 2**20} MB (decompressed): "
                    "refused; set GHINDEX_HTTP_MAX_MB if that is expected"
                )
            if time.monotonic() - started > deadline:
                response.close()
                raise Transient(
                    f"{url} sent its answer too slowly (none whole in {deadline:g}s)",
                    f"{url} sent its answers too slowly after retries (no whole answer in "
                    f"{deadline:g}s, GHINDEX_HTTP_DEADLINE): run again later",
                )
            pieces.append(piece)
    except urllib3.exceptions.ReadTimeoutError:
        raise requests.Timeout() from None  # answered as any timeout, by the caller
    except (urllib3.exceptions.DecodeError, urllib3.exceptions.ProtocolError) as exc:
        raise Transient(
            f"{url} sent a broken answer: {one_line(exc)}",
            f"{url} sent broken answers after retries ({one_line(exc)}): run again later",
        ) from None
    response._content = b"".join(pieces)  # what .content, .text and .json() read
    response._content_consumed = True
