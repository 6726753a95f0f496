"""Credential formats by shape: what the detector library (`state/secret_library.py`)
misses or finds only with a keyword nearby, each with the provider's documentation
cited, and a JWT's three parts as one. Found wherever they stand, whatever is around.
"""

from __future__ import annotations

import hashlib
import re

Span = tuple[int, int, str]

# ------------------------------------------------------------------ tokens by shape

# A JSON Web Token (RFC 7519): base64url header and payload, both JSON objects (`eyJ`
# is `{"`), and a signature. All three parts are one credential.
_JWT = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{4,16384}\.[A-Za-z0-9_-]{0,2048}"
    r"(?![A-Za-z0-9_-])"
)

# Formats the detector library misses, each from the provider's own description:
# An entry may name substrings one of which its matches always hold: a text without any
# is skipped (for patterns that cannot start with a literal).
_HEX_DASH_HEX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{8}(?![0-9a-f])")
_PROVIDER: list[
    tuple[str, re.Pattern[str]] | tuple[str, re.Pattern[str], tuple[str, ...] | re.Pattern[str]]
] = [
    # GitHub's tokens by prefix alone ("Behind GitHub's new authentication token
    # formats", GitHub blog, 2021-04-05; fine-grained `github_pat_`, 2022-10-18): the
    # library also wants the value to look random, and a token is a token whatever its
    # letters.
    (
        "github-token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])"
        ),
    ),
    # Hugging Face user access tokens: `hf_` and 34 letters (huggingface_hub's
    # `_is_valid_token` docs and the Hub's settings/tokens page); organisation API
    # tokens `api_org_` (the Hub's "Organization API tokens", deprecated but in use).
    (
        "huggingface-token",
        re.compile(r"(?<![A-Za-z0-9_])(?:hf|api_org)_[A-Za-z]{34}(?![A-Za-z0-9])"),
    ),
    # AWS access key ids: the prefixes of AWS's "Unique identifiers" table (IAM user
    # guide) and 16 upper-case letters or digits. The library wants base32 only.
    (
        "aws-access-key-id",
        re.compile(
            r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}(?![A-Z0-9])"
        ),
    ),
    # A Google service account key file's `private_key_id` (Google Cloud, "Create and
    # delete service account keys": the JSON key file's fields).
    ("gcp-key-id", re.compile(r"\"private_key_id\"\s*:\s*\"([a-f0-9]{40})\"")),
    # OpenAI project, service-account and admin keys (OpenAI API reference,
    # "Authentication"): the library wants the `T3BlbkFJ` marker of the older keys.
    ("openai-key", re.compile(r"(?<![A-Za-z0-9_-])sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}")),
    # Telegram bot tokens, `<bot id>:<35 characters>` (Telegram Bot API, "Authorizing
    # your bot"); the library wants the word "telegram" nearby.
    (
        "telegram-bot-token",
        re.compile(r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"),
    ),
    # Mailchimp API keys end in their data centre, `-us<N>` (Mailchimp Marketing API,
    # "Quick start"); the library wants the word "mailchimp" nearby.
    ("mailchimp-key", re.compile(r"(?<![0-9a-f])[0-9a-f]{32}-us[0-9]{1,2}(?![0-9])")),
    # The rest the library missed on the corpus, each from the provider's documentation:
    # Firebase Cloud Messaging legacy server keys ("Migrate from legacy FCM APIs").
    ("fcm-server-key", re.compile(r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,200}")),
    # Google Cloud Storage HMAC access ids ("HMAC keys": `GOOG1` + 56).
    ("gcs-hmac-key", re.compile(r"(?<![A-Z0-9])GOOG1[A-Z0-9]{50,60}(?![A-Z0-9])")),
    # Tencent Cloud SecretId ("API key management": `AKID` + 32).
    ("tencent-secret-id", re.compile(r"(?<![A-Za-z0-9])AKID[A-Za-z0-9]{32}(?![A-Za-z0-9])")),
    # Yandex OAuth tokens (`y0_`), IAM tokens (`t1.`) and API keys (`AQVN`) (Yandex Cloud
    # "Authentication" docs).
    (
        "yandex-token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:y[0-3]_[A-Za-z0-9_-]{50,}|t1\.[A-Za-z0-9_-]{60,}\.[A-Za-z0-9_-]{40,}|AQVN[A-Za-z0-9_-]{35,38})"
        ),
    ),
    # Tailscale keys (`tskey-<kind>-<id>-<secret>`, Tailscale "API keys" docs).
    (
        "tailscale-key",
        re.compile(r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}"),
    ),
    # HashiCorp Vault service, batch and recovery tokens (Vault "Tokens": `hvs.`, `hvb.`,
    # `hvr.`).
    ("vault-token", re.compile(r"(?<![A-Za-z0-9_.])hv[sbr]\.[A-Za-z0-9_-]{20,}")),
    # Doppler tokens (Doppler "Token formats": `dp.<kind>.` and 40-44 characters,
    # service tokens with the environment's name between).
    (
        "doppler-token",
        re.compile(
            r"(?<![A-Za-z0-9_.])dp\.(?:st|ct|pt|sa|scim|audit)\.(?:[a-z0-9_-]{2,35}\.)?[A-Za-z0-9]{40,44}"
        ),
    ),
    # crates.io API tokens (`cio` + 32, crates.io's "API tokens").
    ("crates-io-token", re.compile(r"(?<![A-Za-z0-9])cio[A-Za-z0-9]{32}(?![A-Za-z0-9])")),
    # JFrog Artifactory API keys (`AKCp` + 69) and reference tokens (`cmVmdGtu`).
    (
        "jfrog-token",
        re.compile(r"(?<![A-Za-z0-9])(?:AKCp[A-Za-z0-9]{60,80}|cmVmdGtu[A-Za-z0-9]{56,})"),
    ),
    # Discord bot tokens (Discord developer docs: base64 user id, timestamp, HMAC) and
    # webhook URLs (`/api/webhooks/<id>/<token>`).
    (
        "discord-token",
        re.compile(
            r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"
        ),
    ),
    (
        "discord-webhook",
        re.compile(
            r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,80}"
        ),
    ),
    # Zapier catch hooks ("Webhooks by Zapier": the URL is the credential).
    ("zapier-webhook", re.compile(r"https://hooks\.zapier\.com/hooks/catch/[0-9]+/[A-Za-z0-9]+/?")),
    # Microsoft Teams incoming webhooks (the URL is the credential).
    (
        "teams-webhook",
        re.compile(r"https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{40,}"),
    ),
    # Dropbox short-lived (`sl.`) and long-lived access tokens (11 characters, ten `A`,
    # 43 characters).
    (
        "dropbox-token",
        re.compile(
            r"(?<![A-Za-z0-9_.-])(?:sl\.[A-Za-z0-9_-]{130,}|[a-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_-]{43})"
        ),
    ),
    # Notion integration tokens: legacy `secret_` + 43, current `ntn_` (Notion API,
    # "Authorization").
    (
        "notion-token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{30,40})(?![A-Za-z0-9])"
        ),
    ),
    # Salesforce session ids / access tokens (org id `00D…`, `!`, the session).
    ("salesforce-token", re.compile(r"(?<![A-Za-z0-9])00D[A-Za-z0-9]{12,15}![A-Za-z0-9._]{80,}")),
    # LaunchDarkly SDK, mobile and API keys (`sdk-`, `mob-`, `api-` + a UUID).
    (
        "launchdarkly-key",
        re.compile(
            r"(?<![A-Za-z0-9-])(?:sdk|mob|api)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    # New Relic keys (`NRAK-`, `NRII-`, `NRJS-`, `NRAA-`, New Relic "API keys").
    ("newrelic-key", re.compile(r"(?<![A-Za-z0-9])NR(?:AK|II|JS|AA|IQ)-[A-Za-z0-9_-]{27,40}")),
    # Mapbox secret and public tokens (`sk.`/`pk.` + a JWT-like body).
    (
        "mapbox-token",
        re.compile(r"(?<![A-Za-z0-9])[sp]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
    ),
    # Square OAuth secrets and access tokens (`sq0csp-`, `sq0atp-`, `EAAA`).
    (
        "square-token",
        re.compile(
            r"(?<![A-Za-z0-9])(?:sq0(?:csp|atp)-[A-Za-z0-9_-]{22,43}|EAAA[A-Za-z0-9_-]{60})"
        ),
    ),
    # Razorpay key ids (`rzp_live_`, `rzp_test_` + 14).
    (
        "razorpay-key",
        re.compile(r"(?<![A-Za-z0-9])rzp_(?:live|test)_[A-Za-z0-9]{14}(?![A-Za-z0-9])"),
    ),
    # Amazon Bedrock long-term API keys (`ABSK` + base64, Bedrock "API keys" docs).
    ("aws-bedrock-key", re.compile(r"(?<![A-Za-z0-9+])ABSK[A-Za-z0-9+/]{80,300}={0,2}")),
    # Netlify personal access tokens (`nfp_`, Netlify "API" docs).
    ("netlify-token", re.compile(r"(?<![A-Za-z0-9_])nfp_[A-Za-z0-9]{36,40}(?![A-Za-z0-9])")),
    # Azure storage and Service Bus keys in connection strings (Azure "Configure Azure
    # Storage connection strings").
    (
        "azure-key",
        re.compile(
            r"(?i)(?:SharedAccessKey|AccountKey|SharedAccessSignature)=([A-Za-z0-9+/=%]{20,})"
        ),
    ),
    # RPC endpoints whose path is the project key (Alchemy `/v2/<key>`, Infura
    # `/v3/<id>`, their docs' "Endpoint URLs").
    ("rpc-key", re.compile(r"(?:alchemy\.com/v2|infura\.io/v3)/([A-Za-z0-9_-]{24,64})")),
    # Anthropic keys of every kind, `sk-ant-<kind><version>-` (API `api03`, admin
    # `admin01`, OAuth access `oat01` and refresh `ort01` tokens of Claude Code's
    # `setup-token`): the library finds some only beside the word "anthropic".
    (
        "anthropic-key",
        re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{32,}"),
    ),
    # AWS temporary credentials' session tokens (STS `GetSessionToken`/`AssumeRole`):
    # base64 of a serialised structure whose first bytes name its origin, `IQoJb3JpZ2lu`
    # ("origin") in current ones, `FwoGZXIvYXdz`/`FQoDYXdz` ("er/aws", "aws") in older;
    # 400 to 1,200 characters.
    (
        "aws-session-token",
        re.compile(r"(?:IQ|Ag|Fw|FQ)o[A-Z](?:b3JpZ2lu|ZXIvYXdz|YXdz)[A-Za-z0-9/+=]{80,}"),
        ("b3JpZ2lu", "YXdz"),
    ),
    # Microsoft Entra ID (Azure AD) client secrets: three characters, a digit, `Q~`, and
    # 31 to 34 more (the format since 2022, "Application credentials" in Entra docs).
    (
        "azure-ad-client-secret",
        re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"),
        ("Q~",),
    ),
    # PyPI and TestPyPI API tokens: `pypi-` and a macaroon whose base64 starts `AgE`
    # (PyPI help, "API tokens"): the library wants the pypi.org location in it.
    ("pypi-token", re.compile(r"(?<![A-Za-z0-9_-])pypi-AgE[A-Za-z0-9_-]{50,}")),
    # NuGet API keys: `oy2` and 43 lower-case letters or digits.
    ("nuget-key", re.compile(r"(?<![A-Za-z0-9])oy2[a-z0-9]{43}(?![A-Za-z0-9])")),
    # Mailgun private API keys: `key-` and 32 hex (older), 32 hex, `-`, 8 hex, `-`, 8 hex.
    ("mailgun-key", re.compile(r"(?<![A-Za-z0-9_-])key-[0-9a-f]{32}(?![A-Za-z0-9])")),
    (
        "mailgun-key",
        re.compile(r"(?<![A-Za-z0-9-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![A-Za-z0-9-])"),
        _HEX_DASH_HEX,
    ),
    # Linear API keys and OAuth tokens (`lin_api_`, `lin_oauth_`, Linear API docs).
    ("linear-token", re.compile(r"(?<![A-Za-z0-9_])lin_(?:api|oauth)_[A-Za-z0-9]{32,64}")),
    # Google OAuth 2.0 refresh tokens (`1//0` and base64url) and access tokens (`ya29.`).
    ("google-oauth-token", re.compile(r"(?<![A-Za-z0-9_-])1//0[A-Za-z0-9_-]{35,}")),
    ("google-oauth-token", re.compile(r"(?<![A-Za-z0-9_.-])ya29\.[A-Za-z0-9_-]{30,}")),
    # Twitter/X app-only bearer tokens: a run of `A`, then percent-encoded base64.
    (
        "twitter-bearer-token",
        re.compile(r"(?<![A-Za-z0-9%])A{20,24}[A-Za-z0-9]{0,40}%[0-9A-F]{2}[A-Za-z0-9%]{20,300}"),
        ("A" * 20,),
    ),
    # Stripe secret and restricted keys in live and test mode (`sk_test_` is a
    # credential of the account's test data; publishable `pk_` keys are public).
    (
        "stripe-key",
        re.compile(r"(?<![A-Za-z0-9_])[sr]k_(?:test|live)_[A-Za-z0-9]{20,247}"),
        ("k_test_", "k_live_"),
    ),
    # Algolia's JavaScript client, `algoliasearch(appId, apiKey)`.
    (
        "algolia-key",
        re.compile(r"algoliasearch\(\s*['\"][A-Z0-9]{10}['\"]\s*,\s*['\"]([a-f0-9]{32})['\"]"),
    ),
]


# A pattern that starts with a literal is found about 40 times faster by Python's `re`
# than one that starts with a look-behind, which runs at every position. So a leading
# `(?<![...])` is taken off each pattern and checked on the character before a match.
_LEADING_GUARD = re.compile(r"^\(\?<!\[((?:\\.|[^\]])*)\]\)")


def _fast(pattern: re.Pattern[str]) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    guard = _LEADING_GUARD.match(pattern.pattern)
    if guard is None:
        return pattern, None
    rest = pattern.pattern[guard.end() :]
    return re.compile(rest, pattern.flags), re.compile(f"[{guard.group(1)}]", pattern.flags)


_SEARCHES = [
    (kind, *_fast(pattern), needles[0] if needles else None)
    for kind, pattern, *needles in [("jwt", _JWT), *_PROVIDER]
]


def _holds(text: str, needles: tuple[str, ...] | re.Pattern[str]) -> bool:
    if isinstance(needles, re.Pattern):
        return needles.search(text) is not None
    return any(n in text for n in needles)


def tokens(text: str) -> list[Span]:
    spans = []
    for kind, pattern, not_after, needles in _SEARCHES:
        if needles is not None and not _holds(text, needles):
            continue
        group = 1 if pattern.groups else 0
        for match in pattern.finditer(text):
            at = match.start()
            if not_after is not None and at and not_after.match(text, at - 1):
                continue
            spans.append((*match.span(group), kind))
    return spans


# Bitcoin private keys in wallet import format (Bitcoin wiki, "Wallet import format"):
# base58check, so a candidate is kept only when its checksum holds.
_WIF = re.compile(
    r"(?<![1-9A-HJ-NP-Za-km-z])[5KL][1-9A-HJ-NP-Za-km-z]{50,51}(?![1-9A-HJ-NP-Za-km-z])"
)
_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def wif_keys(text: str) -> list[Span]:
    return [
        (m.start(), m.end(), "bitcoin-private-key")
        for m in _WIF.finditer(text)
        if _base58check(m.group(0))
    ]


def _base58check(value: str) -> bool:
    number = 0
    for char in value:
        number = number * 58 + _BASE58.index(char)
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    body, check = raw[:-4], raw[-4:]
    return len(raw) > 4 and hashlib.sha256(hashlib.sha256(body).digest()).digest()[:4] == check


# A secret access key written beside its key id, as AWS's console credentials CSV
# (`Access key ID,Secret access key`), `BasicAWSCredentials("AKIA…", "…")`, tables and
# `gsutil`'s HMAC keys (`GOOG1…` and its secret) do: 40 characters of base64 right after
# the id (or the marker an earlier redaction left in its place), with only a separator
# between, or the word "secret".
_AWS_PAIR = re.compile(
    r"(?:(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}|(?<![A-Z0-9])GOOG1[A-Z0-9]{50,60}"
    r"|\[redacted:(?:aws-access-key-id|gcs-hmac-key)\])"
    r"[\"']?(?:[ \t]*[,;|:][ \t]*|[ \t]+)"
    r"(?:secret(?:[ _-]?access)?(?:[ _-]?key)?[ \t]*[:=]?[ \t]*)?"
    r"[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_AWS_PAIR_NEEDLES = ("AKIA", "ASIA", "ABIA", "ACCA", "GOOG1", "[redacted:aws-access-key-id]")
_AWS_PAIR_NEEDLES += ("[redacted:gcs-hmac-key]",)


def aws_secret_pairs(text: str) -> list[Span]:
    """Secret access keys beside their key id (read before markers are masked)."""
    if not any(n in text for n in _AWS_PAIR_NEEDLES):
        return []
    return [
        (*m.span(1), "aws-secret-key")
        for m in _AWS_PAIR.finditer(text)
        if re.search(r"[0-9/+]", m.group(1)) and re.search(r"[a-z]", m.group(1))
    ]
