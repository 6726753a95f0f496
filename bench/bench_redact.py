"""ghindex's redaction measured: recall, false alarms, hostile text, its share of a
build, and what it costs on a state of N rows.

Recall, false alarms and throughput use the same corpus, placements and counting as
`bench/bench_secret_candidates.py` (which compares detector libraries); this script adds
what only ghindex's own pipeline has:

1. Hostile text: seconds `redact()` takes on text written to make regular expressions
   backtrack.
2. Share of a build: documents per second of `redact()` over the httpx corpus, side by
   side with chunking and embedding a sample of the same documents with the packaged
   model (median of `--rounds`).
3. Scale (`--scale N`): a state database of N comment rows (real text from the eval
   corpora, one in 500 carrying a planted credential), each phase in its own process
   for its peak memory: writing the rows through `rows.insert` (redaction at ingestion),
   redacting them all again in place (what a newer rules version does), and
   `audit-secrets` over the result.

    python -m bench.bench_redact [--rounds 3] [--embed-sample 60] [--scale 1000000]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.bench_secret_candidates import (
    EVAL,
    documents,
    false_alarms,
    recall,
    text_of,
    throughput,
)
from ghindex.state.redact import find, redact
from testkit.secrets_corpus import FAMILIES, corpus

ADVERSARIAL = {
    "20 KB of dashes": "-" * 20_000,
    "64 KB of `x_password_x`": "x_password_x" * 5_400,
    "100 KB of base64url": "aB3-_Zq9" * 12_500,
    "800 KB of BEGIN lines, no END": "-----BEGIN RSA PRIVATE KEY-----\n" * 25_000,
    "900 KB of `password=`": "password=" * 100_000,
    "1 MB of one base64 run": "A" * 1_000_000,
    "200 KB of `Authorization: Bearer `": "Authorization: Bearer " * 9_000,
    "300 KB of `a://b:c@`": "a://b:c@" * 37_500,
}


def adversarial() -> list[tuple[str, float]]:
    rows = []
    for name, text in ADVERSARIAL.items():
        started = time.perf_counter()
        redact(text)
        rows.append((name, time.perf_counter() - started))
    return rows


def share_of_build(rounds: int, sample: int) -> dict[str, float]:
    texts = [text_of(d) for d in documents(EVAL, "httpx-changelog")]
    redact_rate = throughput(redact, texts, rounds)

    from ghindex.config import DEFAULT_MODEL
    from ghindex.index.chunking import ChunkSettings, split_markdown
    from ghindex.index.embed import Embedder

    embedder = Embedder(DEFAULT_MODEL)
    chosen = texts[:: max(1, len(texts) // sample)][:sample]
    pieces = [piece for text in chosen for _path, piece in split_markdown(text, ChunkSettings())]
    embedder.encode(pieces[:8])  # warm
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        embedder.encode(pieces)
        timings.append(time.perf_counter() - started)
    embed_rate = len(chosen) / statistics.median(timings)
    return {
        "redact_docs_per_s": redact_rate,
        "embed_docs_per_s": embed_rate,
        "share_of_build": (1 / redact_rate) / (1 / redact_rate + 1 / embed_rate),
    }


# ------------------------------------------------------------------------ scale

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_PLANT = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"


def _texts() -> list[str]:
    texts = []
    for name in ("secp256k1-full", "httpx-changelog"):
        texts += [text_of(d)[:4000] for d in documents(EVAL, name)]
    return texts


def phase(name: str, folder: Path, rows: int) -> dict:
    """One phase of the scale measurement, run in this (fresh) process."""
    from ghindex.state import redact as redaction_rules
    from ghindex.state import redaction
    from ghindex.state.database import open_state
    from ghindex.state.rows import insert

    path = folder / "state.duckdb"
    started = time.perf_counter()
    result: dict = {}
    if name == "write":
        texts = _texts()
        con = open_state(path)
        batch = []
        with redaction_rules.tally() as counts:
            for n in range(rows):
                body = texts[n % len(texts)] + (f"\ntoken {_PLANT}" if n % 500 == 0 else "")
                batch.append(
                    {
                        "handle": f"octo/big#{n // 10}/comment/{n}",
                        "repo": "octo/big",
                        "number": n,
                        "created_at": _EPOCH,
                        "updated_at": _EPOCH,
                        "fetched_at": _EPOCH,
                        "parent_handle": f"octo/big#{n // 10}",
                        "parent_type": "issue",
                        "author": f"user{n % 997}",
                        "body": body,
                        "url": f"https://github.com/octo/big/issues/{n // 10}#issuecomment-{n}",
                    }
                )
                if len(batch) == 5000:
                    insert(con, "comments", batch)
                    batch = []
            insert(con, "comments", batch)
        result["redacted"] = sum(counts.values())
        con.close()
    elif name == "in-place":
        con = open_state(path)
        # the stored text as it was before redaction: what a newer rules version meets
        con.execute(
            "UPDATE comments SET body = replace(body, '[redacted:huggingface-token]', ?)", [_PLANT]
        )
        started = time.perf_counter()
        result["changed"] = redaction.redact_in_place(con, ("comments",))
        con.close()
    elif name == "audit":
        from ghindex.snapshot.audit import audit

        result["found"] = audit(folder).found
    result["seconds"] = time.perf_counter() - started
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def scale(rows: int) -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix="ghindex-redact-scale-") as folder:
        out = {}
        for name in ("write", "in-place", "audit"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.bench_redact",
                    "--phase",
                    name,
                    "--folder",
                    folder,
                    "--scale",
                    str(rows),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            out[name] = json.loads(done.stdout.strip().splitlines()[-1])
        return out


# Fields of the bundled sample that GitHub generates (ids, cursors, URLs): not scanned.
_GENERATED_FIELDS = {"id", "oid", "cursor", "__typename", "url", "resourcePath", "endCursor"}


def sample_documents() -> list[dict]:
    """Every string people wrote in the bundled sample (src/ghindex/sample), as documents."""
    from importlib import resources

    def strings(value, path):
        if isinstance(value, str) and len(value) >= 8:
            yield path, value
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in _GENERATED_FIELDS:
                    yield from strings(item, f"{path}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from strings(item, f"{path}[{i}]")

    text = (resources.files("ghindex") / "sample" / "github3py.jsonl").read_text("utf-8")
    pages = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [{"id": p, "body": v} for n, page in enumerate(pages) for p, v in strings(page, str(n))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embed-sample", type=int, default=60)
    parser.add_argument("--scale", type=int, default=0, help="rows of the scale measurement")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, args.folder, args.scale)))
        return

    print(f"# redaction, {platform.node()}, {datetime.now(UTC):%Y-%m-%d}\n")
    secrets = corpus()
    rows = recall(find, secrets)
    placed = sum(p for p, _f, _m in rows.values())
    found = sum(f for _p, f, _m in rows.values())
    print(f"recall: {found}/{placed} placements of {len(rows)} formats ({found / placed:.2%})")
    print("\n| family | formats | placements found |\n|---|--:|--:|")
    for family in FAMILIES:
        names = {s.format for s in secrets if s.family == family}
        got = [rows[n] for n in names]
        print(
            f"| {family} | {len(names)} | {sum(f for _p, f, _m in got)} / "
            f"{sum(p for p, _f, _m in got)} |"
        )
    for name, (_p, _f, missed) in rows.items():
        if missed:
            print(f"- {name}: missed in {', '.join(missed)}")
    sets = {
        n: documents(EVAL, n) for n in ("httpx-changelog", "secp256k1-issues", "secp256k1-full")
    }
    sets["bundled sample"] = sample_documents()
    for name, docs in sets.items():
        hits = false_alarms(find, docs)
        touched = len({h[0] for h in hits})
        print(
            f"\n{name}: {len(docs)} documents, {len(hits)} spans in {touched} "
            f"({1000 * touched / len(docs):.1f} per 1,000)"
        )
        for doc, kind, context in hits:
            print(f"- {doc} `{kind}`: {context}")

    print("\n| hostile text | seconds |\n|---|---:|")
    for name, seconds in adversarial():
        print(f"| {name} | {seconds:.2f} |")

    cost = share_of_build(args.rounds, args.embed_sample)
    print("\n| redact docs/s | chunk+embed docs/s | share of a build's time per document |")
    print("|---:|---:|---:|")
    print(
        f"| {cost['redact_docs_per_s']:.0f} | {cost['embed_docs_per_s']:.1f} "
        f"| {cost['share_of_build']:.2%} |"
    )

    if args.scale:
        figures = scale(args.scale)
        print(f"\n| {args.scale:,} comment rows | seconds | rows/s | peak RSS MB | result |")
        print("|---|---:|---:|---:|---|")
        for name, got in figures.items():
            extra = {k: v for k, v in got.items() if k not in ("seconds", "peak_rss_mb")}
            print(
                f"| {name} | {got['seconds']:.0f} | {args.scale / got['seconds']:,.0f} "
                f"| {got['peak_rss_mb']:.0f} | {extra} |"
            )


if __name__ == "__main__":
    main()
