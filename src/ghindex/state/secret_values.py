"""What a credential's value looks like, for ghindex's own rules (`secret_rules.py`) and
the library's generic matches (`secret_library.py`): an example or a placeholder, code or
a reference, or something a machine made; and base64 that decodes to text.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import re

# Values that are examples, not credentials: `password="password123"`,
# `https://user:pass@host`, `secret: xxxxxxxx`. Checked for assigned values and URL
# passwords, whose formats say nothing else about them.
PLACEHOLDERS = re.compile(
    r"(?i)^(?:.{0,3}|(.)\1*|pass|pwd)$|example|placeholder|passw|ssword|secret|dummy|changeme"
    r"|your|\*\*\*|\.\.\.|…"
    # x's written in place of a value (`sk-xxxx`, `AKIAXXXXXXXX`, `xxx-yyy`): one case, four
    # or more, or three at an edge; `XXx` or `xxX` inside a token happens by chance.
    r"|(?-i:x{4}|X{4}|(?<![A-Za-z0-9])(?:xxx|XXX)|(?:xxx|XXX)(?![A-Za-z0-9]))"
    r"|redacted|sample|fake|foobar|\$\{|\{\{|%\(|<|^\$|^%[A-Z_]+%$|^\[[^\]]*\]$"
    r"|abc123|123456|qwerty|hunter2|letmein|s3cr3t|^mysecret"
    # a template's field where the value will go: `{hf_token}`, `f"{token}"`, `{0}`,
    # `#{token}`, `:token` (a symbol), an emoji shortcode `:laughing:`
    r"|\{[A-Za-z_0-9][\w.\[\]'\"-]{0,64}\}|^:[\w+-]+:?$"
    # a run of marks written in place of a value (`API-KEY-#####`, `????????`), words in
    # capitals where the value would be (`DOYOUNEEDTOKNOW`)
    r"|#{4}|\?{4}|_{4}|(?-i:^[A-Z]{8,}$)"
)

# A value that is code, a reference or prose rather than the secret itself.
CODE_VALUE = re.compile(
    # a path, a URL, a variable, a reference (`&x`, `*ptr`, `@attr`, `!Ref`), a number, a
    # flag: code; not a value that only starts with a mark (`%dA2Ok…`, `+563Hsb…`, `/AbC…`)
    r"(?i:^(?:~(?:/|$)|\.|\\|/(?![A-Za-z0-9+=]{20})|[a-z][a-z0-9+.-]*://(?![^/@]+@)|\$"
    r"|%\w+%$|(?-i:[&*@!?=#][A-Za-z_][a-z0-9_.:]*(?:[A-Z][a-z0-9_.:]+)*$)|[?=]|[+-][\d.]*$|--?[a-z][a-z-]*$|\d{1,6}$"
    r"|(?:true|false|null|none|nil|undefined|yes|no|on|off|string|str|bytes|bool|boolean"
    r"|int|integer|number|float|object|dict|list|any|optional|required|env|secret|hidden"
    r"|masked|empty|unset|default|todo|tbd|n/a|na|test|testing|debug)$))"
    r"|^[A-Za-z_]+(?:\.[A-Za-z_]+)+$"  # settings.TOKEN, os.environ
    r"|^[A-Za-z_][A-Za-z0-9_.]*(?:\[|\()"  # call or subscript
    r"|^[a-z]+(?:[_-][a-z]+)*$"  # lower-case words: a name, not a value
    # CamelCase of words (`SecretStr`), not of random letters (`avfZicbjHfTaNm`): a type
    r"|^(?:[A-Z]{2,})?[A-Z]?[a-z]{2,}(?:[A-Z][a-z]{2,}|[A-Z][a-z](?=[A-Z][a-z]{2}))*"
    r"(?:[A-Z]{2,})?$"
    r"|^[A-Z]+(?:_[A-Z]+)+$"  # CONSTANT_NAME: another variable
    r"|^[a-z]{2,}(?:_[a-z]{2,}|_?[A-Z][a-z]{2,})+\d{0,4}$"  # this_hidToken10: a variable
)
_PRINTABLE = re.compile(r"[\t\n\r\x20-\x7e]*")


def decoded_text(run: str, shortest: int = 16, words: bool = True) -> str | None:
    """`run` decoded from base64 (standard or URL-safe) when that gives printable
    ASCII text of `shortest` bytes or more, else None (images, hashes, binary). With
    `words`, the text must also hold a space, `:`, `=`, `-` or a line break."""
    core = run.rstrip("=")
    if len(core) % 4 == 1:
        return None
    alphabet = base64.urlsafe_b64decode if ("-" in core or "_" in core) else base64.b64decode
    try:
        raw = alphabet(core + "=" * (-len(core) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < shortest:
        return None
    return _printable(raw, words)


def decoded_hex(run: str, shortest: int = 12) -> str | None:
    """`run` decoded from hexadecimal when that gives printable ASCII text of `shortest`
    bytes or more (a token written as its bytes' hex), else None (hashes, binary)."""
    if len(run) % 2 or len(run) < shortest * 2:
        return None
    return _printable(bytes.fromhex(run), words=False)


def _printable(raw: bytes, words: bool) -> str | None:
    try:
        decoded = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if _PRINTABLE.fullmatch(decoded) is None or (words and not re.search(r"[ :=\n-]", decoded)):
        return None
    return decoded


def user_password(decoded: str) -> bool:
    """`user:password` with a generated password (Basic auth's and Docker's `auth`)."""
    user, colon, password = decoded.partition(":")
    return (
        bool(colon)
        and 0 < len(user) <= 64
        and not re.search(r"[\s:]", user + password)
        and generated(password)
        and not PLACEHOLDERS.search(password)
    )


def a_value(value: str, name: str, shortest: int = 6) -> bool:
    """Whether `value`, given to something named `name`, is a credential rather than an
    example, a placeholder, code or a reference to one elsewhere."""
    value = value.strip().rstrip(".,:;!?")  # the end of a sentence is not the value's
    if len(value) < shortest or PLACEHOLDERS.search(value) or CODE_VALUE.search(value):
        return False
    if value.lower() == name.lower().strip("-") or example_basic(value):
        return False
    return " " not in value or (generated(value) and bool(re.search(r"\d", value)))


def example_basic(value: str) -> bool:
    """`Basic <base64 of user:password>` (or the base64 alone) whose password is an
    example (`user:pass`)."""
    encoded_part = value.rsplit(" ", 1)[-1]
    decoded = decoded_text(encoded_part, shortest=3)
    if decoded is None:
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon) and bool(
        PLACEHOLDERS.search(password) or PLACEHOLDERS.search(user + password)
    )


def generated(value: str) -> bool:
    """Whether `value` looks machine-made: letters and digits mixed, or letters whose
    case changes often (`hKqPzRwVt`), not words."""
    if re.search(r"\d", value) and re.search(r"[A-Za-z]", value):
        return True
    letters = re.sub(r"[^A-Za-z]", "", value)
    changes = sum(a.islower() != b.islower() for a, b in itertools.pairwise(letters))
    return len(letters) >= 12 and changes >= len(letters) * 0.35


def mixed_case_token(value: str) -> bool:
    """Upper and lower case letters and digits, not a path: a generated token."""
    mixed = re.search(r"[a-z]", value) and re.search(r"[A-Z]", value) and re.search(r"\d", value)
    return bool(mixed) and value.count("/") < 2 and generated(value)
