"""ghindex's own secret rules: the structure of where a credential sits, which no
provider's pattern sees, and the few provider formats the library misses.

The provider formats (hundreds of prefixes, kept up to date by their maintainers) come
from the detector library (`state/secret_library.py`), the few it misses from
`state/secret_formats.py`. What is here finds credentials by where they are, whatever
their alphabet:

- key material, whole: PEM/OpenSSH blocks (also with JSON's `\\n` escapes), PuTTY key
  files, and base64 of any text that holds a secret (a kubeconfig's `client-key-data`,
  a base64-encoded AWS credentials file, a Kubernetes secret's `data:`);
- `Authorization:` headers, whatever the scheme and value;
- the password (or a token in the user part) of a URL of any scheme;
- values assigned to a name that says it is secret, in every form people paste:
  `NAME=value`, `NAME: value`, `"name": "value"`, `--password value`,
  `<password>value</password>`, `.netrc`'s `login x password y`;
- an AWS secret key written near the words that name it, in prose.

Every rule here is linear in the text (bounded repetitions, no nested quantifiers over
the same characters; `bench/bench_redact.py` times hostile text).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ghindex.state import secret_commands, secret_formats
from ghindex.state.secret_values import (
    CODE_VALUE,
    PLACEHOLDERS,
    a_value,
    decoded_hex,
    decoded_text,
    example_basic,
    generated,
    mixed_case_token,
    user_password,
)

Span = tuple[int, int, str]

# ------------------------------------------------------------------ key material

# PEM and OpenSSH armour (`-----BEGIN … PRIVATE KEY-----`) and the SSH2 layout of RFC 4716
# that ssh.com's and older PuTTY's tools write (`---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----`).
_KEY_BEGIN = re.compile(r"-{4,5} ?BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_KEY_END = re.compile(r"-{4,5} ?END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}")
# Without an END (cut off, or split from it): the key's own lines, and no further: base64,
# and headers (`Proc-Type:`, `DEK-Info:`, RFC 4716's `Comment:`, `x-…:`, continued by `\`).
_KEY_LINES = re.compile(
    r"(?:(?:\\n|\r?\n)[ \t+>]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z][A-Za-z0-9-]{0,63}:[^\n\\]*"
    r"(?:\\\r?\n[^\n\\]*){0,16}))*"
)
_KEY_SPAN = 64_000  # far longer than any key block: an END further on is another's


def key_blocks(text: str) -> list[Span]:
    """Private-key blocks, BEGIN to END (or to the end of the key's lines), found in
    one pass: each END is searched for once, however many BEGINs there are."""
    blocks: list[Span] = []
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


# PuTTY's key file format (the PuTTY manual, appendix C "PPK file format"): a header
# line, then `Public-Lines`, `Private-Lines` and `Private-MAC`. Everything from the
# header to the MAC is taken: the private lines are the key, the MAC checks them.
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d{1,2}:")
_PUTTY_END = re.compile(r"Private-MAC:[ \t]*[0-9A-Fa-f]{16,128}")
_PUTTY_SPAN = 16_000


def putty_keys(text: str) -> list[Span]:
    spans: list[Span] = []
    covered = 0
    for begin in _PUTTY.finditer(text):
        if begin.start() < covered:
            continue
        end = _PUTTY_END.search(text, begin.end(), begin.end() + _PUTTY_SPAN)
        stop = end.end() if end else _lines_after(text, begin.end())
        spans.append((begin.start(), stop, "private-key"))
        covered = stop
    return spans


_PUTTY_LINES = re.compile(r"[^\n]*(?:\r?\n[ \t>]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]{3,20}:[^\n]*))*")


def _lines_after(text: str, at: int) -> int:
    return _PUTTY_LINES.match(text, at, at + _PUTTY_SPAN).end()


# A run of base64 or hexadecimal long enough to carry a credential. Its decoded text is
# scanned with every rule (one level deep); a finding there redacts the whole run.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,65536}={0,2}")
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{24,65536}+")  # whole runs: a shorter one is never matched


_GLUED = re.compile(r"[+/_-]+|.*/")  # a diff's `+`, a path's `dir/` before the base64


def encoded(text: str, find: Callable[[str], list[Span]]) -> list[Span]:
    """Base64 and hex runs whose decoded text holds a secret (`find` on the decoded
    text): a credentials file, a `user:password`, a bare token written as base64."""
    spans: list[Span] = []
    runs = [
        (m, "base64", decoded_text(m.group(0), words=False)) for m in _BASE64_RUN.finditer(text)
    ]
    runs += [(m, "hex", decoded_hex(m.group(0))) for m in _HEX_RUN.finditer(text)]
    for match, encoding, decoded in runs:
        start, end = match.span()
        if decoded is None and encoding == "base64":  # glued on: `fix/<base64>`, `+<base64>`
            glued = _GLUED.match(match.group(0))
            if glued is not None and glued.end() < len(match.group(0)):
                start += glued.end()
                decoded = decoded_text(text[start:end], words=False)
        if decoded is None:
            continue
        if found := find(decoded):
            spans.append((start, end, f"{encoding}-{found[0][2]}"))
        elif user_password(decoded):  # Basic auth's and Docker's `auth`: user:password
            spans.append((start, end, f"{encoding}-password"))
    return spans


# ------------------------------------------------------------------ where it sits

# Words a pattern cannot match without (lower case). A text with none of them is not
# searched with that pattern at all: a substring test is far cheaper than a regex pass.
_NEEDLES: dict[re.Pattern[str], tuple[str, ...]] = {}


def _finditer(pattern: re.Pattern[str], text: str, lower: str):
    needles = _NEEDLES.get(pattern)
    if needles and not any(n in lower for n in needles):
        return iter(())
    return pattern.finditer(text)


# `Authorization: <scheme> <credentials>` (RFC 9110, section 11.6.2), also as
# `-H "Authorization: ..."` in curl, `'Authorization': '...'` in code, and
# `Proxy-Authorization`. The credentials are replaced, whatever the scheme.
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:bearer|basic|token|bot|digest|negotiate|ntlm|apikey|api-key|key|sso-key|hmac|otp"
    r"|gitlab-ci-token|aws4-hmac-sha256|splunk|ssws|klaviyo-api-key|dsn|zoho-oauthtoken)"
    r"[ \t]+)?([^\s\"'`]{8,4096}(?:[ \t]*,[ \t]*[A-Za-z]+=[^\s\"'`,]{1,512}){0,12})"
)


def auth_headers(text: str) -> list[Span]:
    spans = []
    lower = text.lower()
    for match in _finditer(_AUTH_HEADER, text, lower):
        value = match.group(1)
        if PLACEHOLDERS.search(value) or CODE_VALUE.search(value) or example_basic(value):
            continue
        spans.append((*match.span(1), "authorization"))
    return spans


# `scheme://user:password@host` for any scheme (RFC 3986 userinfo): redis, amqp,
# mongodb+srv, postgres, mysql, https, ftp, smtp, ldap, ... The password is replaced;
# so is a user part that is itself a token (`https://<token>@host`).
_URL_USERINFO = re.compile(
    r"(?i)\b[a-z][a-z0-9+.-]{0,30}://([^\s:/?#@\"'<>\\\[\]]{0,256}):"
    r"([^\s/?#@\"'<>\\]{1,4096}+)@(?=[A-Za-z0-9\[])"
)
_URL_TOKEN_USER = re.compile(
    r"(?i)\b[a-z][a-z0-9+.-]{0,30}://([A-Za-z0-9_.~-]{24,256})@(?=[A-Za-z0-9\[])"
)


def url_credentials(text: str) -> list[Span]:
    spans = []
    lower = text.lower()
    for match in _finditer(_URL_USERINFO, text, lower):
        if not PLACEHOLDERS.search(match.group(2)):
            spans.append((*match.span(2), "url-password"))
    for match in _finditer(_URL_TOKEN_USER, text, lower):
        user = match.group(1)
        if generated(user) and not PLACEHOLDERS.search(user):
            spans.append((*match.span(1), "url-token"))
    return spans


# NAME = value / "name": "value" / name: value / --name value / <name>value</name>,
# where the name says it is secret: the name is matched whole and bounded (no
# backtracking over runs of name characters), then checked for a secret word in
# Python; the value only is replaced. Quoted values may hold any character but the
# quote; bare ones run to white space or punctuation that ends a value.
# No length limit lets a long value through (an STS session token is 400 to 1,200
# characters): quoted values run to their quote whatever their length (a quoted run
# holds no other quote, so runs never overlap and the scan stays linear); a bare value
# is matched up to `_CAP` and run on to its end in Python (`_whole`), once per run.
_VALUE = (
    r"(?:\"([^\"\n]{6,65536}+)\"|'([^'\n]{6,65536}+)'"
    r"|`?(?!\[redacted:)([^\s\"'`,;<>(){}\[\]@]{6,400}+)(?![(\[@]))"
)
_CAP = 400
_BARE_TAIL = re.compile(r"[^\s\"'`,;<>(){}\[\]@]*")
_QUERY_TAIL = re.compile(r"[^&\s#\"'<>]*")
_ASSIGNED = re.compile(  # a lookahead, so that `used: DB_PASSWORD=…` is seen at both names
    r"(?<![A-Za-z0-9_.$-])(?=([A-Za-z0-9_.-]{1,64})[\"']?[ \t]*(?::=|=>|=|:)[ \t]*" + _VALUE + ")"
)
_FLAG = re.compile(r"(?<![A-Za-z0-9_-])--([A-Za-z0-9][A-Za-z0-9_-]{1,63})(?:=|[ \t]+)" + _VALUE)
_XML_ELEMENT = re.compile(r"<([A-Za-z][A-Za-z0-9_.:-]{0,63})>([^<>\n]{6,65536}+)</\1>")
# `.netrc` (GNU inetutils' netrc(5)): `machine h login u password p`, on one line or several.
_NETRC = re.compile(
    r"(?i)\b(?:login|user)[\s+>]{1,64}\S{1,256}[\s+>]{1,64}password[ \t]{1,64}(\S{4,65536}+)"
)
# A secret-named key and its value handed over together, in code: PHP's
# `define('DB_PASSWORD', '…')`, `os.environ["TOKEN"] = "…"`, `setenv("API_KEY", "…")`,
# `System.setProperty("db.password", "…")`, `$_ENV['SECRET'] = '…'`, `config.set(…)`.
_KEYED = re.compile(
    r"[(\[][ \t]*[\"']([A-Za-z0-9_.:-]{1,64})[\"'][ \t]*(?:\][ \t]*=|,)[ \t]*[@$]?"
    r"(?:\"([^\"\n]{1,4096}+)\"|'([^'\n]{1,4096}+)')"
)
# An element whose attributes name a secret and give its value, in any order: .NET's
# `<add key="SmtpPassword" value="…"/>`, Spring's `<property name="password" value="…"/>`,
# `<param name="apiKey" value="…">`, PHPUnit's `<env name="API_TOKEN" value="…"/>`, and
# `<entry key="password">…</entry>`.
_TAG = re.compile(r"<[A-Za-z][\w.:-]{0,63}[ \t\r\n]([^<>]{1,2000}+)>(?:([^<>\n]{1,4096}+)</)?")
_ATTRIBUTE = re.compile(r"([A-Za-z][\w.:-]{0,63})[ \t\r\n]*=[ \t\r\n]*(?:\"([^\"]*)\"|'([^']*)')")
_NAMING = frozenset({"key", "name", "id", "property", "param", "setting", "variable", "for"})
_GIVING = frozenset({"value", "content", "defaultvalue", "serializeas"})

# PostgreSQL's password file (docs, "The Password File"): host:port:database:user:password.
_PGPASS = re.compile(
    r"(?<![A-Za-z0-9_.*:@-])[A-Za-z0-9_.*-]{1,253}:(?:[0-9]{1,5}|\*):[^:\s/@]{1,64}:"
    r"[^:\s/@]{1,64}:([^:\s]{6,65536}+)(?![^\s])"
)
# Dockerfile's older `ENV NAME value` form (Dockerfile reference, ENV).
_DOCKER_ENV = re.compile(
    r"(?<![A-Za-z0-9_])ENV[ \t]+([A-Za-z_][A-Za-z0-9_]{0,63})[ \t]+([^\s=\"'`]{6,65536}+)"
)
# A command given the credential as its argument: `cargo login <token>`, `snyk auth
# <token>`, `ngrok config add-authtoken <token>`, `bitcoin-cli importprivkey <key>`.
_COMMAND_ARG = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(?:login|auth|authtoken|add-authtoken|importprivkey|set[ \t]+token)"
    r"[ \t]+([A-Za-z0-9_.~+/=-]{16,65536}+)"
)
# `auth=("user", "password")`: requests' and httpx's basic-auth tuples.
_AUTH_TUPLE = re.compile(
    r"\bauth\s*=\s*\(\s*['\"][^'\"\n]{1,200}['\"]\s*,\s*['\"]([^'\"\n]{6,65536}+)['\"]\s*\)"
)
# Query parameters that carry a credential: SAS and signed URLs' `sig`/`Signature`,
# Azure Functions' `code`, OAuth's `access_token`, `key`, `token`, `password`.
_QUERY = re.compile(
    r"(?i)[?&](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token|code|key|api_?key|token|access_token|refresh_token|id_token|auth|password|passwd|secret|client_secret)=([^&\s#\"'<>]{16,2048}+)"
)

_SECRET_WORD = re.compile(
    r"(?i)(?:^|[_.-])(?:password|passwd|passphrase|pwd|pass|secret|secrets|token|tokens"
    r"|api[_-]?key|apikey|api[_-]?token|access[_-]?key|secret[_-]?key|private[_-]?key"
    r"|client[_-]?secret|authtoken|authkey|auth[_-]?key|credentials?|creds|bearer|sas|dsn"
    r"|pat|app[_-]?key|master[_-]?key|account[_-]?key|sdk[_-]?key|server[_-]?key"
    r"|insert[_-]?key|signing[_-]?key|encryption[_-]?key"
    r"|connection[_-]?string|conn[_-]?str)(?:$|[_.-])"
)
# Names that mention a secret but hold something else: where it is, what it is called,
# how long it lives.
_NOT_SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:file|path|dir|url|uri|endpoint|stdin|env|name|names|type|length|len"
    r"|size|count|id|ids|header|prefix|suffix|format|mode|policy|required|expires?|expiry"
    r"|expiration|ttl|timeout|hint|field|param|var|variable|ref|source|store|provider|method"
    r"|scheme|version|hash|hashed|digest|algorithm|alg|fingerprint|pattern|regex|label"
    r"|description|help|limit|max|min|enabled|disabled|required|optional|public|pub|location"
    r"|region|host|port|user|username|email|login|account|scope|scopes|rotation|keyring)$"
)


def assignments(text: str) -> list[Span]:
    spans = []
    lower = text.lower()
    for pattern in (_ASSIGNED, _FLAG):
        reach = 0
        for match in _finditer(pattern, text, lower):
            group = next(g for g in (2, 3, 4) if match.group(g) is not None)
            if match.start(group) < reach:
                continue  # inside a long value already taken whole
            if _secret_name(match.group(1)) and a_value(match.group(group), match.group(1)):
                span = _whole(text, match.span(group), _BARE_TAIL)
                spans.append((*span, "secret"))
                reach = span[1]
    for match in _finditer(_XML_ELEMENT, text, lower):
        if _secret_name(match.group(1)) and a_value(match.group(2), match.group(1)):
            spans.append((*match.span(2), "secret"))
    for match in _finditer(_KEYED, text, lower):
        group = 2 if match.group(2) is not None else 3
        if _secret_name(match.group(1)) and a_value(match.group(group), match.group(1)):
            spans.append((*match.span(group), "secret"))
    for match in _finditer(_TAG, text, lower):
        spans += _tag_secret(match)
    for pattern in (_NETRC, _PGPASS, _AUTH_TUPLE):
        for match in _finditer(pattern, text, lower):
            value = match.group(1)
            strict = pattern is not _NETRC  # a bare tuple or line: only a generated value
            if a_value(value, "password") and (
                not strict or (generated(value) and len(value) >= 10)
            ):
                spans.append((*match.span(1), "secret"))
    for match in _finditer(_DOCKER_ENV, text, lower):
        if _secret_name(match.group(1)) and a_value(match.group(2), match.group(1)):
            spans.append((*match.span(2), "secret"))
    for pattern in (_COMMAND_ARG, _QUERY):
        reach = 0
        for match in _finditer(pattern, text, lower):
            value = match.group(1)
            if match.start(1) >= reach and generated(value) and not PLACEHOLDERS.search(value):
                span = match.span(1)
                if pattern is _QUERY:
                    span = _whole(text, span, _QUERY_TAIL, 2048)
                spans.append((*span, "secret"))
                reach = span[1]
    return spans


def _whole(
    text: str, span: tuple[int, int], tail: re.Pattern[str], cap: int = _CAP
) -> tuple[int, int]:
    """`span`, run on to the end of its value when the pattern stopped at its cap."""
    start, end = span
    return (start, tail.match(text, end).end()) if end - start >= cap else span


def _tag_secret(match: re.Match[str]) -> list[Span]:
    """The value an element's attributes (or its text) give to a secret it names."""
    named, given = False, None
    for attribute in _ATTRIBUTE.finditer(match.group(1)):
        group = 2 if attribute.group(2) is not None else 3
        name = attribute.group(1).lower()
        if name in _NAMING and _secret_name(attribute.group(group)):
            named = attribute.group(group)
        elif name in _GIVING:
            given = attribute.span(group)
    at = match.start(1)
    where = (given[0] + at, given[1] + at) if given else match.span(2)
    if not named or where[0] < 0:
        return []
    value = match.string[where[0] : where[1]]
    return [(*where, "secret")] if a_value(value, named) else []


# A public key, or a .NET assembly's `PublicKeyToken`, is published on purpose.
_PUBLIC = re.compile(r"(?i)(?:^|[_.-])(?:public|pub)(?:$|[_.-])")


def _secret_name(name: str) -> bool:
    if name == "_auth":  # npm's `.npmrc`: base64 of user:password
        return True
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip("-"))  # accessToken: access_Token
    return (
        bool(_SECRET_WORD.search(words))
        and not _NOT_SECRET_NAME.search(words)
        and not _PUBLIC.search(words)
    )


# An AWS secret access key in prose ("the aws secret key is …"): 40 characters of
# base64 within a short distance after words that name it (AWS's "Managing access keys":
# the secret access key is 40 characters). With no such words, 40 characters of base64
# are as likely a hash or a path.
_AWS_PROSE = re.compile(
    r"(?i)\b(?:aws|amazon|iam)\b[^\n]{0,40}?\bsecret\b[^\n]{0,60}?"
    r"(?<![A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)


# A credential named in a sentence: "the root password on staging is now <value>",
# "I set the API token to <value>". The value must look generated and mix cases (a
# commit hash or a checksum, lower-case hex, does not count).
_NAMED_IN_PROSE = re.compile(
    r"(?i)\b(?:password|passphrase|passwd|secret|token|api[ _-]?key|access[ _-]?key"
    r"|credentials?)\b[^\n.!?;`]{0,48}?(?<![A-Za-z0-9_./+=-])([A-Za-z0-9_./+=~-]{12,65536}+)"
)


def prose(text: str) -> list[Span]:
    spans = []
    lower = text.lower()
    for match in _finditer(_AWS_PROSE, text, lower):
        value = match.group(1)
        if generated(value) and not PLACEHOLDERS.search(value):
            spans.append((*match.span(1), "aws-secret-key"))
    for match in _finditer(_NAMED_IN_PROSE, text, lower):
        value = match.group(1)
        if (
            mixed_case_token(value)
            and not PLACEHOLDERS.search(value)
            and not CODE_VALUE.search(value)
        ):
            spans.append((*match.span(1), "secret"))
    return spans


_SECRET_WORDS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "cred",
    "bearer",
    "sas",
    "dsn",
    "conn",
    "pat",
    "sig",
)
_NEEDLES.update(
    {
        _AUTH_HEADER: ("authorization",),
        _URL_USERINFO: ("://",),
        _URL_TOKEN_USER: ("://",),
        _ASSIGNED: _SECRET_WORDS,
        _FLAG: ("--",),
        _XML_ELEMENT: ("</",),
        _KEYED: _SECRET_WORDS,
        _TAG: ("value=", "value =", "content=", "</"),
        _NETRC: ("password",),
        _PGPASS: (":",),
        _AUTH_TUPLE: ("auth",),
        _DOCKER_ENV: ("env",),
        _COMMAND_ARG: ("login", "auth", "importprivkey", "token"),
        _QUERY: ("=",),
        _AWS_PROSE: ("secret",),
        _NAMED_IN_PROSE: ("pass", "secret", "token", "key", "cred"),
    }
)


def own_spans(text: str) -> list[Span]:
    """Every span the rules of this module find (`encoded` is applied by the caller,
    which scans decoded text with the library too)."""
    return (
        key_blocks(text)
        + putty_keys(text)
        + secret_formats.tokens(text)
        + auth_headers(text)
        + url_credentials(text)
        + assignments(text)
        + prose(text)
        + secret_formats.wif_keys(text)
        + secret_commands.command_passwords(text)
        + secret_commands.code_passwords(text)
    )
