"""The maintained detector: provider credential formats from Kingfisher's rule set.

Kingfisher (`kingfisher-secret-scanner`, MongoDB's scanner, Apache-2.0) ships about 490
rules in the wheel: Betterleaks' (the maintained successor of Gitleaks' rule set) and
Google's Veles detectors, compiled with Vectorscan, scanned in-process, no network.
Chosen over credsweeper, betterleaks-py and detect-secrets by recall, false alarms and
speed measured side by side (`bench/bench_secret_candidates.py`, bench/README.md).

Only finding is used here: no validation, no revocation (both would send the secret to
its provider). Rules are compiled once per process; the compiled form is cached in
ghindex's own cache folder (`GHINDEX_CACHE`, default `~/.cache/ghindex`), never in the
library's default location.
"""

from __future__ import annotations

import bisect
import re
import threading
from functools import cache
from typing import Any

from ghindex.errors import GhindexError
from ghindex.state.secret_values import PLACEHOLDERS

Span = tuple[int, int, str]

# A scan of one text is bounded: text is cut into pieces far larger than any credential
# (with an overlap, so nothing is lost at a cut) and each piece has a deadline.
_PIECE = 1 << 20
_OVERLAP = 16_384
_DEADLINE_S = 30.0

_lock = threading.Lock()
# Some rules match a token's known part only (`xoxa-2-<id>` of a longer Slack token, a
# webhook URL less its last characters): a span runs on to the end of the token.
# Rules that match a credential by where it is rather than by its format: their match
# may be an example (`curl -u jerry:secret`, `http://user:pass@host`).
_GENERIC = re.compile(r"generic|password|passwd|auth-user|basic|curl|credential|uri|url")
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=-]*")
# Kingfisher's invisible findings help validate a visible one; these few are secrets
# themselves (an AWS secret access key is a helper of its key id).
_SECRET_HELPER = re.compile(r"secret|security-token|passphrase|ovh-(?:application|consumer)-key")


def rules_version() -> str:
    """The rule set's identity, recorded with what it redacted: a newer wheel with
    other rules means stored text is scanned again."""
    import kingfisher_sdk

    return f"kingfisher-{kingfisher_sdk.__version__}/{len(_scanner()[1])}"


def spans(text: str) -> list[Span]:
    """Provider credentials in `text` as (start, end, kind), character offsets."""
    if not text:
        return []
    found: list[Span] = []
    step = _PIECE - _OVERLAP
    for at in range(0, max(len(text) - _OVERLAP, 1), step):
        piece = text[at : at + _PIECE]
        found += [(at + s, at + e, k) for s, e, k in _piece_spans(piece)]
    return found


def _piece_spans(text: str) -> list[Span]:
    scanner, kinds = _scanner()
    data = text.encode("utf-8", "surrogatepass")
    try:
        findings = scanner.scan(data, timeout=_DEADLINE_S)
    except TimeoutError:  # never partial: the whole piece is refused instead
        return [(0, len(text), "unscanned")]
    if not findings:
        return []
    offsets = _char_offsets(text, data)
    out = []
    for finding in findings:
        if not finding.visible and not _SECRET_HELPER.search(finding.rule_id):
            continue  # a helper for validation: an account name, a host, a client id
        location = finding.location
        start, end = offsets(location["start_offset"]), offsets(location["end_offset"])
        kind = kinds.get(finding.rule_id) or _kind(finding.rule_id)
        if end > start and not (_GENERIC.search(kind) and _example(text[start:end])):
            out.append((start, _TOKEN_TAIL.match(text, end).end(), kind))
    return out


def _example(value: str) -> bool:
    """A generic rule's match that is an example value (`pass`, `password123`)."""
    return bool(PLACEHOLDERS.search(value))


def _char_offsets(text: str, data: bytes):
    """A map from UTF-8 byte offsets of `data` (which is `text` encoded) to character
    offsets of `text`."""
    if len(data) == len(text):
        return lambda offset: offset

    starts = [i for i, byte in enumerate(data) if byte & 0xC0 != 0x80]  # each char's first byte
    return lambda offset: bisect.bisect_left(starts, offset)


def _kind(rule_id: str) -> str:
    """`betterleaks.github-pat` -> `github-pat`; `veles.gcp.1` -> `gcp`."""
    name = rule_id.split(".", 1)[-1]
    name = re.sub(r"\.\d+$", "", name)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "secret"


@cache
def _scanner() -> tuple[Any, dict[str, str]]:
    with _lock:
        try:
            from kingfisher_sdk import Rules, Scanner
        except ImportError as exc:  # a broken install: say which package
            raise GhindexError(
                "the secret detector kingfisher-secret-scanner is not installed: "
                "reinstall ghindex (pip install ghindex)"
            ) from exc
        from ghindex.config import cache_dir

        folder = cache_dir() / "kingfisher"
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        rules = Rules(confidence="low", cache_dir=str(folder))
        kinds = {m["id"]: _kind(m["id"]) for m in rules.metadata()}
        return Scanner(rules, base64=False, dedup=False, redact=False), kinds
