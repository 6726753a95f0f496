"""What commands print: JSON documents on stdout, readable text, progress on stderr.

Everything a command prints goes through `say` (text for people) or `emit_json`, both
terminal-safe (see cli/terminal.py); the `*_text` functions return text already made
`visible`, so whatever prints it, a title or body cannot act on the terminal."""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from ghindex.cli.progress import on_stderr
from ghindex.cli.terminal import say, visible
from ghindex.progress import Progress

if TYPE_CHECKING:  # importing search loads lancedb (over a second): keep it out of --help
    from ghindex.query.search import SearchResponse
    from ghindex.snapshot.audit import AuditReport

__all__ = [
    "audit_text",
    "configure_logging",
    "context_text",
    "emit_json",
    "item_text",
    "progress",
    "say",
    "search_text",
    "visible",
]


class _StderrHandler(logging.StreamHandler):
    """Log lines to whatever sys.stderr is when they are written (click's test
    runner swaps it), one line each."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))  # messages quote what GitHub answered


def configure_logging(debug: bool) -> None:
    """ghindex's own messages (rate-limit waits, retries) go to stderr."""
    logger = logging.getLogger("ghindex")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    logger.propagate = False


def emit_json(document: Any) -> None:
    """`document` as JSON on stdout. json.dumps escapes C0 controls but leaves DEL, C1
    and bidirectional characters raw; `visible` writes those as JSON escapes too (they
    occur only inside strings), so the text is safe in a terminal and parses back to
    exactly `document`."""
    click.echo(visible(json.dumps(document, indent=2, ensure_ascii=False, default=str)))


def progress(live: bool = True) -> Progress:
    """Where a command's long steps show, on stderr only (see `cli/progress.py`): live
    bars when `live` (no --json) and stderr is a terminal, else a status line every
    few seconds."""
    return on_stderr(live)


def search_text(response: SearchResponse) -> str:
    lines = [f"note: {note}" for note in response.notes]
    for unmatched in response.filters_unmatched:
        lines.append(f"note: no indexed item has {unmatched}")
    if not response.results:
        lines.append(
            f"no results for {response.query!r}"
            if response.query
            else "no item matches the filters"
        )
    for rank, hit in enumerate(response.results, 1):
        state = f", {hit.state}" if hit.state else ""
        labels = f"  [{', '.join(hit.labels)}]" if hit.labels else ""
        lines.append(f"{rank:2}. {hit.entity}  ({hit.entity_type}{state})  {hit.title}{labels}")
        why = ["exact match"] if hit.exact else []
        why += [
            f"{name} #{value}"
            for name, value in (("dense", hit.dense_rank), ("sparse", hit.sparse_rank))
            if value is not None
        ]
        if hit.near:
            why.append(f"near {hit.near}")
        if hit.rerank_score is not None:
            why.append(f"rerank {hit.rerank_score:.3f}")
        if response.mode == "scan":  # no query, so no score: the time it is ordered by
            lines.append(f"    {hit.url}  updated {hit.updated_at}")
        else:
            lines.append(f"    {hit.url}  score {hit.score:.4f} ({', '.join(why)})")
        if hit.handle != hit.entity:
            lines.append(f"    matched {hit.type} {hit.handle}")
        if hit.same_entity:
            lines.append(f"    +{len(hit.same_entity)} more matching rows of this item")
        for name, handles in (("fixed by", hit.fixed_by), ("closes", hit.closes)):
            if handles:
                lines.append(f"    {name} {', '.join(handles)}")
        if hit.snippet:
            lines.append(f"    {hit.snippet}")
    if response.truncated:
        lines.append(f"(more items match: raise -k above {response.k})")
    if response.graph_results:
        lines.append("linked:")
        for link in response.graph_results:
            how = f"{link['kind']} ({link['direction']}) of {link['from']}, hop {link['hop']}"
            lines.append(f"    {link['handle']}  {how}  {link['title'] or ''}".rstrip())
    return visible("\n".join(lines))


def context_text(body: dict[str, Any]) -> str:
    """A context pack, for reading: each passage under its citation."""
    lines = [f"note: {body['note']}"] if body.get("note") else []
    for unmatched in body.get("filters_unmatched") or []:
        lines.append(f"note: no indexed item has {unmatched}")
    for passage in body["passages"]:
        lines += [
            "",
            f"[{passage['handle']}] {passage['title']}  {passage['url']}",
            passage["text"].strip(),
        ]
    lines += ["", f"({len(body['passages'])} passages, about {body['tokens']} tokens)"]
    return visible("\n".join(lines).lstrip("\n"))


def item_text(item: dict[str, Any]) -> str:
    """An item from `ghindex show`, for reading in a terminal."""
    lines = [
        f"{item['handle']}  ({item['type']}"
        + (f", {item['state']}" if item.get("state") else "")
        + ")"
    ]
    if item.get("title"):
        lines.append(item["title"])
    if item.get("url"):
        lines.append(item["url"])
    for key in ("labels", "fixed_by", "closes"):
        if item.get(key):
            lines.append(f"{key.replace('_', ' ')}: {', '.join(item[key])}")
    lines.append("")
    lines.append(_post(item))
    for comment in item.get("comments", []):
        lines.append(_post(comment))
    for review in item.get("reviews", []):
        lines.append(_post(review, f"review ({review['state'].lower()})"))
    for thread in item.get("review_threads", []):
        path, line = thread.get("path"), thread.get("line")
        where = (f" on {path}" + (f":{line}" if line else "")) if path else " (no file)"
        status = ", resolved" if thread.get("resolved") else ""
        lines.append(f"--- thread{where}{status}")
        lines.extend(_post(c) for c in thread["comments"])
    for changed in item.get("files", []):
        lines.append(f"--- {changed['status']} {changed['path']}")
        lines.append(changed["text"])
    if item.get("omitted"):
        left = ", ".join(f"{n:,} {key.replace('_', ' ')}" for key, n in item["omitted"].items())
        lines.append(f"[{left} more: ghindex show {item['handle']} --skip {item['next_skip']}]")
    elif item.get("truncated"):
        lines.append(f"[cut at {item['returned_chars']:,} of {item['chars']:,} characters]")
    return visible("\n".join(lines))


def _post(post: dict[str, Any], what: str = "") -> str:
    who = post.get("author") or "someone"
    association = (post.get("author_association") or "NONE").upper()
    # NONE: no association with the repository, which is said by saying nothing
    role = f", {association.lower().replace('_', ' ')}" if association != "NONE" else ""
    when = f" on {post['created_at'][:10]}" if post.get("created_at") else ""
    head = f"--- {what + ' by ' if what else ''}{who}{role}{when}"
    return f"{head}\n{post.get('text') or ''}".rstrip()


def audit_text(report: AuditReport) -> list[str]:
    """An audit for a person: totals, one line per kind, then where each finding is."""
    from ghindex.snapshot.audit import LISTED

    source = report.source
    if not report.found:
        return [
            visible(
                f"no secrets found in {source}: {report.scanned:,} values scanned "
                f"with rules {report.rules}"
            )
        ]
    lines = [
        f"{report.found:,} secrets found in {source} ({report.scanned:,} values "
        f"scanned with rules {report.rules}); values are not shown"
    ]
    lines += [f"  {kind:<32} {n:>6,}" for kind, n in report.kinds.items()]
    for finding in report.findings:
        handle = f" {finding.handle}" if finding.handle else ""
        lines.append(f"  {finding.kind}: {finding.where}{handle}")
    if report.truncated:
        lines.append(f"  … the first {LISTED:,} listed; the counts cover all")
    lines.append("to replace them: run `ghindex update` (or fetch and build) and publish again")
    return [visible(line) for line in lines]


_SURFACES = {"github": ("from GitHub", "fetched"), "git": ("from git sources", "read")}


def redaction_text(redaction: dict[str, Any]) -> str:
    """The `status` line on secret redaction (README, "Security"): which rules the stored
    text went through, per writer, and how many values they replaced, per kind."""
    by_rules: dict[str, list[str]] = {}
    unread = []
    for source, rules in redaction.get("rules", {}).items():
        where, verb = _SURFACES.get(source, (f"from {source}", "stored"))
        if rules is None:
            unread.append(f"nothing {where} {verb} yet")
        else:
            by_rules.setdefault(rules, []).append(f"text {where}")
    parts = [
        (
            f"off ({' and '.join(texts)} kept raw: redact = false)"
            if rules == "off"
            else f"rules {rules} ({' and '.join(texts)})"
        )
        for rules, texts in by_rules.items()
    ]
    kinds = redaction.get("redacted") or {}
    total = sum(kinds.values())
    found = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    replaced = (
        f"{total} value{'s' if total != 1 else ''} replaced by [redacted:<kind>] ({found})"
        if total
        else "no values replaced"
    )
    return "secret redaction: " + "; ".join([*parts, *unread, replaced])
