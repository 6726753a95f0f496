"""The GitHub repository a checkout belongs to, read from the URL of its git remote."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ghindex.config import parse_repo
from ghindex.errors import ConfigError
from ghindex.gitsource.repo import open_repository


@dataclass(frozen=True)
class RemoteRepo:
    """The GitHub repository a checkout's remote points at."""

    repo: str  # 'owner/name' (a wiki remote 'owner/name.wiki' gives 'owner/name')
    web_url: str  # 'https://github.com' or a GitHub Enterprise host
    is_wiki: bool = False


def repo_from_remote(path: Path, remote: str = "origin") -> RemoteRepo:
    """Which GitHub repository a checkout belongs to, from its remote's URL.

    Understands https URLs, `git@host:owner/name.git`, `ssh://` URLs and GitHub
    Enterprise hosts; a wiki clone (`owner/name.wiki.git`) gives `owner/name`.
    """
    git = open_repository(path)
    url = git.run("config", "--get", f"remote.{remote}.url", check=False).decode().strip()
    if not url:
        raise ConfigError(
            f"cannot tell which repository {git.path} belongs to: it has no remote "
            f"{remote!r}: give the repository with --repo owner/name"
        )
    found = parse_remote_url(url)
    if found is None:
        raise ConfigError(
            f"cannot tell which repository {git.path} belongs to from its remote URL "
            f"{_redact(url)}, which is no GitHub address: give the repository with "
            "--repo owner/name"
        )
    return found


def parse_remote_url(url: str) -> RemoteRepo | None:
    """'owner/name' and the web host of a GitHub remote URL, or None."""
    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http", "ssh", "git", "git+ssh", "ssh+git"):
            return None
        host = parts.hostname or ""
        scheme = parts.scheme
        port = f":{parts.port}" if scheme in ("https", "http") and parts.port else ""
        web = f"{'http' if scheme == 'http' else 'https'}://{_web_host(host)}{port}"
        repo_path = parts.path
    else:
        match = re.fullmatch(r"(?:[^@/]+@)?([^:/]+):(.+)", url)
        if not match:
            return None
        host, repo_path = match.groups()
        web = f"https://{_web_host(host)}"
    repo_path = repo_path.strip("/").removesuffix(".git")
    is_wiki = repo_path.endswith(".wiki")
    repo_path = repo_path.removesuffix(".wiki")
    if not host or repo_path.count("/") != 1:
        return None
    try:
        repo = parse_repo(repo_path)
    except ConfigError:
        return None
    return RemoteRepo(repo=repo, web_url=web, is_wiki=is_wiki)


def _web_host(host: str) -> str:
    host = host.lower()
    return "github.com" if host in ("ssh.github.com", "www.github.com") else host


def _redact(url: str) -> str:
    """A URL without the credentials a CI checkout may embed in it."""
    return re.sub(r"://[^/@]*@", "://***@", url)
