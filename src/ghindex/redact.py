"""Credentials out of the index.

Issue bodies, comments and diffs sometimes carry a pasted token or key. The state
database keeps the text as GitHub has it; what goes into the index (embedded and
full-text searchable, and copied into every snapshot) has anything that looks
like a credential replaced by `[REDACTED:<kind>]`. The patterns favour
precision: each matches a format a provider documents, or a quoted value assigned
to a name that says it is secret.
"""

from __future__ import annotations

import re

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
            r"(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
            re.S,
        ),
    ),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_\w{22,255})\b")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    (
        "aws-secret-key",
        re.compile(
            r"(?i)(aws.{0,20}?(?:secret|private).{0,20}?[=:]\s*['\"]?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
        ),
    ),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("stripe-key", re.compile(r"\b[sr]k_live_[0-9A-Za-z]{20,}\b")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}\b")),
    (
        "secret",
        re.compile(
            r"(?i)((?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
            r"[\"']?\s*[:=]\s*)([\"'])(?!\[REDACTED)[^\"'\s]{8,}\2"
        ),
    ),
]


def redact(text: str) -> str:
    """`text` with every credential-looking span replaced."""
    if not text:
        return text
    for kind, pattern in _PATTERNS:
        if kind in ("aws-secret-key", "secret"):
            text = pattern.sub(lambda m, k=kind: _keep_name(m, k), text)
        else:
            text = pattern.sub(f"[REDACTED:{kind}]", text)
    return text


def _keep_name(match: re.Match[str], kind: str) -> str:
    """Keep `password = "` and the closing quote, drop only the value."""
    prefix = match.group(1)
    quote = match.group(2) if kind == "secret" else ""
    return f"{prefix}{quote}[REDACTED:{kind}]{quote}"
