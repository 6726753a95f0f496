"""Messages as they arrive, before the SDK reads them: a tool's arguments with a key
given twice are refused, not read as the last one.

JSON parsers keep the last of two equal keys (`{"rerank": false, "rerank": true}` is
`rerank: true`), so a message can show one value to whatever looked at it first and
act on another. ghindex reads every message once more here, keeping each object's keys
as given; where a `tools/call` message's arguments (at any depth) repeat a key, the
arguments are replaced by `{DUPLICATE: "<key>"}`, which the server's argument check
(`server.StrictServer`) refuses in one line naming the key. Messages without a repeated
key pass through untouched. Over HTTP the request body is read here (`guard`); over
stdio each line (`server.StdinLines`).
"""

from __future__ import annotations

import json
from typing import Any

# The key that stands for arguments with a repeated key: no argument can be named so.
DUPLICATE = "\x00duplicate key"
MAX_BODY = 4 * 2**20  # the SDK's own limit on a request body: larger ones it refuses


class _Keys(dict):
    """A JSON object, and the first key it was given twice (None: none was)."""

    repeated: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Keys:
    found = _Keys()
    for key, value in pairs:
        if key in found and found.repeated is None:
            found.repeated = key
        found[key] = value
    return found


def _repeated(value: Any) -> str | None:
    """The first key given twice in an object anywhere in `value`."""
    if isinstance(value, _Keys):
        if value.repeated is not None:
            return value.repeated
        return next((k for k in map(_repeated, value.values()) if k is not None), None)
    if isinstance(value, list):
        return next((k for k in map(_repeated, value) if k is not None), None)
    return None


def marked(text: str | bytes) -> str | bytes:
    """`text` (one JSON-RPC message, or a batch) as given, or, where a tool call's
    arguments repeat a key, with those arguments replaced by `{DUPLICATE: key}`."""
    try:
        message = json.loads(text, object_pairs_hook=_object)
    except (ValueError, RecursionError):
        return text  # not JSON: the SDK answers that
    changed = False
    for one in message if isinstance(message, list) else [message]:
        params = one.get("params") if isinstance(one, dict) else None
        arguments = params.get("arguments") if isinstance(params, dict) else None
        key = _repeated(arguments)
        if key is not None:
            params["arguments"] = {DUPLICATE: key}
            changed = True
    if not changed:
        return text
    again = json.dumps(message)
    return again.encode() if isinstance(text, bytes) else again


def guard(app: Any) -> Any:
    """An ASGI wrapper reading each POST's body whole and passing on `marked(body)`; a
    body over MAX_BODY goes on as it came (the SDK refuses it)."""

    async def guarded(scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        parts, size, last = [], 0, None
        while True:
            last = await receive()
            if last["type"] != "http.request":
                break
            parts.append(last.get("body", b""))
            size += len(parts[-1])
            if not last.get("more_body") or size > MAX_BODY:
                break
        body = b"".join(parts)
        whole = last["type"] == "http.request" and not last.get("more_body")
        if whole:
            body = marked(body)
        replay = [{"type": "http.request", "body": body, "more_body": not whole}]
        if last["type"] != "http.request":  # the client left: say so after the body
            replay.append(last)

        async def again():
            return replay.pop(0) if replay else await receive()

        await app(scope, again, send)

    return guarded
