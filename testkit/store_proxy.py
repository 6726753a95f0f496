"""A local S3 server (moto) for benchmarks, and a counting proxy in front of one, both
on 127.0.0.1.

Point a client at `proxy.url` instead of the store server (`AWS_ENDPOINT_URL`) and
every HTTP request it makes is forwarded unchanged and logged in `proxy.log`: method,
path, query, status, the bytes of the request and response bodies, and a small
response's body. Tests use it to count what a step costs on the wire (a sync check
with nothing new, a pull, a publish); benchmarks to measure bytes moved. Each
connection has a thread; bodies are held whole, fine for the 256 KiB pieces ghindex
moves.
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# Headers that describe one connection, not the message: never forwarded.
KEPT = 64 * 1024  # response bodies up to this size are kept in the log
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}


def start_s3(bucket: str) -> tuple[Any, str]:
    """A moto S3 server holding an empty `bucket`, with this process's AWS_* variables
    pointed at it (a benchmark's whole environment; tests use conftest's fixtures).
    Returns the server (`.stop()` it) and its endpoint."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
    )
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    return server, endpoint


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query string
    query: dict[str, str]
    status: int
    sent: int  # request body bytes (an upload)
    received: int  # response body bytes (a download)
    started: float  # time.monotonic()
    ended: float
    answer: bytes = b""  # the response body, when it is small (a listing, a pointer)

    @property
    def key(self) -> str:
        """The object or prefix asked for: the path after the bucket, or a listing's prefix."""
        parts = self.path.lstrip("/").split("/", 1)
        return parts[1] if len(parts) > 1 else self.query.get("prefix", "")


class StoreProxy:
    """Forwards to `upstream` (http://host:port) and logs; use as a context manager."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.log: list[Request] = []
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StoreProxy:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.proxy = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="store-proxy",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "proxy not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def clear(self) -> None:
        with self.lock:
            self.log.clear()

    def taken(self) -> list[Request]:
        """The requests logged so far, and a clean log for what follows."""
        with self.lock:
            taken, self.log = self.log, []
        return taken

    def record(self, request: Request) -> None:
        with self.lock:
            self.log.append(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients expect of S3

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        proxy: StoreProxy = self.server.proxy  # type: ignore[attr-defined]
        started = time.monotonic()
        body = self._body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(*proxy.upstream, timeout=120)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        parts = urlsplit(self.path)
        # logged before the client has its answer, so the log is complete when it goes on
        proxy.record(
            Request(
                self.command,
                parts.path,
                dict(parse_qsl(parts.query)),
                response.status,
                len(body),
                len(data),
                started,
                time.monotonic(),
                data if len(data) <= KEPT else b"",
            )
        )
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP:
                self.send_header(name, value)
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward
