"""Redaction measured: recall per secret format, false alarms on real text, and its cost.

1. Recall: every format of testkit/secrets_corpus.py (synthetic, seeded) placed in a
   title, a body, a comment, a diff line, a quoted reply, inline code and in a body
   long enough to be split into several chunks, through `redact()`: is any sensitive
   part left?
2. False alarms: every document of the shared eval corpora (real commits, diffs,
   docs, releases, issues and pull requests) through `find()`; each span found is
   listed with its kind and a masked context, to be judged by a reader.
3. Cost: documents per second of `redact()` over the httpx corpus (median of
   `--rounds`), side by side with chunking and embedding a sample of the same
   documents with the packaged model, as a share of a build's time per document.

    python -m bench.bench_redact [--rounds 3] [--embed-sample 60]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from ghindex.state.redact import find, redact
from testkit.secrets_corpus import corpus

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"
CONTEXTS = {
    "title": "Leak: {}",
    "body": "I pasted this by mistake:\n\n{}\n\nSorry about that.",
    "comment": "> quoting the above\n\nAlso here: {}",
    "diff line": "+    {}",
    "inline code": "run it with `{}` please",
    "chunk boundary": "Intro paragraph. " * 150 + "\n{}\n" + "Outro paragraph. " * 150,
}


def documents(name: str) -> list[dict]:
    with (EVAL / name / "corpus.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def text_of(doc: dict) -> str:
    return "\n".join(str(doc.get(k) or "") for k in ("title", "body"))


def recall() -> list[tuple[str, int, int]]:
    rows = []
    for secret in corpus():
        placed = found = 0
        for context, template in CONTEXTS.items():
            if context == "title" and not secret.one_line:
                continue
            lines = secret.snippet.splitlines()
            text = template.format("\n".join(lines))
            if context == "diff line":
                text = "\n".join(template.format(line) for line in lines)
            out = redact(text)
            placed += 1
            found += all(part not in out for part in secret.parts)
        rows.append((secret.format, placed, found))
    return rows


def false_alarms(name: str) -> tuple[int, list[tuple[str, str, str]]]:
    docs = documents(name)
    hits = []
    for doc in docs:
        text = text_of(doc)
        for start, end, kind in find(text):
            before = text[max(0, start - 40) : start].replace("\n", " ")
            value = text[start:end]
            masked = value[:3] + "…" + f"({len(value)} chars)"
            hits.append((str(doc.get("id")), kind, f"{before}[{masked}]"))
    return len(docs), hits


ADVERSARIAL = {
    "20 KB of dashes": "-" * 20_000,
    "64 KB of `x_password_x`": "x_password_x" * 5_400,
    "100 KB of base64url": "aB3-_Zq9" * 12_500,
    "800 KB of BEGIN lines, no END": "-----BEGIN RSA PRIVATE KEY-----\n" * 25_000,
    "900 KB of `password=`": "password=" * 100_000,
    "1 MB of one base64 run": "A" * 1_000_000,
}


def adversarial() -> list[tuple[str, float]]:
    """Seconds `redact()` takes on text written to make regular expressions backtrack."""
    rows = []
    for name, text in ADVERSARIAL.items():
        started = time.perf_counter()
        redact(text)
        rows.append((name, time.perf_counter() - started))
    return rows


def throughput(rounds: int, sample: int) -> dict[str, float]:
    docs = [text_of(d) for d in documents("httpx-changelog")]
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        for text in docs:
            redact(text)
        timings.append(time.perf_counter() - started)
    redact_rate = len(docs) / statistics.median(timings)

    from ghindex.config import DEFAULT_MODEL
    from ghindex.index.chunking import ChunkSettings, split_markdown
    from ghindex.index.embed import Embedder

    embedder = Embedder(DEFAULT_MODEL)
    step = max(1, len(docs) // sample)
    chosen = docs[::step][:sample]
    settings = ChunkSettings()
    texts = [piece for text in chosen for _path, piece in split_markdown(text, settings)]
    embedder.encode(texts[:8])  # warm
    embed_times = []
    for _ in range(rounds):
        started = time.perf_counter()
        embedder.encode(texts)
        embed_times.append(time.perf_counter() - started)
    embed_rate = len(chosen) / statistics.median(embed_times)
    share = (1 / redact_rate) / (1 / redact_rate + 1 / embed_rate)
    return {
        "docs": len(docs),
        "redact_docs_per_s": redact_rate,
        "embed_docs_per_s": embed_rate,
        "embedded_chunks": len(texts),
        "share_of_build": share,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embed-sample", type=int, default=60)
    args = parser.parse_args()

    print(f"# redaction, {platform.node()}, {datetime.now(UTC):%Y-%m-%d}\n")
    rows = recall()
    print("| format | placements | redacted |\n|---|---:|---:|")
    for name, placed, found in rows:
        print(f"| {name} | {placed} | {found} |")
    total = sum(p for _, p, _ in rows)
    hit = sum(f for _, _, f in rows)
    print(f"\nrecall: {hit}/{total} placements of {len(rows)} formats ({hit / total:.1%})\n")

    for name in ("httpx-changelog", "secp256k1-issues"):
        count, hits = false_alarms(name)
        docs_hit = len({h[0] for h in hits})
        print(f"## {name}: {count} documents, {len(hits)} spans in {docs_hit} documents "
              f"({1000 * docs_hit / count:.1f} per 1,000 documents)\n")  # fmt: skip
        for doc, kind, context in hits:
            print(f"- {doc} `{kind}`: {context}")
        print()

    print("| hostile text | seconds |\n|---|---:|")
    for name, seconds in adversarial():
        print(f"| {name} | {seconds:.2f} |")
    print()

    cost = throughput(args.rounds, args.embed_sample)
    print("| redact docs/s | chunk+embed docs/s | share of a build's time per document |")
    print("|---:|---:|---:|")
    print(f"| {cost['redact_docs_per_s']:.0f} | {cost['embed_docs_per_s']:.1f} "
          f"| {cost['share_of_build']:.2%} |")  # fmt: skip


if __name__ == "__main__":
    main()
