"""Passwords given to a command on its command line, and in the code and config forms
that hand one over by position rather than by a name.

A command line names no secret: `docker login -p <password>`, `mysql -u root -p<password>`,
`sshpass -p <password> ssh host`, `sqlplus scott/<password>@orcl`. What says it is a
password is the command and the option, so the rules here are a table of commands and
the options through which each takes a password (each from the command's own manual),
read off the rest of the command's line with shell quoting. The code and config forms
are the same idea in other syntax: a call whose callee says it takes credentials
(`BasicAWSCredentials("AKIA…", "<secret>")`, `ConvertTo-SecureString "<password>"
-AsPlainText`, `setPassword("<password>")`), and a connection string's `Password=`.

A value is taken only when it is one (`secret_values.a_value`): `$VAR`, `%VAR%`,
`{placeholder}`, `<password>`, `***` and the like are references or examples.
"""

from __future__ import annotations

import re

from ghindex.state.secret_values import PLACEHOLDERS, a_value

Span = tuple[int, int, str]

# (command, its options that take a password as their value). An option ending in `+`
# also takes it attached (`-pS3cret`, as mysql's `-p` and 7-Zip's `-p` do: `mysql -p db`
# prompts and names a database, so there only the attached form counts).
_COMMANDS: list[tuple[str, tuple[str, ...]]] = [
    # container registries' `login` (docker, podman, buildah, skopeo, nerdctl, helm
    # registry, oras, crane, regctl, OpenShift `oc login`, Azure CLI `az login`)
    (
        r"(?:docker|podman|buildah|skopeo|nerdctl|helm[ \t]+registry|oras|crane[ \t]+auth"
        r"|regctl[ \t]+registry|oc|az|az[ \t]+acr|cf|argocd|vault)[ \t]+login",
        ("-p", "--password", "--secret"),
    ),
    (r"sshpass", ("-p",)),
    (r"mongo(?:sh|dump|restore|export|import|stat|top|files)?", ("-p", "--password")),
    (r"redis-cli", ("-a", "--pass")),
    (r"(?:sqlcmd|bcp|osql|isql|ipmitool|zip)", ("-P",)),
    (r"ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn|exop)", ("-w",)),
    (r"(?:plink|pscp|psftp)", ("-pw",)),
    (
        r"(?:keytool|jarsigner)",
        ("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass"),
    ),
    (r"(?:psexec|paexec|smbmap|crackmapexec|netexec|nxc|evil-winrm|hydra)", ("-p",)),
    (r"(?:xfreerdp|wlfreerdp)", ("/p:",)),
    (r"(?:gpg|gpg2)", ("--passphrase",)),
    (r"(?:openssl)", ("-passin", "-passout", "-pass", "-k")),
    (
        r"(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlpump"
        r"|mariadb|mariadb-dump|mariadb-admin|7z|7za|7zr|unrar|rar)",
        ("-p+",),
    ),
    (r"(?:smbclient|rpcclient|smbget)", ("-U%",)),
]
# Without a leading look-behind, so that `re` skips to the commands' first letters; the
# character before a match is checked instead.
_COMMAND = re.compile(
    "(?:"
    + "|".join(f"(?P<c{i}>{pattern})" for i, (pattern, _) in enumerate(_COMMANDS))
    + r")(?:\.exe)?(?=[ \t])"
)
_NAME_CHAR = re.compile(r"[\w.-]")  # `/usr/bin/docker` is docker
_KEY_CHAR = re.compile(r"[\w-]")
# The rest of the command's line: to the end of the line, a pipe or a `;`/`&&`.
_ARGUMENTS = re.compile(r"(?:\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\n|;&\"']){0,2000}")
_WORD = re.compile(r"\"([^\"\n]*)\"|'([^'\n]*)'|(\S+)")
_QUOTED = re.compile(r"^([^\"']*)[\"'](.*)[\"']$")


# Every option above: a line holding none is not searched for commands at all.
_OPTION = re.compile(r"[ \t](?:-[pPawkU]|--pass|--secret|-storepass|-keypass|-srcstorepass|/p:)")


def command_passwords(text: str) -> list[Span]:
    """Passwords given as an option's value on a command's line."""
    spans: list[Span] = []
    searched = -1  # the end of the last line searched
    for option in _OPTION.finditer(text):
        if option.start() < searched:
            continue
        start = text.rfind("\n", 0, option.start()) + 1
        end = text.find("\n", option.end())
        searched = len(text) if end < 0 else end
        spans += _on_line(text, start, searched)
    return spans


def _on_line(text: str, start: int, end: int) -> list[Span]:
    spans: list[Span] = []
    reach = start  # arguments already read: a command named inside them is one of them
    for match in _COMMAND.finditer(text, start, end):
        if match.start() < reach or (match.start() and _NAME_CHAR.match(text, match.start() - 1)):
            continue
        options = _COMMANDS[int(match.lastgroup[1:])][1]
        rest = _ARGUMENTS.match(text, match.end())
        reach = rest.end()
        words = list(_WORD.finditer(text, rest.start(), rest.end()))
        for i, word in enumerate(words):
            found = _value(word, words[i + 1] if i + 1 < len(words) else None, options)
            if found is not None and a_value(text[found[0] : found[1]], "password", 4):
                spans.append((*found, "password"))
    return spans


def _value(
    word: re.Match[str], following: re.Match[str] | None, options: tuple[str, ...]
) -> tuple[int, int] | None:
    """Where the password is when `word` is one of `options` (or carries it)."""
    raw = word.group(0)
    for option in options:
        if option == "-U%":  # smbclient's `-U user%password`
            if raw == "-U" and following is not None and "%" in following.group(0):
                at = following.group(0).index("%") + 1
                return _unquoted(following.start() + at, following.end(), following)
            continue
        attached = option.endswith("+")
        flag = option.rstrip("+")
        if attached:
            if raw.startswith(flag) and len(raw) > len(flag) and raw[len(flag)] not in "-=":
                return _unquoted(word.start() + len(flag), word.end(), word)
            continue
        if flag.endswith(":") and raw.startswith(flag) and len(raw) > len(flag):
            return _unquoted(word.start() + len(flag), word.end(), word)
        if raw.startswith(flag + "=") and flag.startswith("--"):
            return _unquoted(word.start() + len(flag) + 1, word.end(), word)
        if raw == flag and following is not None:
            start, end = _group_span(following)
            if flag.startswith("-pass"):  # openssl: `pass:<p>`, not `env:`, `file:`, `fd:`
                if not following.string.startswith("pass:", start):
                    return None
                start += len("pass:")
            return (start, end)
    return None


def _group_span(word: re.Match[str]) -> tuple[int, int]:
    group = next(i for i in (1, 2, 3) if word.group(i) is not None)
    return word.span(group)


def _unquoted(start: int, end: int, word: re.Match[str]) -> tuple[int, int]:
    """`start`..`end` of `word`'s text, less quotes around it (`-p'S3cret'`)."""
    piece = word.string[start:end]
    if len(piece) >= 2 and piece[0] in "\"'" and piece[-1] == piece[0]:
        return start + 1, end - 1
    return start, end


# Oracle's `user/password@connect_identifier` (SQL*Plus, SQL*Loader, Data Pump, RMAN,
# DGMGRL, `CONNECT`, `userid=`), and the same in a JDBC thin URL; also `… as sysdba`.
_ORACLE = re.compile(
    r"(?i)(?:(?<![\w.-])(?:sqlplus|sqlldr|expdp|impdp|exp|imp|rman[ \t]+target|dgmgrl|sqlcl|sql"
    r"|conn|connect|userid[ \t]*=)(?:\.exe)?[ \t]+(?:-[A-Za-z]+[ \t]+){0,3}[\"']?"
    r"|jdbc:oracle:(?:thin|oci):)"
    r"[A-Za-z][\w$#]{0,29}/([^\s/@\"']{1,4096}+)(?=@|[ \t]+as[ \t]+sys)"
)

# A call whose callee says it takes credentials, with string literals for arguments:
# the last literal is the secret (the password after a user, the secret after a key id
# or a client id). A setter named after a secret takes one literal.
_CALL = re.compile(
    r"(?:Credentials?|CredentialsProvider|Auth|Authentication|AuthenticationHeaderValue|login"
    r"|Login|authenticate|Password|password|Passwd|Secret|secret|Token|token|ApiKey|apiKey"
    r"|api_key|AccessKey|accessKey|Passphrase|passphrase)[ \t]*\(([^()\n]{1,2000}+)\)"
)
_CALLEE = re.compile(r"[A-Za-z_$][\w$]{0,80}$")
_CREDENTIAL_CALLEE = re.compile(
    r"(?:Credentials?|CredentialsProvider|BasicAuth|DigestAuth|Authentication"
    r"|AuthenticationHeaderValue|^login|^Login|^authenticate)$"
)
_SECRET_SETTER = re.compile(
    r"^(?:set|with|Set|With)_?(?:[A-Za-z]*_?)?(?:Password|password|Passwd|Secret|secret|Token"
    r"|token|ApiKey|apiKey|api_key|AccessKey|accessKey|Passphrase|passphrase)$"
)
_LITERAL = re.compile(
    r"^[ \t]*[@$]?[rbuRBU]?([\"'])([^\"'\n]*)\1[ \t]*(?:\.[A-Za-z]\w*\(\))?[ \t]*$"
)
# PowerShell: `ConvertTo-SecureString "<password>" -AsPlainText -Force`.
_SECURE_STRING = re.compile(
    r"(?i)ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?([\"'])([^\"'\n]{1,4096}+)\1"
)
# A connection string's password (ADO.NET, ODBC, OLE DB, JDBC properties): the value
# runs to the `;`, whatever it holds (`@`, spaces), or is braced or quoted.
_CONNECTION_PASSWORD = re.compile(
    r"(?i)(?:password|pwd|passwd)[ \t]*=[ \t]*"
    r"(?:\{([^}\n]{1,4096}+)\}|\"([^\"\n]{1,4096}+)\"|'([^'\n]{1,4096}+)'|([^;\"'\n]{1,4096}+))"
    r"(?=[ \t]*;)"
)


_CALL_NEEDLES = (
    "credential(",
    "credentials(",
    "provider(",
    "auth(",
    "authentication(",
    "headervalue(",
    "login(",
    "authenticate(",
    "password(",
    "passwd(",
    "secret(",
    "token(",
    "apikey(",
    "api_key(",
    "accesskey(",
    "passphrase(",
)
_ORACLE_NEEDLES = ("sql", "exp", "imp", "rman", "dgmgrl", "conn", "userid", "jdbc:oracle")
_ORACLE_HINT = re.compile(r"/[^\s/@\"']{1,4096}+(?:@|[ \t]+as[ \t]+sys)", re.IGNORECASE)


def code_passwords(text: str) -> list[Span]:
    """Passwords handed over by position: credential calls, PowerShell's secure
    strings, connection strings, Oracle's `user/password@db`."""
    spans: list[Span] = []
    lower = text.lower()
    if "(" in text and any(n in lower for n in _CALL_NEEDLES):
        for match in _CALL.finditer(text):
            spans += _call_secret(match)
    if "securestring" in lower:
        for match in _SECURE_STRING.finditer(text):
            if a_value(match.group(2), "password", 4):
                spans.append((*match.span(2), "password"))
    if ";" in text and ("pwd" in lower or "passw" in lower):
        for match in _CONNECTION_PASSWORD.finditer(text):
            if match.start() and _KEY_CHAR.match(text, match.start() - 1):
                continue  # `db_password=`: a name's end, not the keyword
            group = next(g for g in (1, 2, 3, 4) if match.group(g) is not None)
            value = match.group(group).strip()
            if a_value(value.replace(" ", "_"), "password", 4):
                spans.append((*match.span(group), "password"))
    if _ORACLE_HINT.search(text) and any(n in lower for n in _ORACLE_NEEDLES):
        for match in _ORACLE.finditer(text):
            if a_value(match.group(1), "password", 4):
                spans.append((*match.span(1), "password"))
    return spans


def _call_secret(match: re.Match[str]) -> list[Span]:
    text = match.string
    name_end = text.index("(", match.start())
    callee = _CALLEE.search(text, max(match.start() - 80, 0), name_end)
    if callee is None or callee.start() > match.start():
        return []
    callee = callee.group(0).rstrip(" \t")
    setter = _SECRET_SETTER.match(callee) is not None
    if not setter and not _CREDENTIAL_CALLEE.search(callee):
        return []
    arguments, at = match.group(1), match.start(1)
    literals, offset = [], 0
    for piece in arguments.split(","):
        literal = _LITERAL.match(piece)
        if literal is not None:
            literals.append((at + offset + literal.start(2), at + offset + literal.end(2)))
        offset += len(piece) + 1
    if not literals or (not setter and len(literals) < 2):
        return []
    start, end = literals[-1]
    value = match.string[start:end]
    if not a_value(value, "password", 4) or PLACEHOLDERS.search(value):
        return []
    return [(start, end, "password")]
