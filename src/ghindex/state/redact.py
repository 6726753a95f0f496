"""Secrets out of everything ghindex stores.

People paste credentials into issues, comments, diffs and docs, and a snapshot is
copied to buckets, CI artifacts and agents' machines. So text is redacted once, at
ingestion, before it is written to `state.duckdb` (`state/rows.py` calls `scrub_rows`
for every row it writes): the index, `show`, the MCP tools, SQL, exports and the
report only ever see redacted text. A redaction is a visible marker that keeps the
kind, `[redacted:github-token]`.

Detectors, in order:

1. ghindex's own rules for what must be found whole or that the library lacks:
   private-key blocks (PEM and OpenSSH, fenced or not, also with JSON's `\\n`
   escapes, found before any splitting), GitHub's classic, fine-grained and app
   tokens, OpenAI project and Anthropic keys, Slack webhooks, AWS secret keys in
   env/JSON/YAML/INI form, GCP key ids, Azure shared access keys, Stripe test keys,
   npm tokens, and values assigned to names that say they are secret
   (`DB_PASSWORD=…`, `"api_key": "…"`).
2. The regular-expression plugins of Yelp's `detect-secrets` (AWS, Azure storage,
   basic-auth URLs, Discord, GitHub, GitLab, JWT, Mailchimp, npm, OpenAI, PyPI,
   SendGrid, Slack, Square, Stripe, Telegram, Twilio, Artifactory). Its entropy and
   keyword plugins are left out: measured on real commits and docs they flag SHAs,
   checksums and prose (bench/bench_redact.py).

Spans found by several detectors are merged and replaced once, so redacting is
idempotent: a marker matches no rule. Counts per kind are tallied for the run
(`tally`), never the secrets themselves.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

# Bump when the rules change: stored text is then redacted again (`state/redaction.py`).
RULES_VERSION = 2
MARKER = re.compile(r"\[redacted:([a-z0-9-]+)\]")

# Text columns of each table, as ingestion writes them.
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "repos": ("description",),
    "issues": ("title", "body"),
    "pull_requests": ("title", "body"),
    "discussions": ("title", "body"),
    "comments": ("body",),
    "reviews": ("body",),
    "review_comments": ("body", "diff_hunk"),
    "releases": ("name", "body"),
    "milestones": ("title",),
    "labels": ("description",),
    "docs": ("title", "body"),
    "commits": ("subject", "message"),
    "commit_files": ("patch",),
}

# Values that are examples, not credentials: `password="password123"`,
# `https://user:pass@host`, `secret: xxxxxxxx`. Checked for assigned values and URL
# passwords, whose formats say nothing else about them.
_PLACEHOLDERS = re.compile(
    r"(?i)^(?:.{0,3}|(.)\1*|pass|pwd)$|example|placeholder|passw|ssword|secret|dummy|changeme"
    r"|your|xxx|\*\*\*"
    r"|redacted|sample|fake|foobar|\$\{|\{\{|%\(|<"
)

# Key blocks are found by `_key_blocks` (linear time, whatever the text), the rest by
# patterns.
_KEY_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# Without an END (cut off, or split from it): the key's own lines, and no further.
_KEY_LINES = re.compile(
    r"(?:(?:\\n|\r?\n)[ \t]*(?:[A-Za-z0-9+/=]{8,}|(?:Proc-Type|DEK-Info|Comment):[^\n\\]*))*"
)
_KEY_SPAN = 64_000  # far longer than any key block: an END further on is another's

# (kind, pattern, group): `group` names the part to replace (0: the whole match).
_OWN_RULES: list[tuple[str, re.Pattern[str], int]] = [
    (
        "github-token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
        0,
    ),
    ("openai-key", re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}"), 0),
    ("anthropic-key", re.compile(r"\bsk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_-]{60,}"), 0),
    (
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+"),
        0,
    ),
    (
        "aws-secret-key",
        re.compile(
            r"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?"
            r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
    ),
    ("gcp-key-id", re.compile(r"\"private_key_id\"\s*:\s*\"([a-f0-9]{40})\""), 1),
    (
        "azure-key",
        re.compile(
            r"(?i)(?:SharedAccessKey|AccountKey|SharedAccessSignature)=([A-Za-z0-9+/=%]{20,})"
        ),
        1,
    ),
    ("stripe-key", re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"), 0),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), 0),
]

# NAME = value / "name": "value" / name: value, where the name says it is secret: the
# name is matched whole and bounded (no backtracking over long runs of name
# characters), then checked for a secret word in Python; the value only is replaced.
# A value must look generated (letters and digits, 8+) to count: prose such as
# `password: required`, code (`token = settings.TOKEN`), paths and plain URLs are left.
_ASSIGNED = re.compile(  # a lookahead, so that `used: DB_PASSWORD=…` is seen at both names
    r"(?<![A-Za-z0-9_.-])(?=([A-Za-z0-9_.-]{1,64})[\"']?[ \t]*(?::=|=>|[:=])[ \t]*[\"']?"
    r"(?!\[redacted:)([^\s\"'`,;#<>(){}\[\]]{8,200})(?![(\[.\w]))"
)
_SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|client[_-]?secret|auth|credentials?)(?:$|[_.-])"
)
_NOT_A_VALUE = re.compile(r"^(?:[~./]|[a-z][a-z0-9+.-]*://(?![^/@]+@))", re.I)

# detect-secrets plugins used, with the kind each marks.
_LIBRARY_KINDS = {
    "AWSKeyDetector": "aws-key",
    "ArtifactoryDetector": "artifactory-token",
    "AzureStorageKeyDetector": "azure-key",
    "BasicAuthDetector": "url-password",
    "DiscordBotTokenDetector": "discord-token",
    "GitHubTokenDetector": "github-token",
    "GitLabTokenDetector": "gitlab-token",
    "JwtTokenDetector": "jwt",
    "MailchimpDetector": "mailchimp-key",
    "NpmDetector": "npm-token",
    "OpenAIDetector": "openai-key",
    "PypiTokenDetector": "pypi-token",
    "SendGridDetector": "sendgrid-key",
    "SlackDetector": "slack-token",
    "SquareOAuthDetector": "square-secret",
    "StripeDetector": "stripe-key",
    "TelegramBotTokenDetector": "telegram-token",
    "TwilioKeyDetector": "twilio-key",
}

_tally: ContextVar[Counter[str] | None] = ContextVar("ghindex_redactions", default=None)
_enabled: ContextVar[bool] = ContextVar("ghindex_redaction_enabled", default=True)


@contextmanager
def tally(enabled: bool = True) -> Iterator[Counter[str]]:
    """Within the block, count redactions per kind (and switch redaction off with
    `enabled=False`, the `redact = false` setting)."""
    counts: Counter[str] = Counter()
    counting = _tally.set(counts)
    switch = _enabled.set(enabled)
    try:
        yield counts
    finally:
        _tally.reset(counting)
        _enabled.reset(switch)


def enabled() -> bool:
    return _enabled.get()


def find(text: str) -> list[tuple[int, int, str]]:
    """Every secret-looking span of `text` as (start, end, kind), merged, in order."""
    spans: list[tuple[int, int, str]] = _key_blocks(text)
    for kind, pattern, group in _OWN_RULES:
        for match in pattern.finditer(text):
            start, end = match.span(group)
            if end > start:
                spans.append((start, end, kind))
    for match in _ASSIGNED.finditer(text):
        name, value = match.group(1), match.group(2)
        words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)  # accessToken: access_Token
        if (
            _SECRET_NAME.search(words)
            and re.search(r"\d", value)
            and re.search(r"[A-Za-z]", value)
            and not _NOT_A_VALUE.search(value)
            and not _PLACEHOLDERS.search(value)
        ):
            spans.append((*match.span(2), "secret"))
    for kind, detector in _library():
        valid = set(detector.analyze_string(text))
        if not valid:
            continue
        for regex in detector.denylist:
            for match in regex.finditer(text):
                if _secret_of(match) not in valid and match.group(0) not in valid:
                    continue
                start, end = _value_span(match)
                if kind == "url-password" and _PLACEHOLDERS.search(text[start:end]):
                    continue
                spans.append((start, end, kind))
    return _merge(spans)


def redact(text: str) -> str:
    """`text` with every secret-looking span replaced by `[redacted:<kind>]`."""
    if not text or not _enabled.get():
        return text
    spans = find(text)
    if not spans:
        return text
    counts = _tally.get()
    pieces, last = [], 0
    for start, end, kind in spans:
        pieces += [text[last:start], f"[redacted:{kind}]"]
        last = end
        if counts is not None:
            counts[kind] += 1
    pieces.append(text[last:])
    return "".join(pieces)


def scrub_rows(table: str, rows: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """`rows` for `table` with their text columns redacted (new dicts, when needed)."""
    columns = TEXT_COLUMNS.get(table)
    if not columns or not _enabled.get():
        return rows
    scrubbed = []
    for row in rows:
        changed = {c: redact(row[c]) for c in columns if isinstance(row.get(c), str)}
        scrubbed.append({**row, **changed} if changed else row)
    return scrubbed


def _key_blocks(text: str) -> list[tuple[int, int, str]]:
    """Private-key blocks, BEGIN to END (or to the end of the key's lines), found in
    one pass: each END is searched for once, however many BEGINs there are."""
    blocks: list[tuple[int, int, str]] = []
    end: re.Match[str] | None = None
    no_end_after = len(text) + 1  # no END anywhere from here on: never searched again
    covered = 0
    for begin in _KEY_BEGIN.finditer(text):
        if begin.start() < covered:
            continue
        if end is not None and end.start() < begin.end():
            end = None
        if end is None and begin.end() < no_end_after:
            end = _KEY_END.search(text, begin.end())
            if end is None:
                no_end_after = begin.end()
        if end is not None and end.start() - begin.end() <= _KEY_SPAN:
            stop = end.end()
        else:
            stop = _KEY_LINES.match(text, begin.end()).end()
        blocks.append((begin.start(), stop, "private-key"))
        covered = stop
    return blocks


@cache
def _library() -> list[tuple[str, Any]]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    by_name = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
    return [(kind, by_name[name]()) for name, kind in _LIBRARY_KINDS.items() if name in by_name]


def _secret_of(match: re.Match[str]) -> str:
    groups = [g for g in match.groups() if g]
    return groups[0] if groups else match.group(0)


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """The part of a library match to replace: a trailing group (the password of
    `https://user:pw@host`, a quoted key) when there is one, else the whole match."""
    for index in range(len(match.groups()), 0, -1):
        start, end = match.span(index)
        if end > start and match.end() - end <= 1:
            return start, end
    return match.span()


def _merge(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans as one, keeping the kind of the one that starts first (the
    longest when two start together)."""
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            merged[-1] = (last_start, max(last_end, end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged
