"""Object stores: one small interface over a local directory, S3, GCS and Azure.

Built on obstore, which speaks every backend with the credentials each cloud's own
tools use (AWS_* variables and profiles, GOOGLE_APPLICATION_CREDENTIALS, AZURE_*),
so nothing here reads or stores a secret. `AWS_ENDPOINT_URL` reaches any
S3-compatible store (MinIO, R2, a local test server).

Writes that must not overwrite (snapshot manifests, pointer generations) use the
backend's create-only put: S3 `If-None-Match`, GCS `ifGenerationMatch=0`, Azure
`If-None-Match: *`, `O_EXCL` on a local disk.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import obstore
from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError
from obstore.store import LocalStore, from_url

from ghindex.errors import ConfigError, SnapshotError, disk_problem, first_line

_MISSING = (FileNotFoundError, NotFoundError)

_CHUNK = 64 * 1024  # bytes read at a time from a store
# A local store's object must be read whole within this; a bucket's client has its own
# (obstore's request timeout, 30 s by default).
READ_DEADLINE = 120.0
_LOCAL_OPEN = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC

SCHEMES = ("file", "s3", "gs", "az", "azure", "abfs", "abfss")


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    last_modified: datetime


class Store:
    """A store URL opened for snapshots: every path is relative to its prefix."""

    def __init__(self, url: str) -> None:
        self.url = url
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        self._local: LocalStore | None = None
        self._remote: Any = None
        if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
            root = Path(unquote(parts.path) if scheme == "file" else url).expanduser().resolve()
            self.local_root: Path | None = root
        elif scheme in SCHEMES:
            options: dict[str, Any] = {}
            endpoint = os.environ.get("AWS_ENDPOINT_URL") if scheme == "s3" else None
            if endpoint and endpoint.startswith("http://"):
                options["client_options"] = {"allow_http": True}
            try:
                self._remote = from_url(url, **options)
            except Exception as exc:  # obstore raises its own error types per backend
                raise ConfigError(f"cannot open store {shown(url)}: {first_line(exc)}") from None
            self.local_root = None
        else:
            raise ConfigError(
                f"unknown store URL scheme {parts.scheme!r} in {shown(url)}: use a path, "
                "file://, s3://, gs:// or az://"
            )

    @property
    def _store(self) -> Any:
        """The backend. A local directory that does not exist is an error for a reader
        (a typo is reported as one, not as an empty store) and is made by a writer."""
        if self.local_root is None:
            return self._remote
        if self._local is None:
            if not self.local_root.is_dir():
                raise ConfigError(f"no store at {self.url}: check the path (publish creates it)")
            self._local = LocalStore(str(self.local_root))
        return self._local

    def create(self) -> None:
        """Make a local store's directory (a publisher's first step); nothing remote."""
        if self.local_root is not None:
            self.local_root.mkdir(parents=True, exist_ok=True)

    def get(self, path: str, limit: int) -> bytes:
        """An object's bytes, refused as soon as it proves longer than `limit`: what a
        store says about sizes is not trusted, so memory stays bounded by the limit."""
        backend = self._store
        if self.local_root is not None:
            return self._local_get(path, limit)
        try:
            result = obstore.get(backend, path)
            if int(result.meta["size"]) > limit:
                raise self._too_large(path, limit)
            data = bytearray()
            for chunk in result.stream(min_chunk_size=_CHUNK):
                data += chunk
                if len(data) > limit:
                    raise self._too_large(path, limit)
        except SnapshotError:
            raise
        except _MISSING:
            raise SnapshotError(f"{path} is missing from {shown(self.url)}") from None
        except Exception as exc:
            raise self._error("read", path, exc) from cause(exc)
        return bytes(data)

    def _local_get(self, path: str, limit: int) -> bytes:
        """Read a local store's object: only a regular file (never a FIFO, a device or a
        link, which could block or lead outside), opened without waiting, and read
        before `READ_DEADLINE` runs out."""
        assert self.local_root is not None
        deadline = time.monotonic() + READ_DEADLINE
        try:
            fd = os.open(self.local_root / path, _LOCAL_OPEN)
        except _MISSING:
            raise SnapshotError(f"{path} is missing from {shown(self.url)}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the last part is a link
                raise self._not_regular(path) from None
            raise self._error("read", path, exc) from cause(exc)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            os.close(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._not_regular(path)
            raise self._too_large(path, limit)
        with os.fdopen(fd, "rb", buffering=0) as handle:
            os.set_blocking(fd, True)
            data = bytearray()
            while chunk := handle.read(_CHUNK):
                data += chunk
                if len(data) > limit:
                    raise self._too_large(path, limit)
                if time.monotonic() > deadline:
                    raise SnapshotError(
                        f"reading {path} from {shown(self.url)} took more than "
                        f"{READ_DEADLINE:g} s: check the disk the store is on"
                    )
        return bytes(data)

    def _not_regular(self, path: str) -> SnapshotError:
        return SnapshotError(
            f"{path} in {shown(self.url)} is not a regular file (a folder, a link, a pipe "
            "or a device): the store is damaged"
        )

    def _too_large(self, path: str, limit: int) -> SnapshotError:
        return SnapshotError(
            f"{path} in {shown(self.url)} is larger than the {limit:,} bytes it may be: "
            "the store is damaged"
        )

    def put(self, path: str, data: bytes | Path, *, create_only: bool = False) -> bool:
        """Write an object (bytes, or a local file streamed); with `create_only`, return
        False instead of overwriting an object that exists."""
        mode = "create" if create_only else "overwrite"
        backend = self._store
        try:
            obstore.put(backend, path, data, mode=mode)
        except (AlreadyExistsError, PreconditionError, FileExistsError):
            if create_only:
                return False
            raise
        except Exception as exc:
            raise self._error("write", path, exc) from cause(exc)
        return True

    def head(self, path: str) -> Entry | None:
        backend = self._store
        if self.local_root is not None:
            try:
                info = (self.local_root / path).lstat()
            except _MISSING:
                return None
            except OSError as exc:
                raise self._error("read", path, exc) from cause(exc)
            if not stat.S_ISREG(info.st_mode):
                raise self._not_regular(path)
            return Entry(path, info.st_size, datetime.fromtimestamp(info.st_mtime, UTC))
        try:
            meta = obstore.head(backend, path)
        except _MISSING:
            return None
        except Exception as exc:
            raise self._error("read", path, exc) from cause(exc)
        return Entry(path, int(meta["size"]), meta["last_modified"])

    def list(self, prefix: str, offset: str | None = None) -> list[Entry]:
        """The objects under `prefix`, by path; with `offset`, only those whose path sorts
        after it (S3's `start-after`: the store skips the rest, it is not sent)."""
        backend = self._store
        try:
            found = []
            for batch in obstore.list(backend, prefix=prefix, offset=offset):
                found.extend(Entry(m["path"], int(m["size"]), m["last_modified"]) for m in batch)
        except _MISSING:
            return []
        except Exception as exc:
            raise self._error("list", prefix, exc) from cause(exc)
        return sorted(found, key=lambda e: e.path)

    def delete(self, path: str) -> None:
        backend = self._store
        try:
            obstore.delete(backend, path)
        except _MISSING:
            return
        except Exception as exc:
            raise self._error("delete", path, exc) from cause(exc)
        if self.local_root is not None:
            self._prune_empty(path)

    def _prune_empty(self, path: str) -> None:
        """A local store has directories an object store does not: remove those the
        delete left empty (`snapshots/<id>/`), up to the store's root, never the root."""
        folder = (self.local_root / path).parent
        while folder != self.local_root and folder.is_relative_to(self.local_root):
            try:
                folder.rmdir()  # only an empty directory; a publish may be adding to it
            except OSError:
                return
            folder = folder.parent

    def _error(self, action: str, path: str, exc: Exception) -> SnapshotError:
        text = str(exc)
        # listing answers 404 only for a bucket (or container) that does not exist
        if (
            "NoSuchBucket" in text
            or "ContainerNotFound" in text
            or (action == "list" and "404 Not Found" in text)
        ):
            return SnapshotError(f"bucket not found: {shown(self.url)}: check the store URL")
        if "403 Forbidden" in text or "AccessDenied" in text or "AuthorizationFailure" in text:
            return SnapshotError(
                f"access denied to {shown(self.url)}: check the credentials in the environment "
                "and the bucket's permissions"
            )
        local = self.url.startswith("file://") or "://" not in self.url
        disk = disk_problem(exc, path) if local else None  # a bucket says it in its own words
        if disk:
            return SnapshotError(f"{disk} (the store {shown(self.url)})")
        return SnapshotError(
            f"cannot {action} {path} in {shown(self.url)}: {first_line(exc)} "
            "(check the store URL and the credentials in the environment)"
        )


class StoreFailure(Exception):
    """What a store's client said, under the one-line error it became (a traceback with
    --debug shows it): its type and message, credentials in URLs taken out."""


# a URL's user:password@, and the value of a query parameter that signs or authorises (an
# Azure SAS `sig=`, `X-Amz-Signature=`, `X-Amz-Security-Token=`, a `token=`)
_URL_SECRET = re.compile(
    r"(?i)(?<=://)[^/\s@]+@|(?<=[?&])([\w.-]*(?:sig|credential|token|secret|password|key)"
    r"[\w.-]*=)[^&\s\"',)]+"
)


def cause(exc: BaseException) -> StoreFailure:
    """`exc`, a store client's error, as the cause a `SnapshotError` is raised from."""
    text = _URL_SECRET.sub(
        lambda m: f"{m.group(1)}[redacted]" if m.group(1) else "[redacted]@", str(exc)
    )
    return StoreFailure(f"{type(exc).__module__}.{type(exc).__qualname__}: {text}")


def shown(url: str) -> str:
    """A URL as it may appear in messages: no user, password or query string."""
    parts = urlsplit(url)
    if not parts.scheme or len(parts.scheme) == 1:
        return url
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{parts.path}"
