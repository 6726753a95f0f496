"""Synthetic credentials in the formats people paste into issues, comments, diffs and
docs: generated here from a seeded random source, never real. Shared by the redaction
tests and bench/bench_redact.py.

Each `Secret` has the text as it would be pasted (`snippet`) and the parts that must
not survive redaction (`parts`): for a URL the password, for a key block its lines.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = string.ascii_letters + string.digits + "+/"
URLSAFE = string.ascii_letters + string.digits + "-_"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Secret:
    format: str
    snippet: str
    parts: tuple[str, ...]
    one_line: bool = True  # fits in a title


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _pem(rng: random.Random, label: str, lines: int) -> tuple[str, tuple[str, ...]]:
    body = [_pick(rng, B64, 64) for _ in range(lines)] + [_pick(rng, B64, 20) + "=="]
    block = "\n".join([f"-----BEGIN {label}-----", *body, f"-----END {label}-----"])
    return block, tuple(line for line in body if len(line) >= 16)


def _jwt(rng: random.Random) -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": _pick(rng, string.digits, 10), "name": "Test User"})
    return f"{header}.{payload}.{_pick(rng, URLSAFE, 43)}"


def _formats() -> list[tuple[str, Callable[[random.Random], Secret]]]:
    def simple(name: str, make: Callable[[random.Random], str], template: str = "{}"):
        def build(rng: random.Random) -> Secret:
            value = make(rng)
            return Secret(name, template.format(value), (value,))

        return name, build

    def assigned(name: str, template: str, make: Callable[[random.Random], str]):
        def build(rng: random.Random) -> Secret:
            value = make(rng)
            return Secret(name, template.format(value), (value,))

        return name, build

    def block(name: str, label: str, lines: int, fence: bool):
        def build(rng: random.Random) -> Secret:
            text, parts = _pem(rng, label, lines)
            snippet = f"```\n{text}\n```" if fence else text
            return Secret(name, snippet, parts, one_line=False)

        return name, build

    def gcp(rng: random.Random) -> Secret:
        key_id = _pick(rng, HEX, 40)
        pem, parts = _pem(rng, "PRIVATE KEY", 4)
        account = {
            "type": "service_account",
            "project_id": "demo-project",
            "private_key_id": key_id,
            "private_key": pem + "\n",
            "client_email": "bot@demo-project.iam.gserviceaccount.com",
        }
        return Secret("gcp-service-account-json", json.dumps(account, indent=2),
                      (key_id, *parts), one_line=False)  # fmt: skip

    def url(name: str, template: str):
        def build(rng: random.Random) -> Secret:
            password = _pick(rng, ALNUM, 18)
            return Secret(name, template.format(password), (password,))

        return name, build

    aws_secret = lambda rng: _pick(rng, B64, 40)  # noqa: E731
    return [
        simple("github-classic-pat", lambda r: "ghp_" + _pick(r, ALNUM, 36)),
        simple("github-oauth-token", lambda r: "gho_" + _pick(r, ALNUM, 36)),
        simple("github-app-installation-token", lambda r: "ghs_" + _pick(r, ALNUM, 36)),
        simple("github-user-to-server-token", lambda r: "ghu_" + _pick(r, ALNUM, 36)),
        simple("github-refresh-token", lambda r: "ghr_" + _pick(r, ALNUM, 36)),
        simple("github-fine-grained-pat",
               lambda r: f"github_pat_{_pick(r, ALNUM, 22)}_{_pick(r, ALNUM, 59)}"),
        simple("aws-access-key-id", lambda r: "AKIA" + _pick(r, UPPER, 16)),
        assigned("aws-secret-env", "AWS_SECRET_ACCESS_KEY={}", aws_secret),
        assigned("aws-secret-json", '{{"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "{}"}}',
                 aws_secret),
        assigned("aws-secret-yaml", "aws_secret_access_key: {}", aws_secret),
        assigned("aws-secret-ini", "[default]\naws_secret_access_key = {}", aws_secret),
        ("gcp-service-account-json", gcp),
        assigned("azure-storage-connection-string",
                 "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={};"
                 "EndpointSuffix=core.windows.net", lambda r: _pick(r, B64, 86) + "=="),
        assigned("azure-service-bus-connection-string",
                 "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=Root;"
                 "SharedAccessKey={}", lambda r: _pick(r, B64, 43) + "="),
        simple("slack-bot-token",
               lambda r: f"xoxb-{_pick(r, string.digits, 12)}-{_pick(r, string.digits, 13)}-"
                         f"{_pick(r, ALNUM, 24)}"),
        simple("slack-user-token",
               lambda r: f"xoxp-{_pick(r, string.digits, 12)}-{_pick(r, string.digits, 12)}-"
                         f"{_pick(r, string.digits, 13)}-{_pick(r, HEX, 32)}"),
        simple("slack-webhook",
               lambda r: f"https://hooks.slack.com/services/T{_pick(r, UPPER, 10)}/"
                         f"B{_pick(r, UPPER, 10)}/{_pick(r, ALNUM, 24)}"),
        simple("stripe-live-secret-key", lambda r: "sk_live_" + _pick(r, ALNUM, 24)),
        simple("stripe-restricted-key", lambda r: "rk_live_" + _pick(r, ALNUM, 24)),
        simple("openai-legacy-key",
               lambda r: f"sk-{_pick(r, ALNUM, 20)}T3BlbkFJ{_pick(r, ALNUM, 20)}"),
        simple("openai-project-key", lambda r: "sk-proj-" + _pick(r, URLSAFE, 120)),
        simple("anthropic-key", lambda r: f"sk-ant-api03-{_pick(r, URLSAFE, 93)}AA"),
        simple("gitlab-pat", lambda r: "glpat-" + _pick(r, URLSAFE, 20)),
        simple("npm-token", lambda r: "npm_" + _pick(r, ALNUM, 36)),
        assigned("npmrc-auth-token", "//registry.npmjs.org/:_authToken={}",
                 lambda r: "npm_" + _pick(r, ALNUM, 36)),
        simple("pypi-token", lambda r: "pypi-AgEIcHlwaS5vcmc" + _pick(r, URLSAFE, 80)),
        simple("jwt", _jwt),
        simple("sendgrid-key", lambda r: f"SG.{_pick(r, URLSAFE, 22)}.{_pick(r, URLSAFE, 43)}"),
        simple("twilio-api-key", lambda r: "SK" + _pick(r, HEX, 32)),
        simple("telegram-bot-token",
               lambda r: f"{_pick(r, string.digits, 10)}:AA{_pick(r, URLSAFE, 33)}"),
        simple("google-api-key", lambda r: "AIza" + _pick(r, URLSAFE, 35)),
        simple("mailchimp-key", lambda r: f"{_pick(r, HEX, 32)}-us{r.randint(1, 20)}"),
        block("rsa-private-key-fenced", "RSA PRIVATE KEY", 12, fence=True),
        block("private-key-unfenced-4096", "PRIVATE KEY", 50, fence=False),
        block("openssh-private-key", "OPENSSH PRIVATE KEY", 6, fence=True),
        block("ec-private-key", "EC PRIVATE KEY", 3, fence=False),
        url("basic-auth-url", "https://deploy:{}@example.com/private/repo.git"),
        url("postgres-url", "DATABASE_URL=postgres://app:{}@db.internal:5432/app"),
        url("mongodb-url", "mongodb+srv://admin:{}@cluster0.example.net/test"),
        assigned("env-db-password", "DB_PASSWORD={}", lambda r: _pick(r, ALNUM, 14) + "7"),
        assigned("env-api-key-quoted", 'export API_KEY="{}"', lambda r: _pick(r, ALNUM, 32)),
        assigned("json-client-secret", '{{"client_id": "demo", "client_secret": "{}"}}',
                 lambda r: _pick(r, ALNUM, 30) + "1"),
    ]  # fmt: skip


def corpus(seed: int = 20261201) -> list[Secret]:
    """One synthetic secret of every format, the same for the same seed."""
    rng = random.Random(seed)
    return [build(rng) for _name, build in _formats()]
