"""Settings: command-line flag > environment variable > ghindex.toml > default.

Secrets (the GitHub token) come only from the environment, never from the TOML
file or argv. GHINDEX_WORKDIR moves everything a run writes, so tests and CI can
point a whole run at a temporary directory.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ghindex.errors import ConfigError
from ghindex.vocabulary.layout import SnapshotFiles
from ghindex.vocabulary.limits import is_number

DEFAULT_GRAPHQL_URL = "https://api.github.com/graphql"
DEFAULT_WORKDIR = ".ghindex"
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# How vectors are computed: fp32 (the model as trained) or int8 (its weights quantised,
# ONNX Runtime only). One index holds one precision. A new index is int8 where ONNX
# Runtime can run the model on the CPU: hybrid recall@10 was the same as fp32's on every
# eval task and builds embed about twice as fast (bench/README.md). An index keeps the
# precision it was built with unless one is asked for.
FP32, INT8 = "fp32", "int8"
PRECISIONS = (FP32, INT8)
DEFAULT_PRECISION = INT8
DEVICES = ("auto", "cpu", "cuda")  # where a build embeds (index/onnx_encoder.py: place)
DEFAULT_DEVICE = "auto"
DEFAULT_MAX_WAIT = 3600.0  # seconds fetch may wait for a rate-limit reset
DEFAULT_KEEP = 10  # snapshots `gc` keeps
DEFAULT_SYNC_INTERVAL = 60.0  # seconds between `serve --store` checks of the store
CONFIG_FILE = "ghindex.toml"
STORES_CACHE = "stores"  # in cache_dir(): the copies reading commands pull (store_cache)


@dataclass(frozen=True)
class Variable:
    """One environment setting: its name, the kind of value it holds (what `env` reads it
    as), its default (None: none, or one worked out where it is used), what it means, and
    its `ghindex.toml` key when the file may set it too. `internal`: a hook for tests and
    benchmarks, not a user's setting (the README's table lists every other one)."""

    name: str
    kind: str  # text | path | secret | choice | whole | seconds | seconds_or_off
    default: object
    meaning: str
    key: str | None = None
    least: float = 0
    most: float | None = None
    choices: tuple[str, ...] = ()
    internal: bool = False


# Every GHINDEX_* variable ghindex reads: declared once, read through `env` (or, for
# those with a TOML key, `load_settings`); tests/test_docs.py holds the README to it.
ENVIRONMENT = {
    v.name: v
    for v in (
        Variable("GHINDEX_WORKDIR", "path", DEFAULT_WORKDIR, "local build directory", "workdir"),
        Variable(
            "GHINDEX_GRAPHQL_URL", "text", DEFAULT_GRAPHQL_URL, "GraphQL endpoint", "graphql_url"
        ),
        Variable("GHINDEX_STORE", "text", None, "snapshot store URL", "store"),
        Variable("GHINDEX_MODEL", "text", DEFAULT_MODEL, "embedding model", "model"),
        Variable("GHINDEX_PRECISION", "choice", None, "vectors a build makes", "precision"),
        Variable("GHINDEX_DEVICE", "choice", DEFAULT_DEVICE, "where a build embeds", "device"),
        Variable("GHINDEX_MAX_WAIT", "seconds", DEFAULT_MAX_WAIT, "rate-limit wait", "max_wait"),
        Variable("GHINDEX_SKIP_TYPES", "text", None, "types not indexed", "skip_types"),
        Variable("GHINDEX_CACHE_DIR", "path", None, "what ghindex can make again"),
        Variable("GHINDEX_ENCODER", "choice", "onnx", "how to embed", choices=("onnx", "torch")),
        Variable("GHINDEX_RERANK_MODEL", "text", None, "cross-encoder for --rerank"),
        Variable("GHINDEX_MCP_TOKEN", "secret", None, "bearer token of an HTTP server"),
        Variable(
            "GHINDEX_MCP_MAX_TOKENS",
            "whole",
            8_000,
            "tokens in one MCP answer",
            least=1_000,
            most=20_000,
        ),
        Variable("GHINDEX_INDEX_CACHE_MB", "whole", 1024, "LanceDB index cache", least=1),
        Variable("GHINDEX_SQL_MEMORY_MB", "whole", 512, "memory of a statement", least=1),
        Variable("GHINDEX_SQL_MAX_BYTES", "whole", 1_000_000, "bytes of an answer", least=1),
        Variable("GHINDEX_SQL_THREADS", "whole", 1, "cores of a statement", least=1),
        Variable("GHINDEX_SQL_TEMP_MB", "whole", 256, "temporary disk of one", least=1),
        Variable("GHINDEX_SQL_PROCESSES", "whole", 2, "statements running at once", least=1),
        Variable("GHINDEX_HTTP_RETRIES", "whole", 3, "retries of a failed request"),
        Variable("GHINDEX_RETRY_BASE_SECONDS", "seconds", 1.0, "first backoff delay"),
        Variable("GHINDEX_HTTP_DEADLINE", "seconds", None, "longest request, in all"),
        Variable("GHINDEX_HTTP_MAX_MB", "whole", 64, "largest answer, decompressed", least=1),
        Variable("GHINDEX_PROGRESS_SECONDS", "seconds_or_off", 10.0, "progress line interval"),
        Variable("GHINDEX_FAULT_TRACE", "path", None, "steps a test may kill at", internal=True),
        Variable("GHINDEX_FAULT_KILL_AT", "whole", None, "step to kill at", internal=True),
    )
}

# TOML key -> environment variable (None: the file only). A key absent here is an error
# in the file.
_TOML_ONLY = ("repos", "orgs", "include", "exclude", "archived", "forks", "keep")
_TOML_ONLY += ("min_comment_chars", "index_bots", "redact")
_ENV_FOR_KEY: dict[str, str | None] = {
    **{v.key: v.name for v in ENVIRONMENT.values() if v.key},
    **dict.fromkeys(_TOML_ONLY),
}


def env(name: str) -> Any:
    """The environment variable `name` (declared in ENVIRONMENT) as its kind reads it:
    its default when unset or blank; a value its kind refuses is one line naming it."""
    variable = ENVIRONMENT[name]
    raw = os.environ.get(name, "")
    text = raw.strip()
    kind = variable.kind
    if kind == "secret":  # as given: a blank one is a weak secret, refused where it is used
        return raw or variable.default
    if not text:
        return variable.default
    if kind == "text":
        return text
    if kind == "path":
        return Path(text).expanduser()
    if kind == "choice":
        choice = text.lower()
        if variable.choices and choice not in variable.choices:
            raise ConfigError(
                f"{name} must be one of {', '.join(variable.choices)}, not {_shown(text)}"
            )
        return choice
    if kind == "seconds_or_off" and text.lower() == "off":
        return None
    if kind in ("seconds", "seconds_or_off"):
        return _env_seconds(variable, text, kind == "seconds_or_off")
    return _env_whole(variable, text)


def _env_whole(variable: Variable, text: str) -> int:
    most = variable.most
    number = int(text) if is_number(text) and len(text) < 19 else None
    if number is None or number < variable.least or (most is not None and number > most):
        span = (
            f"from {variable.least:,.0f} to {most:,.0f}"
            if most is not None
            else f"of at least {variable.least:,.0f}"
        )
        raise ConfigError(f"{variable.name} must be a whole number {span}, not {_shown(text)}")
    return number


def _env_seconds(variable: Variable, text: str, off: bool) -> float:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not number >= variable.least or math.isinf(number):  # also refuses nan
        also = " or off" if off else ""
        raise ConfigError(
            f"{variable.name} must be a number of seconds ({variable.least:g} or more){also}, "
            f"not {_shown(text)}"
        )
    return number


def _shown(text: str) -> str:
    return repr(text[:40] + ("…" if len(text) > 40 else ""))


_SECRET_KEYS = {"token", "github_token", "gh_token", "password", "secret"}
_REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class RepoSelection:
    """Which repositories of an organisation `fetch --org` takes."""

    include: tuple[str, ...] = ()  # glob patterns on 'name' or 'owner/name'; empty: all
    exclude: tuple[str, ...] = ()
    archived: bool = False
    forks: bool = False

    def wants(self, node: dict[str, object]) -> bool:
        full = str(node["nameWithOwner"]).lower()
        names = (full, full.split("/", 1)[1])
        if node.get("isArchived") and not self.archived:
            return False
        if node.get("isFork") and not self.forks:
            return False
        if self.include and not any(fnmatch(n, p.lower()) for p in self.include for n in names):
            return False
        return not any(fnmatch(n, p.lower()) for p in self.exclude for n in names)


@dataclass(frozen=True)
class Settings(SnapshotFiles):
    workdir: Path
    graphql_url: str
    model: str
    store: str | None = None
    precision: str | None = None  # of the vectors a build makes; None: the index's own
    device: str = DEFAULT_DEVICE  # where a build embeds
    repos: tuple[str, ...] = field(default_factory=tuple)
    max_wait: float = DEFAULT_MAX_WAIT
    keep: int = DEFAULT_KEEP
    min_comment_chars: int = 20  # shorter comments and reviews are not indexed
    index_bots: bool = False  # index comments and reviews by bot accounts
    skip_types: tuple[str, ...] = ()  # document types kept in the state but not indexed
    orgs: tuple[str, ...] = ()
    select: RepoSelection = field(default_factory=lambda: RepoSelection())
    redact: bool = True  # secrets out of stored text (redact.py); false keeps the raw text

    @property
    def root(self) -> Path:
        """Where the workdir's current snapshot files are (see snapshot/local.py)."""
        from ghindex.vocabulary.layout import live_root

        return live_root(self.workdir)


def load_settings(config_path: str | Path | None = None, **flags: object) -> Settings:
    """Resolve settings. `flags` holds command-line values; None means "not given"."""
    file_values = _read_toml(config_path)

    def pick(key: str, default: object) -> object:
        if flags.get(key) not in (None, ()):
            return flags[key]
        env = _ENV_FOR_KEY.get(key)
        if env and os.environ.get(env):
            return os.environ[env]
        if key in file_values:
            return file_values[key]
        return default

    repos = pick("repos", ())
    if isinstance(repos, str) or not all(isinstance(r, str) for r in repos):
        raise ConfigError("repos must be a list of 'owner/name' strings")
    return Settings(
        workdir=Path(str(pick("workdir", DEFAULT_WORKDIR))).expanduser(),
        graphql_url=str(pick("graphql_url", DEFAULT_GRAPHQL_URL)),
        model=str(pick("model", DEFAULT_MODEL)),
        precision=_optional_choice(pick("precision", None), "precision", PRECISIONS),
        device=_choice(pick("device", DEFAULT_DEVICE), "device", DEVICES),
        store=(str(pick("store", "")) or None),
        repos=tuple(parse_repo(r) for r in repos),
        max_wait=_seconds(pick("max_wait", DEFAULT_MAX_WAIT)),
        keep=_count(pick("keep", DEFAULT_KEEP), "keep"),
        min_comment_chars=_count(pick("min_comment_chars", 20), "min_comment_chars", minimum=0),
        index_bots=_flag(pick("index_bots", False), "index_bots"),
        skip_types=_document_types(pick("skip_types", ()), "skip_types"),
        orgs=tuple(_strings(pick("orgs", ()), "orgs")),
        redact=_flag(pick("redact", True), "redact"),
        select=RepoSelection(
            include=tuple(_strings(pick("include", ()), "include")),
            exclude=tuple(_strings(pick("exclude", ()), "exclude")),
            archived=_flag(pick("archived", False), "archived"),
            forks=_flag(pick("forks", False), "forks"),
        ),
    )


def parse_repo(value: str) -> str:
    """Normalise 'owner/name' (also accepts a github.com URL); reject anything else."""
    text = value.strip().removesuffix("/").removesuffix(".git")
    for prefix in ("https://github.com/", "http://github.com/", "github.com/"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if not _REPO_RE.match(text):
        raise ConfigError(f"not a repository: {value!r}: use the form owner/name")
    return text


def _strings(value: object, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings")
    return list(value)


def _document_types(value: object, key: str) -> tuple[str, ...]:
    """Document type names, from a TOML list or a comma-separated environment value."""
    from ghindex.vocabulary.types import DOCUMENT_TYPES

    names = value.split(",") if isinstance(value, str) else _strings(value, key)
    chosen = [n.strip() for n in names if n.strip()]
    unknown = [n for n in chosen if n not in DOCUMENT_TYPES]
    if unknown:
        raise ConfigError(
            f"{key}: unknown document type {unknown[0]!r}: use some of {', '.join(DOCUMENT_TYPES)}"
        )
    return tuple(dict.fromkeys(chosen))


def _optional_choice(value: object, key: str, choices: tuple[str, ...]) -> str | None:
    return None if value is None or value == "" else _choice(value, key, choices)


def _choice(value: object, key: str, choices: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in choices:
        raise ConfigError(
            f"{key} must be one of {', '.join(choices)}, not {value!r} "
            f"(from --{key}, {_ENV_FOR_KEY[key]} or ghindex.toml)"
        )
    return text


def _count(value: object, key: str, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{key} must be a whole number of at least {minimum}, not {value!r}")
    return value


def _flag(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, not {value!r}")
    return value


def _seconds(value: object) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"max_wait must be a number of seconds, not {value!r}") from None
    if seconds < 0:
        raise ConfigError(f"max_wait must be 0 or more seconds, not {seconds:g}")
    return seconds


def cache_dir() -> Path:
    """Where ghindex keeps what it can make again (the ONNX export of the model, the
    secret detector's compiled rules, the copies reading commands pull from a store):
    GHINDEX_CACHE_DIR, else $XDG_CACHE_HOME/ghindex, default ~/.cache/ghindex."""
    given = env("GHINDEX_CACHE_DIR")
    if given is not None:
        return given
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ghindex"


def store_cache(store_key: str) -> Path:
    """Where a reading command (`search --store URL`, `sql`, `export`, …) keeps the
    copy it pulls of one store: CACHE/stores/<hash of the store's address>, one per
    store, so it never writes in the working directory or the workdir."""
    digest = hashlib.sha256(store_key.encode("utf-8")).hexdigest()[:16]
    return cache_dir() / STORES_CACHE / digest


def github_token() -> str:
    """The token for GitHub's API, from GITHUB_TOKEN or GH_TOKEN."""
    token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
    if not token or not token.strip():
        raise ConfigError(
            "GITHUB_TOKEN is not set: export a token with read access to the repositories "
            "(GH_TOKEN works too)"
        )
    return token.strip()


def _read_toml(config_path: str | Path | None) -> dict[str, object]:
    if config_path is None:
        path = Path(CONFIG_FILE)
        if not path.exists():
            return {}
    else:
        path = Path(config_path)
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    for key in values:
        if key.lower() in _SECRET_KEYS:
            raise ConfigError(
                f"{path}: secrets are never read from the config file ({key!r}): "
                "export GITHUB_TOKEN instead"
            )
        if key not in _ENV_FOR_KEY:
            known = ", ".join(sorted(_ENV_FOR_KEY))
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
    return values
