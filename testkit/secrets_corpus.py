"""Synthetic credentials in the formats people paste into issues, comments, diffs and
docs: generated here from a seeded random source, never real. Shared by the redaction
tests and bench/bench_redact.py.

Each `Secret` has the text as it would be pasted (`snippet`) and the parts that must
not survive redaction (`parts`): for a URL the password, for a key block its lines.
`family` says what a detector has to go on:

- "provider": a provider's own token format (a known prefix or shape: `ghp_…`, `hf_…`);
- "context": a provider's key without a prefix of its own, known by the provider's
  name or connection string around it (`DD_API_KEY=<32 hex>`);
- "assignment": a value assigned to a name that says it is secret, in any syntax;
- "header": an HTTP authorization header (or curl's flags for one);
- "url": credentials inside a URL;
- "key-block": private-key material (PEM, OpenSSH, PGP, PuTTY), its lines the parts;
- "encoded": credentials base64-encoded (a credentials file, `user:pass`, a key);
- "prose": a bare value in a sentence that says what it is.

The formats are written as templates (`_FORMATS`): `{N:36}` is 36 characters drawn
from alphabet N (`{N:20-30}`: 20 to 30 of them), `{@name:arg}` a generated piece
(checksummed tokens, key blocks, base64 of another template in `_INNER`), and what
lies between `[[` and `]]` is a part. Formats follow the providers' published shapes
(prefixes, lengths, alphabets, checksums where they have one); the bodies are random.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import re
import string
import zlib
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = string.ascii_letters + string.digits + "+/"
URLSAFE = string.ascii_letters + string.digits + "-_"
HEX = "0123456789abcdef"

ALPHABETS = {
    "A": string.ascii_letters,  # letters only: no digit anywhere
    "a": string.ascii_lowercase,
    "U": string.ascii_uppercase,
    "D": string.digits,
    "H": HEX,
    "X": HEX.upper(),
    "N": ALNUM,
    "n": string.ascii_lowercase + string.digits,
    "M": UPPER,
    "B": B64,
    "S": URLSAFE,
    "W": ALNUM + "_",
    "Q": string.ascii_uppercase + "234567",  # base32, as AWS key ids
    "q": string.ascii_lowercase + "234567",  # base32, as Azure DevOps PATs
    "Z": "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",  # base58
    "T": ALNUM + "_~.-",  # Azure AD client secrets
    "P": ALNUM + "._",  # Salesforce session ids
    "r": string.ascii_lowercase + string.digits + "-_",  # Terraform Cloud tokens
    "w": ALNUM + "!#%^~@-",  # passwords people choose, with marks
}

# A random run is drawn again if it reads as a placeholder (or a redactor's marker).
_PLACEHOLDERISH = re.compile(
    r"(?i)example|xxx|your|dummy|sample|fake|changeme|secret|test|passw|redact|placeholder"
    r"|foo|todo"
)


@dataclass(frozen=True)
class Secret:
    format: str
    snippet: str
    parts: tuple[str, ...]
    one_line: bool = True  # fits in a title
    family: str = "provider"  # what a detector has to go on: see the module's docstring


FAMILIES = (
    "provider",
    "context",
    "assignment",
    "header",
    "url",
    "key-block",
    "encoded",
    "prose",
    "command",
    "config",
    "long",
    "obfuscated",
)


# ------------------------------------------------------------------------ pieces


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if not _PLACEHOLDERISH.search(value) and len(set(value)) > min(n - 1, 3):
            return value


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _wrap(text: str, width: int) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)]


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def _github(rng: random.Random, prefix: str) -> str:
    """GitHub's (and npm's) format: 30 random base62, then the CRC32 of those 30 in
    base62, six digits."""
    body = _pick(rng, ALNUM, 30)
    crc, digits = zlib.crc32(body.encode()), ""
    while crc:
        crc, digit = divmod(crc, 62)
        digits = _BASE62[digit] + digits
    return f"{prefix}_{body}{digits.rjust(6, '0')}"


def _grafana_sa(rng: random.Random, _arg: str) -> str:
    """Grafana service-account token: 32 base62, then the CRC32 of all before, hex."""
    key = "glsa_" + _pick(rng, ALNUM, 32)
    return f"{key}_{zlib.crc32(key.encode()):08x}"


def _wif(rng: random.Random, _arg: str) -> str:
    """A Bitcoin private key in compressed WIF: base58check, its checksum valid."""
    payload = b"\x80" + rng.randbytes(32) + b"\x01"
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number, out = int.from_bytes(data, "big"), ""
    while number:
        number, digit = divmod(number, 58)
        out = ALPHABETS["Z"][digit] + out
    return out


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _bech32(rng: random.Random, hrp: str) -> str:
    """32 random bytes in bech32 under `hrp`, its checksum valid (as age's keys are;
    an upper-case `hrp` gives an upper-case key)."""
    acc, bits, data = 0, 0, []
    for byte in rng.randbytes(32):
        acc, bits = (acc << 8) | byte, bits + 8
        while bits >= 5:
            bits -= 5
            data.append((acc >> bits) & 31)
    if bits:
        data.append((acc << (5 - bits)) & 31)
    low = hrp.lower()
    check = 1
    for value in [ord(c) >> 5 for c in low] + [0] + [ord(c) & 31 for c in low] + data + [0] * 6:
        top, check = check >> 25, ((check & 0x1FFFFFF) << 5) ^ value
        for i, gen in enumerate((0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)):
            check ^= gen if (top >> i) & 1 else 0
    data += [((check ^ 1) >> 5 * (5 - i)) & 31 for i in range(6)]
    key = low + "1" + "".join(_BECH32[d] for d in data)
    return key.upper() if hrp.isupper() else key


def _uuid(rng: random.Random, _arg: str) -> str:
    h = _pick(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"


def _int(rng: random.Random, arg: str) -> str:
    low, high = arg.split("-")
    return str(rng.randint(int(low), int(high)))


def _jwt(rng: random.Random, kind: str) -> tuple[str, list[str]]:
    """A JWT; its parts: the payload and, separately, the signature."""
    iat = rng.randint(1_700_000_000, 1_790_000_000)
    if kind == "k8s":
        header = {"alg": "RS256", "kid": _pick(rng, URLSAFE, 43)}
        api = "https://kubernetes.default.svc.cluster.local"
        account = {"name": "deployer", "uid": _uuid(rng, "")}
        payload: dict = {
            "aud": [api],
            "exp": iat + 31_536_000,
            "iat": iat,
            "iss": api,
            "kubernetes.io": {"namespace": "ci", "serviceaccount": account},
            "sub": "system:serviceaccount:ci:deployer",
        }
        signature = _b64url(rng.randbytes(256))  # RS256
    else:
        header = {"alg": "HS256", "typ": "JWT"}
        payload = {"sub": _pick(rng, string.digits, 10), "name": "Ada Lovelace", "iat": iat}
        signature = _b64url(rng.randbytes(32))  # HS256
    encoded = _b64url(json.dumps(payload, separators=(",", ":")).encode())
    token = f"{_b64url(json.dumps(header, separators=(',', ':')).encode())}.{encoded}.{signature}"
    return token, [encoded, signature]


# The DER (or OpenSSH) bytes a key of each label starts with, so that its first line
# reads as a real one does (`MIIEpAIBAAKCAQEA…`, `b3BlbnNzaC1rZXktdjE…`).
_KEY_HEAD = {
    "RSA PRIVATE KEY": bytes.fromhex("308204a40201000282010100"),
    "PRIVATE KEY": bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8"),
    "EC PRIVATE KEY": bytes.fromhex("30770201010420"),
    "DSA PRIVATE KEY": bytes.fromhex("308201bb02010002818100"),
    "ENCRYPTED PRIVATE KEY": bytes.fromhex("3082052e305806092a864886f70d01050d"),
    "OPENSSH PRIVATE KEY": b"openssh-key-v1\0" + b"\0\0\0\x04none" * 2 + b"\0" * 7 + b"\x01",
}


def _pem(rng: random.Random, arg: str) -> tuple[str, list[str]]:
    """`LABEL/lines[/style]`: a PEM block of about `lines` full lines, the base64 of
    random bytes behind the label's usual header; style `enc` makes it a legacy
    encrypted one, `json` joins the lines with `\\n` escapes, `indent` indents them."""
    label, lines, *style = arg.split("/")
    width = 70 if label.startswith("OPENSSH") else 64
    size = (int(lines) * width + 23) // 4 * 3 - 2  # the last line short, ending in ==
    head = b"" if "enc" in style else _KEY_HEAD.get(label, b"")
    body = _wrap(base64.b64encode(head + rng.randbytes(size - len(head))).decode(), width)
    if "enc" in style:
        iv = rng.randbytes(16).hex().upper()
        body = ["Proc-Type: 4,ENCRYPTED", f"DEK-Info: AES-128-CBC,{iv}", "", *body]
    rows = [f"-----BEGIN {label}-----", *body, f"-----END {label}-----"]
    sep = "\\n" if "json" in style else "\n    " if "indent" in style else "\n"
    key_lines = [line for line in body if len(line) >= 16 and ":" not in line]
    return sep.join(rows), key_lines


def _crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def _pgp(rng: random.Random, _arg: str) -> tuple[str, list[str]]:
    """An armored PGP secret key: a secret-key packet's bytes, and a valid CRC-24."""
    data = b"\x95\x03\xc6\x04" + rng.randbytes(896)
    lines = _wrap(base64.b64encode(data).decode(), 64)
    checksum = "=" + base64.b64encode(_crc24(data).to_bytes(3, "big")).decode()
    text = "\n".join(
        [
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
            "",
            *lines,
            checksum,
            "-----END PGP PRIVATE KEY BLOCK-----",
        ]
    )
    return text, [line for line in lines if len(line) >= 16]


def _putty(rng: random.Random, _arg: str) -> tuple[str, list[str]]:
    """A PuTTY v3 ed25519 key, unencrypted, its Private-MAC computed (HMAC-SHA-256
    with the empty key over algorithm, encryption, comment and both blobs)."""
    algorithm, comment = (
        b"ssh-ed25519",
        f"eddsa-key-2024{rng.randint(1, 12):02d}{rng.randint(10, 28)}",
    )
    public = _ssh_string(algorithm) + _ssh_string(rng.randbytes(32))
    private = _ssh_string(rng.randbytes(32))
    signed = b"".join(
        _ssh_string(piece) for piece in (algorithm, b"none", comment.encode(), public, private)
    )
    mac = hmac.new(b"", signed, hashlib.sha256).hexdigest()
    public_lines = _wrap(base64.b64encode(public).decode(), 64)
    private_lines = _wrap(base64.b64encode(private).decode(), 64)
    text = "\n".join(
        [
            "PuTTY-User-Key-File-3: ssh-ed25519",
            "Encryption: none",
            f"Comment: {comment}",
            f"Public-Lines: {len(public_lines)}",
            *public_lines,
            f"Private-Lines: {len(private_lines)}",
            *private_lines,
            f"Private-MAC: {mac}",
        ]
    )
    return text, [*(line for line in private_lines if len(line) >= 16), mac]


def _ssh2(rng: random.Random, _arg: str) -> tuple[str, list[str]]:
    """An ssh.com (RFC 4716 layout) encrypted private key: `---- BEGIN SSH2 ENCRYPTED
    PRIVATE KEY ----`, a quoted `Comment:` header, 70-character base64 lines."""
    data = b"\x3f\x6f\xf9\xeb" + rng.randbytes(600)
    lines = _wrap(base64.b64encode(data).decode(), 70)
    text = "\n".join(
        [
            "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----",
            f'Comment: "rsa-key-2024{rng.randint(1, 12):02d}{rng.randint(10, 28)}"',
            *lines,
            "---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        ]
    )
    return text, [line for line in lines if len(line) >= 16]


# Templates that are base64-encoded whole by `{@b64:name}` (standard, padded),
# `{@b64u:name}` (URL-safe, unpadded) or `{@b64a:name}` (unpadded, letters and digits).
_INNER = {
    "aws-file": "[default]\naws_access_key_id = AKIA{Q:16}\naws_secret_access_key = {B:40}\n",
    "deploy": "deploy:{N:20}",
    "ci": "ci-bot:{N:24}",
    "npm": "builder:{N:18}",
    "k8s-jwt": "{@jwt:k8s}",
    "rsa-key": "{@pem:RSA PRIVATE KEY/12}",
    "intercom": "tok:{@uuid_}:1:0",
    "jfrog-ref": "reftkn:01:{D:10}:{N:27}",
    "bedrock": "BedrockAPIKey-{n:4}-at-{D:12}:{B:40}",
    "sentry": '{"iat":{D:10}.{D:6},"url":"https://sentry.io","region_url":"https://us.sentry.io",'
    '"org":"acme-{a:5}"}',
    "grafana": '{"o":"{D:6}","n":"stack-{D:6}-hm-read-ci","k":"{N:24}","m":{"r":"prod-us-east-0"}}',
    "mapbox": '{"u":"mapco","a":"cl{n:23}"}',
    "discord-id": "1{D:18}",
    "onepassword": '{"signInAddress":"my.1password.com","userAuth":{"method":"SRPg-4096",'
    '"alg":"PBES2g-HS256","iterations":650000,"salt":"{S:22}"},'
    '"email":"{n:13}@1passwordserviceaccounts.com","srpX":"{H:64}",'
    '"muk":{"alg":"A256GCM","ext":true,"k":"{S:43}","key_ops":["encrypt","decrypt"],'
    '"kty":"oct","kid":"mp"},"throttleSecret":{"seed":"{H:64}","uuid":"{M:26}"},'
    '"deviceUuid":"{n:26}"}',
}


def _encoded(kind: str) -> Callable[[random.Random, str], str]:
    def make(rng: random.Random, name: str) -> str:
        for _ in range(100):
            data = _render(rng, _INNER[name])[0].encode()
            if kind == "b64":
                return base64.b64encode(data).decode()
            value = _b64url(data)
            if kind == "b64u" or value.isalnum():
                return value
        raise ValueError(name)

    return make


_MAKERS: dict[str, Callable[[random.Random, str], str | tuple[str, list[str]]]] = {
    "gh": _github,
    "glsa": _grafana_sa,
    "wif": _wif,
    "bech32": _bech32,
    "uuid": _uuid,
    "uuid_": lambda rng, arg: _uuid(rng, arg).replace("-", "_"),
    "int": _int,
    "jwt": _jwt,
    "pem": _pem,
    "pgp": _pgp,
    "putty": _putty,
    "ssh2": _ssh2,
    "b64": _encoded("b64"),
    "b64u": _encoded("b64u"),
    "b64a": _encoded("b64a"),
}

_FIELD = re.compile(
    r"\[\[|\]\]|\{(?P<abc>[A-Za-z0-9]):(?P<n>\d+)(?:-(?P<m>\d+))?\}"
    r"|\{@(?P<make>[a-z0-9_]+)(?::(?P<arg>[^{}]*))?\}"
)


def _render(rng: random.Random, template: str) -> tuple[str, list[str]]:
    """The text of a template and its parts (see the module's docstring)."""
    text, parts, opened, done = "", [], [], 0
    for field in _FIELD.finditer(template):
        text += template[done : field.start()]
        done = field.end()
        if field.group() == "[[":
            opened.append(len(text))
        elif field.group() == "]]":
            parts.append(text[opened.pop() :])
        elif field["abc"]:
            low = int(field["n"])
            size = rng.randint(low, int(field["m"])) if field["m"] else low
            text += _pick(rng, ALPHABETS[field["abc"]], size)
        else:
            made = _MAKERS[field["make"]](rng, field["arg"] or "")
            if isinstance(made, tuple):
                text += made[0]
                parts += made[1]
            else:
                text += made
    if opened:
        raise ValueError(f"unclosed [[ in {template!r}")
    return text + template[done:], parts


# ------------------------------------------------------------------------ formats

_FORMATS: dict[str, list[tuple[str, str]]] = {
    "provider": [
        # GitHub: CRC32-checksummed, except fine-grained PATs
        ("github-classic-pat", "[[{@gh:ghp}]]"),
        ("github-oauth-token", "[[{@gh:gho}]]"),
        ("github-app-installation-token", "[[{@gh:ghs}]]"),
        ("github-user-to-server-token", "[[{@gh:ghu}]]"),
        ("github-refresh-token", "[[{@gh:ghr}]]"),
        ("github-fine-grained-pat", "[[github_pat_11{M:20}_{N:59}]]"),
        (
            "github-token-gh-hosts-yaml",
            "github.com:\n    oauth_token: [[{@gh:gho}]]\n    user: ops",
        ),
        # AWS, Google, Azure, other clouds
        ("aws-access-key-id", "[[AKIA{Q:16}]]"),
        ("aws-session-token", "export AWS_SESSION_TOKEN=[[IQoJb3JpZ2luX2Vj{B:280}]]"),
        (
            "aws-sts-credentials-json",
            '{"AccessKeyId": "[[ASIA{Q:16}]]", "SecretAccessKey": '
            '"[[{B:40}]]", "SessionToken": "[[FwoGZXIvYXdzE{B:200}]]"}',
        ),
        ("aws-bedrock-api-key", "export AWS_BEARER_TOKEN_BEDROCK=[[ABSK{@b64:bedrock}]]"),
        ("amazon-mws-auth-token", "mws_auth_token = [[amzn.mws.{@uuid}]]"),
        ("google-api-key", "[[AIza{S:35}]]"),
        (
            "firebase-web-config-api-key",
            'const firebaseConfig = { apiKey: "[[AIza{S:35}]]", '
            'authDomain: "acme-app.firebaseapp.com" };',
        ),
        ("firebase-cloud-messaging-server-key", "FCM_SERVER_KEY=[[AAAA{S:7}:APA91b{S:134}]]"),
        (
            "google-oauth-client-secret",
            '{"installed": {"client_id": "{D:12}-{n:32}.apps.googleusercontent.com", '
            '"client_secret": "[[GOCSPX-{S:28}]]"}}',
        ),
        ("google-oauth-refresh-token", "refresh_token: [[1//0{S:1}{S:98}]]"),
        ("google-oauth-access-token", "ya29 token: [[ya29.a0{S:180}]]"),
        ("gcs-hmac-key", "gsutil config: access id [[GOOG1E{M:54}]] secret [[{B:40}]]"),
        ("azure-ad-client-secret", "AZURE_CLIENT_SECRET=[[{N:3}8Q~{T:34}]]"),
        ("azure-ad-client-secret-bare", "the app's value is [[{N:3}8Q~{T:34}]] for now"),
        ("aws-session-token-bare", "[[IQoJb3JpZ2luX2Vj{B:600}]]"),
        ("aws-session-token-legacy", "[[FwoGZXIvYXdzE{B:500}]]"),
        ("google-oauth-refresh-token-bare", "[[1//0{S:1}{S:98}]]"),
        ("google-oauth-access-token-bare", "[[ya29.a0{S:180}]]"),
        ("digitalocean-pat", "doctl auth init -t [[dop_v1_{H:64}]]"),
        ("digitalocean-oauth-token", "DIGITALOCEAN_ACCESS_TOKEN=[[doo_v1_{H:64}]]"),
        ("digitalocean-refresh-token", '"refresh_token": "[[dor_v1_{H:64}]]"'),
        (
            "alibaba-access-key",
            "aliyun configure set --access-key-id [[LTAI{N:20}]] --access-key-secret [[{N:30}]]",
        ),
        ("tencent-cloud-secret", "SecretId: [[AKID{N:32}]]\nSecretKey: [[{N:32}]]"),
        ("yandex-oauth-token", "yc config set token [[y0_{S:55}]]"),
        ("yandex-api-key", "YC_API_KEY=[[AQVN{S:36}]]"),
        ("yandex-iam-token", "Authorization: Bearer [[t1.{S:64}.{S:86}]]"),
        ("cloudflare-origin-ca-key", "CF_ORIGIN_CA_KEY=[[v1.0-{H:24}-{H:146}]]"),
        (
            "akamai-edgerc",
            "[default]\nclient_secret = [[{B:43}=]]\n"
            "host = akab-{n:16}-{n:16}.luna.akamaiapis.net\n"
            "access_token = [[akab-{n:16}-{n:16}]]\nclient_token = [[akab-{n:16}-{n:16}]]",
        ),
        ("heroku-api-key-v2", "heroku config:set HEROKU_API_KEY=[[HRKU-AA{S:58}]]"),
        ("netlify-pat", "netlify deploy --auth [[nfp_{N:36}]]"),
        ("flyio-token", "FLY_API_TOKEN=[[fo1_{S:43}]]"),
        ("render-api-key", "RENDER_API_KEY=[[rnd_{N:32}]]"),
        ("supabase-pat", "supabase login --token [[sbp_{H:40}]]"),
        ("planetscale-service-token", "PLANETSCALE_SERVICE_TOKEN=[[pscale_tkn_{S:43}]]"),
        (
            "planetscale-password",
            "mysql://{n:12}:[[pscale_pw_{S:43}]]@aws.connect.psdb.cloud/app?sslaccept=strict",
        ),
        ("tailscale-auth-key", "tailscale up --authkey=[[tskey-auth-k{N:6}CNTRL-{N:32}]]"),
        ("tailscale-api-key", "TS_API_KEY=[[tskey-api-k{N:6}CNTRL-{N:32}]]"),
        ("scalingo-api-token", "SCALINGO_API_TOKEN=[[tk-us-{S:48}]]"),
        # secrets managers and infrastructure
        ("vault-service-token", "export VAULT_TOKEN=[[hvs.CAESI{N:86}]]"),
        ("vault-batch-token", "X-Vault-Token: [[hvb.AAAAAQ{S:132}]]"),
        ("vault-recovery-token", "recovery token: [[hvr.{N:24}]]"),
        (
            "terraform-cloud-token",
            'credentials "app.terraform.io" {\n  token = "[[{n:14}.atlasv1.{r:67}]]"\n}',
        ),
        ("doppler-service-token", "DOPPLER_TOKEN=[[dp.st.prd.{N:43}]]"),
        ("doppler-personal-token", "doppler configure set token [[dp.pt.{N:43}]]"),
        ("doppler-cli-token", "token: [[dp.ct.{N:43}]]"),
        ("doppler-service-account-token", "DOPPLER_TOKEN=[[dp.sa.{N:43}]]"),
        ("pulumi-access-token", "PULUMI_ACCESS_TOKEN=[[pul-{H:40}]]"),
        (
            "onepassword-service-account-token",
            "export OP_SERVICE_ACCOUNT_TOKEN=[[ops_{@b64u:onepassword}]]",
        ),
        (
            "onepassword-secret-key",
            "1Password Secret Key: [[A3-{M:6}-{M:6}-{M:5}-{M:5}-{M:5}-{M:5}]]",
        ),
        ("age-secret-key", "# public key: {@bech32:age}\n[[{@bech32:AGE-SECRET-KEY-}]]"),
        ("databricks-token", "DATABRICKS_TOKEN=[[dapi{H:32}]]"),
        ("databricks-token-suffixed", "databricks configure --token [[dapi{H:32}-2]]"),
        ("prefect-api-key", "prefect cloud login -k [[pnu_{N:36}]]"),
        ("harness-pat", "HARNESS_API_KEY=[[pat.{S:22}.{H:24}.{N:20}]]"),
        ("octopus-deploy-api-key", "octo push --apiKey [[API-{M:26}]]"),
        (
            "kubeconfig-user-token",
            "apiVersion: v1\nkind: Config\nusers:\n- name: deployer\n  user:\n"
            "    token: [[{@jwt:k8s}]]\ncurrent-context: prod",
        ),
        # source hosting, CI and package registries
        ("gitlab-pat", "[[glpat-{S:20}]]"),
        (
            "gitlab-deploy-token",
            "git clone https://gitlab+deploy-token-{D:6}:[[gldt-{S:20}]]@gitlab.com/acme/app.git",
        ),
        ("gitlab-runner-token", "gitlab-runner register --token [[glrt-{S:20}]]"),
        (
            "gitlab-pipeline-trigger-token",
            "curl -X POST -F token=[[glptt-{H:40}]] -F ref=main "
            "https://gitlab.com/api/v4/projects/{D:8}/trigger/pipeline",
        ),
        ("gitlab-scim-token", "SCIM token: [[glsoat-{S:20}]]"),
        ("gitlab-oauth-app-secret", "GITLAB_APP_SECRET=[[gloas-{H:64}]]"),
        ("bitbucket-app-password", "BITBUCKET_APP_PASSWORD=[[ATBB{N:28}{X:8}]]"),
        ("bitbucket-access-token", "Authorization: Bearer [[ATCTT3xFfGN0{S:171}={X:8}]]"),
        ("atlassian-api-token", "JIRA_API_TOKEN=[[ATATT3xFfGF0{S:171}={X:8}]]"),
        ("npm-token", "[[{@gh:npm}]]"),
        ("npmrc-auth-token", "//registry.npmjs.org/:_authToken=[[{@gh:npm}]]"),
        ("pypi-token", "[[pypi-AgEIcHlwaS5vcmc{S:80}]]"),
        ("testpypi-token", "[[pypi-AgENdGVzdC5weXBpLm9yZw{S:120}]]"),
        ("nuget-api-key-bare", "[[oy2{n:43}]]"),
        ("rubygems-api-key", "GEM_HOST_API_KEY=[[rubygems_{H:48}]]"),
        ("nuget-api-key", "dotnet nuget push app.nupkg --api-key [[oy2{n:43}]]"),
        ("crates-io-token", "cargo login [[cio{N:32}]]"),
        ("docker-hub-pat", "echo [[dckr_pat_{S:27}]] | docker login -u acme --password-stdin"),
        ("jfrog-api-key", "X-JFrog-Art-Api: [[AKCp{N:69}]]"),
        ("jfrog-reference-token", "JFROG_ACCESS_TOKEN=[[{@b64:jfrog-ref}]]"),
        ("sonarqube-project-token", "mvn sonar:sonar -Dsonar.token=[[sqp_{H:40}]]"),
        ("sonarqube-user-token", "SONAR_TOKEN=[[squ_{H:40}]]"),
        ("sonarqube-analysis-token", "sonar.login=[[sqa_{H:40}]]"),
        ("circleci-pat", "Circle-Token: [[CCIPAT_{N:22}_{H:40}]]"),
        ("buildkite-api-token", "BUILDKITE_API_TOKEN=[[bkua_{H:40}]]"),
        ("readme-api-key", "rdme openapi --key=[[rdme_{n:70}]]"),
        # chat and collaboration
        ("slack-bot-token", "[[xoxb-{D:12}-{D:13}-{N:24}]]"),
        ("slack-user-token", "[[xoxp-{D:12}-{D:12}-{D:13}-{H:32}]]"),
        ("slack-webhook", "[[https://hooks.slack.com/services/T{M:10}/B{M:10}/{N:24}]]"),
        ("slack-app-token", "SLACK_APP_TOKEN=[[xapp-1-A{M:10}-{D:13}-{H:64}]]"),
        ("slack-config-access-token", "[[xoxe.xoxp-1-{M:166}]]"),
        ("slack-config-refresh-token", "refresh: [[xoxe-1-{M:146}]]"),
        ("slack-legacy-workspace-token", "[[xoxa-2-{D:12}-{D:12}-{D:12}-{H:32}]]"),
        ("slack-workflow-webhook", "[[https://hooks.slack.com/triggers/T{M:10}/{D:13}/{H:32}]]"),
        ("discord-webhook", "[[https://discord.com/api/webhooks/{D:18}/{S:68}]]"),
        ("discord-bot-token", "client.run('[[{@b64a:discord-id}.{S:6}.{S:38}]]')"),
        ("telegram-bot-token", "[[{D:10}:AA{S:33}]]"),
        (
            "teams-incoming-webhook",
            "[[https://acmecorp.webhook.office.com/webhookb2/{@uuid}@{@uuid}/IncomingWebhook/"
            "{H:32}/{@uuid}]]",
        ),
        ("zapier-webhook", "[[https://hooks.zapier.com/hooks/catch/{D:7}/{n:6}/]]"),
        ("dropbox-short-lived-token", "DROPBOX_ACCESS_TOKEN=[[sl.B{S:137}]]"),
        ("dropbox-long-lived-token", "dropbox token [[{n:11}AAAAAAAAAA{S:43}]]"),
        ("linear-api-key", "LINEAR_API_KEY=[[lin_api_{N:40}]]"),
        ("linear-oauth-token", "[[lin_oauth_{H:64}]]"),
        ("notion-integration-token", "NOTION_TOKEN=[[ntn_{D:11}{N:35}]]"),
        ("notion-legacy-token", 'notion = Client(auth="[[secret_{N:43}]]")'),
        ("airtable-pat", "AIRTABLE_API_KEY=[[pat{N:14}.{H:64}]]"),
        ("asana-pat", "ASANA_ACCESS_TOKEN=[[2/{D:16}/{D:16}:{H:32}]]"),
        ("clickup-api-token", "Authorization: [[pk_{D:8}_{M:32}]]"),
        ("figma-pat", "X-Figma-Token: [[figd_{S:40}]]"),
        ("postman-api-key", "postman login --with-api-key [[PMAK-{H:24}-{H:34}]]"),
        ("hubspot-private-app-token", "HUBSPOT_ACCESS_TOKEN=[[pat-na1-{@uuid}]]"),
        ("salesforce-session-id", "sf org display: Access Token [[00D{N:12}!AQ{P:94}]]"),
        ("intercom-access-token", "INTERCOM_ACCESS_TOKEN=[[{@b64:intercom}]]"),
        ("contentful-pat", "contentful login --management-token [[CFPAT-{S:43}]]"),
        ("typeform-pat", "TYPEFORM_TOKEN=[[tfp_{W:59}]]"),
        ("frameio-developer-token", "FRAMEIO_TOKEN=[[fio-u-{S:64}]]"),
        ("launchdarkly-access-token", "LD_API_KEY=[[api-{@uuid}]]"),
        ("launchdarkly-sdk-key", "LD_SDK_KEY=[[sdk-{@uuid}]]"),
        # observability
        ("sentry-org-token", "SENTRY_AUTH_TOKEN=[[sntrys_{@b64:sentry}_{B:43}]]"),
        ("sentry-user-token", "sentry-cli login --auth-token [[sntryu_{H:64}]]"),
        ("grafana-cloud-token", "GRAFANA_CLOUD_TOKEN=[[glc_{@b64:grafana}]]"),
        ("grafana-service-account-token", "Authorization: Bearer [[{@glsa}]]"),
        ("new-relic-user-key", "NEW_RELIC_API_KEY=[[NRAK-{M:27}]]"),
        ("new-relic-insert-key", "X-Insert-Key: [[NRII-{S:32}]]"),
        ("dynatrace-token", "DT_API_TOKEN=[[dt0c01.{M:24}.{M:64}]]"),
        ("mapbox-secret-token", "MAPBOX_DOWNLOADS_TOKEN=[[sk.{@b64a:mapbox}.{N:22}]]"),
        ("mapbox-public-token", "mapboxgl.accessToken = '[[pk.{@b64a:mapbox}.{N:22}]]';"),
        # messaging and email
        ("twilio-api-key", "[[SK{H:32}]]"),
        ("sendgrid-key", "[[SG.{S:22}.{S:43}]]"),
        (
            "mailgun-api-key",
            "curl -s --user 'api:[[key-{H:32}]]' https://api.mailgun.net/v3/mg.acme.io/messages",
        ),
        ("mailchimp-key", "[[{H:32}-us{@int:1-20}]]"),
        ("mailgun-legacy-key-bare", "[[key-{H:32}]]"),
        ("mailgun-private-key", "[[{H:32}-{H:8}-{H:8}]]"),
        ("brevo-api-key", "BREVO_API_KEY=[[xkeysib-{H:64}-{N:16}]]"),
        # payments and commerce
        ("stripe-live-secret-key", "[[sk_live_{N:24}]]"),
        ("stripe-restricted-key", "[[rk_live_{N:24}]]"),
        ("stripe-test-secret-key", "[[sk_test_{N:24}]]"),
        ("stripe-test-restricted-key", "[[rk_test_51{N:97}]]"),
        ("stripe-live-secret-key-long", "STRIPE_SECRET_KEY=[[sk_live_51{N:97}]]"),
        ("stripe-webhook-secret", "STRIPE_WEBHOOK_SECRET=[[whsec_{N:32}]]"),
        ("square-access-token", "SQUARE_ACCESS_TOKEN=[[EAAA{S:60}]]"),
        ("square-oauth-secret", "square application secret [[sq0csp-{S:43}]]"),
        ("square-legacy-access-token", "[[sq0atp-{S:22}]]"),
        ("braintree-access-token", "BT_ACCESS_TOKEN=[[access_token$production${n:16}${H:32}]]"),
        ("plaid-access-token", "plaid access_token: [[access-production-{@uuid}]]"),
        ("shopify-admin-token", "X-Shopify-Access-Token: [[shpat_{H:32}]]"),
        ("shopify-custom-app-token", "SHOPIFY_TOKEN=[[shpca_{H:32}]]"),
        ("shopify-private-app-password", "[[shppa_{H:32}]]"),
        ("shopify-shared-secret", "SHOPIFY_API_SECRET=[[shpss_{H:32}]]"),
        ("easypost-api-key", "EASYPOST_API_KEY=[[EZAK{N:54}]]"),
        ("flutterwave-secret-key", "FLW_SECRET_KEY=[[FLWSECK-{H:32}-X]]"),
        ("razorpay-key", "razorpay.Client(auth=('[[rzp_live_{N:14}]]', '[[{N:24}]]'))"),
        ("shippo-api-token", "Authorization: ShippoToken [[shippo_live_{H:40}]]"),
        ("duffel-api-token", "DUFFEL_ACCESS_TOKEN=[[duffel_live_{S:43}]]"),
        ("paystack-secret-key", "PAYSTACK_SECRET_KEY=[[sk_live_{H:40}]]"),
        (
            "coinbase-cdp-api-key-json",
            '{"name": "organizations/{@uuid}/apiKeys/{@uuid}", '
            '"privateKey": "{@pem:EC PRIVATE KEY/2/json}\\n"}',
        ),
        ("segment-public-api-token", "SEGMENT_PUBLIC_API_TOKEN=[[sgp_{N:64}]]"),
        ("klaviyo-private-key", "KLAVIYO_PRIVATE_KEY=[[pk_{H:34}]]"),
        # AI and data
        ("openai-legacy-key", "[[sk-{N:20}T3BlbkFJ{N:20}]]"),
        ("openai-project-key", "[[sk-proj-{S:120}]]"),
        ("openai-service-account-key", "OPENAI_API_KEY=[[sk-svcacct-{S:74}T3BlbkFJ{S:74}]]"),
        ("openai-admin-key", "OPENAI_ADMIN_KEY=[[sk-admin-{S:74}T3BlbkFJ{S:74}]]"),
        ("anthropic-key", "[[sk-ant-api03-{S:93}AA]]"),
        ("anthropic-admin-key", "ANTHROPIC_ADMIN_KEY=[[sk-ant-admin01-{S:93}AA]]"),
        ("anthropic-oauth-token", "[[sk-ant-oat01-{S:93}AA]]"),
        ("anthropic-oauth-refresh-token", "refresh with [[sk-ant-ort01-{S:93}AA]]"),
        ("huggingface-user-token", "huggingface-cli login --token [[hf_{A:34}]]"),
        ("huggingface-env-token", "HF_TOKEN=[[hf_{A:34}]]"),
        ("huggingface-org-token", "[[api_org_{A:34}]]"),
        ("groq-api-key", "GROQ_API_KEY=[[gsk_{N:52}]]"),
        ("replicate-api-token", "export REPLICATE_API_TOKEN=[[r8_{N:37}]]"),
        ("perplexity-api-key", "PPLX_API_KEY=[[pplx-{N:48}]]"),
        ("xai-api-key", "XAI_API_KEY=[[xai-{N:80}]]"),
        ("together-api-key", "TOGETHER_API_KEY=[[tgp_v1_{S:43}]]"),
        ("fireworks-api-key", "FIREWORKS_API_KEY=[[fw_{N:24}]]"),
        ("openrouter-api-key", "OPENROUTER_API_KEY=[[sk-or-v1-{H:64}]]"),
        ("langsmith-pat", "LANGSMITH_API_KEY=[[lsv2_pt_{H:32}_{H:10}]]"),
        ("langsmith-service-key", "LANGCHAIN_API_KEY=[[lsv2_sk_{H:32}_{H:10}]]"),
        ("pinecone-api-key", "PINECONE_API_KEY=[[pcsk_{N:5}_{N:63}]]"),
        (
            "twitter-bearer-token",
            "TWITTER_BEARER_TOKEN=[[AAAAAAAAAAAAAAAAAAAAA{N:10}AAAAAAA{N:12}%3D{N:50}]]",
        ),
        ("twitter-bearer-token-bare", "[[AAAAAAAAAAAAAAAAAAAAA{N:10}AAAAAAA{N:12}%3D{N:50}]]"),
        ("facebook-access-token", "fb access_token=[[EAAC{N:150}]]"),
        ("adafruit-io-key", "ADAFRUIT_IO_KEY=[[aio_{N:28}]]"),
        ("jwt", "[[{@jwt:hs256}]]"),
        ("bitcoin-wif-private-key", "bitcoin-cli importprivkey [[{@wif}]]"),
    ],
    "context": [
        (
            "azure-storage-connection-string",
            "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=[[{B:86}==]];"
            "EndpointSuffix=core.windows.net",
        ),
        (
            "azure-service-bus-connection-string",
            "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=Root;"
            "SharedAccessKey=[[{B:43}=]]",
        ),
        (
            "azure-cosmosdb-connection-string",
            "AccountEndpoint=https://acme-db.documents.azure.com:443/;AccountKey=[[{B:86}==]];",
        ),
        ("azure-devops-pat", "AZURE_DEVOPS_EXT_PAT=[[{q:52}]]"),
        (
            "azure-sas-url",
            "https://acmeassets.blob.core.windows.net/builds?sv=2022-11-02&ss=b&srt=co&sp=rl"
            "&se=2026-01-01T00:00:00Z&sig=[[{N:40}%2B{N:3}%3D]]",
        ),
        ("azure-function-key", "https://acme-fn.azurewebsites.net/api/ingest?code=[[{S:54}==]]"),
        ("twilio-auth-token", "TWILIO_ACCOUNT_SID=AC{H:32}\nTWILIO_AUTH_TOKEN=[[{H:32}]]"),
        ("datadog-api-key", "DD_API_KEY=[[{H:32}]]"),
        ("datadog-app-key", "DD_APP_KEY=[[{H:40}]]"),
        ("pagerduty-api-token", "PAGERDUTY_TOKEN=[[u+{S:18}]]"),
        ("cloudflare-api-token", "CLOUDFLARE_API_TOKEN=[[{S:40}]]"),
        ("vercel-token", "vercel deploy --prod --token [[{N:24}]]"),
        ("heroku-api-key-uuid", "HEROKU_API_KEY=[[{@uuid}]]"),
        ("ibm-cloud-api-key", "ibmcloud login --apikey [[{S:44}]]"),
        ("vault-legacy-token", "VAULT_TOKEN=[[s.{N:24}]]"),
        ("infisical-service-token", "INFISICAL_TOKEN=[[st.{H:24}.{H:32}.{H:32}]]"),
        (
            "kubeadm-bootstrap-token",
            "kubeadm join 10.0.0.10:6443 --token [[{n:6}.{n:16}]] "
            "--discovery-token-ca-cert-hash sha256:{H:64}",
        ),
        ("ngrok-authtoken", "ngrok config add-authtoken [[2{N:26}_{N:21}]]"),
        ("ngrok-config-authtoken", 'version: "2"\nauthtoken: [[2{N:26}_{N:21}]]'),
        ("okta-api-token", "OKTA_API_TOKEN=[[00{S:40}]]"),
        ("auth0-client-secret", "AUTH0_CLIENT_SECRET=[[{S:64}]]"),
        ("box-developer-token", "BOX_DEVELOPER_TOKEN=[[{N:32}]]"),
        ("twitch-client-secret", "TWITCH_CLIENT_SECRET=[[{n:30}]]"),
        ("atlassian-legacy-api-token", "CONFLUENCE_API_TOKEN=[[{N:24}]]"),
        ("snyk-token", "snyk auth [[{@uuid}]]"),
        ("codecov-token", "CODECOV_TOKEN=[[{@uuid}]]"),
        ("travis-ci-token", "travis login --api-token [[{N:22}]]"),
        ("jenkins-api-token", "JENKINS_API_TOKEN=[[11{H:32}]]"),
        ("cohere-api-key", "COHERE_API_KEY=[[{N:40}]]"),
        ("mistral-api-key", "MISTRAL_API_KEY=[[{N:32}]]"),
        ("deepseek-api-key", "DEEPSEEK_API_KEY=[[sk-{H:32}]]"),
        ("elevenlabs-api-key", "ELEVENLABS_API_KEY=[[sk_{H:48}]]"),
        ("wandb-api-key", "wandb login [[{H:40}]]"),
        ("plaid-secret", "PLAID_CLIENT_ID={H:24}\nPLAID_SECRET=[[{H:30}]]"),
        ("etherscan-api-key", "ETHERSCAN_API_KEY=[[{M:34}]]"),
        ("alchemy-rpc-url", "RPC_URL=https://eth-mainnet.g.alchemy.com/v2/[[{S:32}]]"),
        (
            "infura-rpc-url",
            "const provider = new JsonRpcProvider('https://mainnet.infura.io/v3/[[{H:32}]]')",
        ),
        ("ethereum-private-key", "DEPLOYER_PRIVATE_KEY=[[0x{H:64}]]"),
        ("lob-api-key", "LOB_API_KEY=[[live_{H:35}]]"),
        ("mixpanel-service-account-secret", "MIXPANEL_SERVICE_ACCOUNT_SECRET=[[{N:32}]]"),
        ("amplitude-secret-key", "AMPLITUDE_SECRET_KEY=[[{H:32}]]"),
        ("algolia-admin-key", "algoliasearch('{M:10}', '[[{H:32}]]')  // admin key"),
        ("zendesk-api-token", "ZENDESK_API_TOKEN=[[{N:40}]]"),
        ("facebook-app-secret", "FACEBOOK_APP_SECRET=[[{H:32}]]"),
        ("rollbar-access-token", "ROLLBAR_ACCESS_TOKEN=[[{H:32}]]"),
        ("pusher-app-secret", "PUSHER_APP_KEY={H:20}\nPUSHER_APP_SECRET=[[{H:20}]]"),
        ("linode-token", "LINODE_TOKEN=[[{H:64}]]"),
        ("hetzner-cloud-token", "HCLOUD_TOKEN=[[{N:64}]]"),
        ("scaleway-secret-key", "SCW_ACCESS_KEY=SCW{M:17}\nSCW_SECRET_KEY=[[{@uuid}]]"),
        ("confluent-api-secret", "CONFLUENT_CLOUD_API_SECRET=[[{B:64}]]"),
    ],
    "assignment": [
        ("aws-secret-env", "AWS_SECRET_ACCESS_KEY=[[{B:40}]]"),
        ("aws-secret-json", '{"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "[[{B:40}]]"}'),
        ("aws-secret-yaml", "aws_secret_access_key: [[{B:40}]]"),
        ("aws-secret-ini", "[default]\naws_secret_access_key = [[{B:40}]]"),
        ("env-db-password", "DB_PASSWORD=[[{N:14}7]]"),
        ("env-api-key-quoted", 'export API_KEY="[[{N:32}]]"'),
        ("json-client-secret", '{"client_id": "demo", "client_secret": "[[{N:30}1]]"}'),
        ("json-camel-case-access-token", '{"accessToken": "[[{N:40}]]", "expiresIn": 3600}'),
        # values of letters only: no digit to tell them from words
        ("env-letters-password", "SMTP_PASSWORD=[[{A:20}]]"),
        ("yaml-letters-token", "api_token: [[{A:24}]]"),
        ("json-letters-password", '{"username": "svc-deploy", "password": "[[{A:18}]]"}'),
        ("cli-password-flag", "docker login registry.acme.io --username ci --password [[{A:20}]]"),
        ("cli-token-equals-flag", "./scripts/publish.sh --token=[[{A:32}]] --channel stable"),
        ("export-secret-key-single-quoted", "export SECRET_KEY='[[{A:40}]]'"),
        ("toml-password", '[database]\nhost = "db.internal"\npassword = "[[{A:20}]]"'),
        ("ini-password", "[client]\nuser = backup\npassword = [[{A:22}]]"),
        (
            "xml-password",
            "<server><id>releases</id><username>deploy</username>"
            "<password>[[{A:20}]]</password></server>",
        ),
        ("java-properties-password", "spring.datasource.password=[[{A:20}]]"),
        ("compose-environment-password", "    environment:\n      - POSTGRES_PASSWORD=[[{A:20}]]"),
        ("python-kwarg-api-key", 'client = Client(api_key="[[{A:32}]]")'),
        ("js-object-api-key", "const config = { apiKey: '[[{A:32}]]', region: 'eu' };"),
        ("powershell-env-token", '$env:API_TOKEN = "[[{A:32}]]"'),
        ("windows-set-password", "set DB_PASSWORD=[[{A:18}]]"),
        ("dockerfile-env-space", "ENV API_KEY [[{A:32}]]"),
        ("tfvars-password", 'db_password = "[[{A:20}]]"'),
        (
            "ado-net-connection-string",
            "Server=tcp:acme.database.windows.net,1433;Database=app;User ID=app;"
            "Password=[[{A:20}]];Encrypt=True;",
        ),
        (
            "pypirc-password",
            "[distutils]\nindex-servers = private\n\n[private]\nrepository = https://pypi.acme.io/\n"
            "username = deploy\npassword = [[{A:24}]]",
        ),
        ("netrc-one-line", "machine api.acme.io login deploy password [[{N:32}]]"),
        ("netrc-multi-line", "machine git.acme.io\n  login ci\n  password [[{A:24}]]"),
        ("pgpass-line", "db.internal:5432:app:app:[[{N:24}]]"),
    ],
    "header": [
        ("http-bearer-header", "Authorization: Bearer [[{S:40}]]"),
        ("http-basic-header", "Authorization: Basic [[{@b64:deploy}]]"),
        (
            "curl-github-token-header",
            'curl -H "Authorization: token [[{@gh:ghp}]]" https://api.github.com/user',
        ),
        ("curl-x-api-key-header", "curl -H 'X-Api-Key: [[{N:32}]]' https://api.acme.io/v1/reports"),
        ("curl-user-flag", "curl -u deploy:[[{N:20}]] https://ci.acme.io/job/build/api/json"),
        (
            "python-requests-bearer-header",
            'requests.get(url, headers={"Authorization": "Bearer [[{N:48}]]"})',
        ),
        ("okta-ssws-header", "Authorization: SSWS [[00{S:40}]]"),
        (
            "cloudflare-global-api-key-header",
            "curl -H 'X-Auth-Email: ops@acme.io' -H 'X-Auth-Key: [[{H:37}]]' "
            "https://api.cloudflare.com/client/v4/zones",
        ),
        ("fastly-key-header", "Fastly-Key: [[{S:32}]]"),
        ("postmark-server-token-header", "X-Postmark-Server-Token: [[{@uuid}]]"),
        (
            "azure-openai-api-key-header",
            "curl https://acme.openai.azure.com/openai/deployments/gpt/chat/completions "
            "-H 'api-key: [[{H:32}]]'",
        ),
        ("gitlab-private-token-header", "--header 'PRIVATE-TOKEN: [[glpat-{S:20}]]'"),
    ],
    "url": [
        ("basic-auth-url", "https://deploy:[[{N:18}]]@example.com/private/repo.git"),
        ("postgres-url", "DATABASE_URL=postgres://app:[[{N:18}]]@db.internal:5432/app"),
        ("mongodb-url", "mongodb+srv://admin:[[{N:18}]]@cluster0.example.net/test"),
        ("postgresql-url", "postgresql://reporting:[[{N:20}]]@pg.acme.io:5432/warehouse"),
        ("mysql-url", "mysql://root:[[{N:20}]]@mysql.internal:3306/app"),
        (
            "mongodb-standard-url",
            "mongodb://root:[[{N:20}]]@mongo-0.mongo:27017/admin?authSource=admin",
        ),
        ("redis-url", "REDIS_URL=redis://:[[{N:24}]]@cache.internal:6379/0"),
        ("amqp-url", "amqp://app:[[{N:20}]]@rabbitmq.internal:5672/%2F"),
        ("ftp-url", "ftp://upload:[[{N:16}]]@ftp.acme.io/incoming/"),
        ("smtp-url", "EMAIL_URL=smtp://mailer:[[{N:20}]]@smtp.acme.io:587"),
        ("ldap-url", "LDAP_URI=ldap://binduser:[[{N:20}]]@ldap.acme.io:389"),
        ("https-letters-password-url", "https://ci:[[{A:22}]]@nexus.acme.io/repository/npm/"),
        ("sqlalchemy-mssql-url", "mssql+pyodbc://sa:[[{N:20}]]@sql.acme.io:1433/app"),
        ("jdbc-password-param", "jdbc:postgresql://db:5432/app?user=app&password=[[{N:20}]]"),
        (
            "url-access-token-query",
            "https://api.acme.io/v1/export?access_token=[[{N:40}]]&format=csv",
        ),
        (
            "pip-conf-index-url",
            "[global]\nindex-url = https://deploy:[[{N:20}]]@pypi.acme.io/simple",
        ),
        ("git-credential-url", "https://x-access-token:[[{@gh:ghs}]]@github.com/acme/infra.git"),
        ("cloudinary-url", "CLOUDINARY_URL=cloudinary://{D:15}:[[{S:27}]]@acme"),
    ],
    "key-block": [
        ("rsa-private-key-fenced", "```\n{@pem:RSA PRIVATE KEY/12}\n```"),
        ("private-key-unfenced-4096", "{@pem:PRIVATE KEY/50}"),
        ("openssh-private-key", "```\n{@pem:OPENSSH PRIVATE KEY/6}\n```"),
        ("ec-private-key", "{@pem:EC PRIVATE KEY/3}"),
        ("dsa-private-key", "{@pem:DSA PRIVATE KEY/10}"),
        ("encrypted-pkcs8-private-key", "{@pem:ENCRYPTED PRIVATE KEY/16}"),
        ("rsa-private-key-legacy-encrypted", "{@pem:RSA PRIVATE KEY/12/enc}"),
        ("pgp-private-key-block", "{@pgp}"),
        ("putty-private-key", "{@putty}"),
        ("ssh2-rfc4716-private-key", "{@ssh2}"),
        (
            "ssh-key-in-json",
            '{"name": "deploy", "ssh_key": "{@pem:OPENSSH PRIVATE KEY/5/json}\\n"}',
        ),
        ("ssh-key-in-yaml-block", "deploy_key: |\n    {@pem:OPENSSH PRIVATE KEY/5/indent}"),
        (
            "gcp-service-account-json",
            '{\n  "type": "service_account",\n  "project_id": "demo-project",\n'
            '  "private_key_id": "[[{H:40}]]",\n'
            '  "private_key": "{@pem:PRIVATE KEY/4/json}\\n",\n'
            '  "client_email": "bot@demo-project.iam.gserviceaccount.com"\n}',
        ),
    ],
    "encoded": [
        (
            "aws-credentials-file-base64",
            "echo [[{@b64:aws-file}]] | base64 -d > ~/.aws/credentials",
        ),
        (
            "kubeconfig-client-key-data",
            "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
            "    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSU{B:200}\n"
            "    client-key-data: [[{@b64:rsa-key}]]",
        ),
        (
            "kubernetes-secret-token-base64",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: deployer-token\n"
            "type: kubernetes.io/service-account-token\ndata:\n  token: [[{@b64:k8s-jwt}]]",
        ),
        ("docker-config-auth", '{"auths": {"registry.acme.io": {"auth": "[[{@b64:ci}]]"}}}'),
        ("npmrc-legacy-auth", "//npm.acme.io/:_auth=[[{@b64:npm}]]"),
    ],
    # passwords handed to a command on its command line (#48)
    "command": [
        ("docker-login-p", "docker login -u ci -p [[{w:16}]] registry.acme.io"),
        ("podman-login-password", "podman login --username ci --password [[{w:18}]] quay.io"),
        ("helm-registry-login", "helm registry login ghcr.io -u ci -p [[{N:20}]]"),
        ("oc-login-p", "oc login https://api.ocp.acme.io:6443 -u admin -p [[{N:16}]]"),
        ("mysql-attached-p", "mysql -u root -p[[{N:14}]] -h db.internal app"),
        ("mysqldump-quoted-p", "mysqldump -uroot -p'[[{w:14}]]' --all-databases > dump.sql"),
        ("mariadb-attached-p", "mariadb -h 10.0.0.5 -u app -p[[{N:16}]]"),
        ("sshpass-p", "sshpass -p '[[{w:14}]]' ssh deploy@10.0.0.7 uptime"),
        ("sshpass-p-bare", "sshpass -p [[{N:14}]] scp app.tar.gz deploy@host:/srv"),
        ("redis-cli-a", "redis-cli -h cache.internal -a [[{N:24}]] ping"),
        ("sqlcmd-P", 'sqlcmd -S tcp:db.acme.io,1433 -U sa -P [[{w:16}]] -Q "SELECT 1"'),
        ("ldapsearch-w", "ldapsearch -x -D cn=admin,dc=acme,dc=io -w [[{N:16}]] -b dc=acme,dc=io"),
        ("plink-pw", "plink -ssh deploy@10.0.0.8 -pw [[{N:16}]] uptime"),
        ("keytool-storepass", "keytool -list -keystore app.jks -storepass [[{N:16}]]"),
        ("openssl-passin", "openssl pkcs12 -in cert.p12 -nodes -passin pass:[[{N:16}]]"),
        ("smbclient-U", "smbclient //fs.acme.io/share -U backup%[[{N:16}]]"),
        ("7z-attached-p", "7z x backup.7z -p[[{N:16}]] -o/tmp/restore"),
        ("xfreerdp-p", "xfreerdp /v:10.0.0.9 /u:Administrator /p:[[{N:16}]]"),
        ("mongosh-p", "mongosh mongodb://db.internal:27017 -u admin -p [[{N:18}]]"),
        ("psexec-p", "psexec \\\\srv01 -u ACME\\admin -p [[{N:16}]] cmd.exe"),
        ("ipmitool-P", "ipmitool -I lanplus -H 10.0.0.20 -U ADMIN -P [[{N:12}]] power status"),
        ("sqlplus-user-pwd-db", "sqlplus scott/[[{N:12}]]@orcl"),
        ("expdp-user-pwd-db", "expdp system/[[{N:12}]]@prod schemas=app directory=dp"),
        ("sqlplus-as-sysdba", "sqlplus sys/[[{N:12}]] as sysdba"),
        ("jdbc-oracle-thin", "jdbc:oracle:thin:app/[[{N:14}]]@db.acme.io:1521:orcl"),
    ],
    # passwords in code and configuration handed over by position or attribute (#48)
    "config": [
        ("wordpress-define", "define( 'DB_PASSWORD', '[[{w:16}]]' );"),
        ("php-define-auth-key", "define('AUTH_KEY', '[[{w:40}]]');"),
        ("dotnet-appsettings-add", '<add key="SmtpPassword" value="[[{w:16}]]" />'),
        ("dotnet-add-value-first", '<add value="[[{N:32}]]" key="ApiKey"/>'),
        ("spring-property-password", '<property name="password" value="[[{N:16}]]"/>'),
        ("phpunit-env-token", '<env name="API_TOKEN" value="[[{N:32}]]" force="true"/>'),
        ("xml-entry-key-password", '<entry key="db.password">[[{N:16}]]</entry>'),
        (
            "powershell-securestring",
            '$pw = ConvertTo-SecureString "[[{w:16}]]" -AsPlainText -Force',
        ),
        ("dotnet-network-credential", 'new NetworkCredential("deploy", "[[{w:16}]]")'),
        (
            "aws-basic-credentials",
            'new BasicAWSCredentials("[[AKIA{Q:16}]]", "[[{B:40}]]")',
        ),
        (
            "aws-credentials-csv",
            "User name,Password,Access key ID,Secret access key,Console login link\n"
            "deploy,,[[AKIA{Q:16}]],[[{B:40}]],https://{D:12}.signin.aws.amazon.com/console",
        ),
        (
            "azure-client-secret-credential",
            'new ClientSecretCredential("{@uuid}", "{@uuid}", "[[{N:3}8Q~{T:34}]]")',
        ),
        ("java-set-password", 'dataSource.setPassword("[[{w:16}]]");'),
        ("python-environ-subscript", 'os.environ["OPENAI_API_KEY"] = "[[{N:40}]]"'),
        ("java-system-property", 'System.setProperty("db.password", "[[{N:16}]]");'),
        (
            "connection-string-at-sign",
            "Server=db.acme.io;Database=app;User Id=app;Password=[[{N:6}@{N:6}]];",
        ),
        (
            "odbc-braced-pwd",
            "Driver={ODBC Driver 18 for SQL Server};Server=db;UID=app;PWD={[[{N:8};{N:8}]]};",
        ),
        (
            "jdbc-properties-password",
            "jdbc:sqlserver://db.acme.io:1433;databaseName=app;user=app;password=[[{w:16}]];",
        ),
    ],
    # values of every length: real STS session tokens are 400 to 1,200 characters (#48)
    "long": [
        ("quoted-session-token-900", 'aws_session_token: "[[{B:900}]]"'),
        ("bare-token-1200", "API_TOKEN=[[{N:1200}]]"),
        ("single-quoted-secret-500", "client_secret = '[[{S:500}]]'"),
        ("flag-token-700", "deploy --token [[{N:700}]]"),
        ("sts-session-token-json", '{"SessionToken": "[[IQoJb3JpZ2luX2Vj{B:1100}]]"}'),
        ("xml-password-600", "<password>[[{N:600}]]</password>"),
        ("url-password-600", "https://ci:[[{N:600}]]@nexus.acme.io/repository/"),
        ("command-login-token-800", "cargo login [[{N:800}]]"),
    ],
    "prose": [
        ("aws-secret-in-prose", "my aws secret key is [[{B:40}]] please rotate it"),
        ("password-in-prose", "the root password on staging is now [[{N:16}]] until Friday"),
        ("api-token-in-prose", "I set the API token on the runner to [[{S:40}]] and it still 401s"),
    ],
}


# Tokens hidden from a pattern that reads raw characters (#48): each base token (its
# prefix, its template) with each way of hiding it (`HIDINGS`).
_HIDDEN_BASES = [
    ("ghp_", "{@gh:ghp}"),
    ("glpat-", "glpat-{S:20}"),
    ("sk-ant-oat01-", "sk-ant-oat01-{S:93}AA"),
    ("hf_", "hf_{A:34}"),
    ("xoxb-", "xoxb-{D:12}-{D:13}-{N:24}"),
    ("sk_live_", "sk_live_{N:24}"),
    ("npm_", "{@gh:npm}"),
]
_ESCAPED = {  # how each separator is written escaped, per way of hiding
    "markdown escape": {"_": "\\_", "-": "\\-"},
    "html entity": {"_": "&#95;", "-": "&#45;"},
    "html hex entity": {"_": "&#x5f;", "-": "&#x2d;"},
    "percent-encoding": {"_": "%5F", "-": "%2D"},
    "json escape": {"_": "\\u005f", "-": "\\u002d"},
}
_INSIDE = {
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "soft hyphen": "\u00ad",
}
HIDINGS = (*_INSIDE, *_ESCAPED, "line break after the prefix", "base64", "hex")


def hidden(token: str, prefix: str, how: str) -> tuple[str, tuple[str, ...]]:
    """`token` hidden `how`, and the parts of it that must not survive."""
    body = token[len(prefix) :]
    if how in _INSIDE:
        half = len(body) // 2
        return prefix + body[:half] + _INSIDE[how] + body[half:], (body[:half], body[half:])
    if how in _ESCAPED:
        return prefix[:-1] + _ESCAPED[how][prefix[-1]] + body, (body,)
    if how == "line break after the prefix":
        return f"{prefix}\n{body}", (body,)
    encoded = base64.b64encode(token.encode()).decode() if how == "base64" else token.encode().hex()
    return encoded, (encoded,)


def hidden_member(rng: random.Random, base: int, how: str) -> Secret:
    prefix, template = _HIDDEN_BASES[base % len(_HIDDEN_BASES)]
    token = _render(rng, template)[0]
    snippet, parts = hidden(token, prefix, how)
    name = f"{prefix.rstrip('_-')}-{how.replace(' ', '-')}"
    return Secret(name, snippet, parts, "\n" not in snippet, "obfuscated")


def formats(family: str) -> list[tuple[str, str]]:
    """The (name, template) of every format of `family` (not "obfuscated")."""
    return _FORMATS[family]


def member(rng: random.Random, family: str, index: int) -> Secret:
    """A fresh member of `family`: its `index`-th format (modulo) with new random values,
    or for "obfuscated" a base token hidden one way."""
    if family == "obfuscated":
        return hidden_member(rng, index, HIDINGS[index // len(_HIDDEN_BASES) % len(HIDINGS)])
    name, template = _FORMATS[family][index % len(_FORMATS[family])]
    snippet, parts = _render(rng, template)
    return Secret(name, snippet, tuple(dict.fromkeys(parts)), "\n" not in snippet, family)


def corpus(seed: int = 20261201) -> list[Secret]:
    """One synthetic secret of every format, the same for the same seed, and every base
    token hidden every way."""
    rng = random.Random(seed)
    secrets = []
    for family, formats in _FORMATS.items():
        for name, template in formats:
            snippet, parts = _render(rng, template)
            unique = tuple(dict.fromkeys(parts))
            secrets.append(Secret(name, snippet, unique, "\n" not in snippet, family))
    for how in HIDINGS:
        for base in range(len(_HIDDEN_BASES)):
            secrets.append(hidden_member(rng, base, how))
    return secrets


def covered(text: str, part: str, spans: list[tuple[int, int, str]]) -> bool:
    """Whether every occurrence of `part` in `text` lies wholly inside one of `spans`:
    a redaction that leaves any of a secret's characters does not count."""
    at = text.find(part)
    while at >= 0:
        if not any(s <= at and at + len(part) <= e for s, e, _ in spans):
            return False
        at = text.find(part, at + 1)
    return True
