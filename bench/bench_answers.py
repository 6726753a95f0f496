"""Tokens per MCP answer, per tool: a typical call and the worst an agent can ask for.

The snapshot holds the real issues and pull requests of bitcoin-core/secp256k1 from
`../shared/eval/secp256k1-full` (titles, bodies, labels, states, authors; pull requests
stored as issues, so `fetch` and `sql` read them alike), plus one issue with 2,000 short
comments (the busiest threads on large projects have that many). Each call goes through
a real in-process MCP client session; an answer's tokens are counted on the JSON text
the client receives (indented, as the SDK sends it) with one estimate for every version
measured: four characters a token, or one per word and punctuation mark when that is
more (`index.chunking.estimate_tokens`). The estimate is defined here, not imported
from the serve side, so that an older ghindex (run from a worktree) is measured the
same way.

    python -m bench.bench_answers                 # prints a markdown table
    python -m bench.bench_answers --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import mcp
import pydantic_core

from bench.eval_sets import eval_set
from ghindex.index.build import build
from ghindex.index.chunking import estimate_tokens
from ghindex.serve import SnapshotHolder, create_server, open_snapshot
from testkit.github_server import comment_node, issue_node
from testkit.state import settings_for, store_issues

CORPUS = eval_set("secp256k1-full")
R = "octo/hello"
BUSY = 2_000


def tokens(text: str) -> int:
    return max((len(text) + 3) // 4, estimate_tokens(text))


def answer_tokens(result) -> tuple[int, bool]:
    text = result.content[0].text if result.content else ""
    if not result.is_error:
        text = pydantic_core.to_json(result.structured_content, fallback=str, indent=2).decode()
    return tokens(text), bool(result.is_error)


def snapshot(workdir: Path) -> tuple[Path, list[str], list[int]]:
    """The built snapshot, the eval queries, and the issue numbers stored."""
    config = settings_for(workdir)
    rows = [json.loads(line) for line in (CORPUS / "corpus.jsonl").open()]
    items = [r for r in rows if r["type"] in ("issue", "pull_request")]
    nodes = [
        issue_node(
            1,
            title="Crash on startup",
            body="The library crashes on startup. " * 10,
            comments=[comment_node(10_000 + i, body=f"Same here ({i}).") for i in range(BUSY)],
        )
    ]
    numbers = [1]
    for row in items:
        number = row["number"] + 1  # #1 is the busy one
        labels = [{"name": n, "color": "ededed", "description": None} for n in row["labels"]]
        nodes.append(
            issue_node(
                number,
                title=row["title"],
                body=row["body"] or "",
                state="CLOSED" if row["state"] != "open" else "OPEN",
                labels={"nodes": labels},
                createdAt=row["created_at"],
                updatedAt=row["updated_at"],
            )
        )
        numbers.append(number)
    store_issues(config, nodes)
    build(config)
    queries = [json.loads(line)["query"] for line in (CORPUS / "queries.jsonl").open()]
    return config.workdir, queries, numbers


def calls(queries: list[str], numbers: list[int]) -> dict[str, list[tuple[str, dict]]]:
    """Per tool: the typical calls (one per query), and the worst cases."""
    typical = {
        "search": [("search", {"query": q}) for q in queries[:30]],
        "fetch": [("fetch", {"handles": [f"{R}#{n}"]}) for n in numbers[1:31]],
        "related": [("related", {"handle": f"{R}#{n}"}) for n in numbers[1:31]],
        "context": [("context", {"query": q}) for q in queries[:30]],
        "sql": [("sql", {"query": "SELECT state, count(*) FROM issues GROUP BY state"})],
        "status": [("status", {})],
    }
    worst = {
        "search": [
            ("search", {"query": q, "top_k": 50, "graph_expand": True, "graph_hops": 2})
            for q in queries[:10]
        ],
        "fetch": [
            ("fetch", {"handles": [f"{R}#{n}" for n in numbers[:50]], "max_chars": 200_000}),
            ("fetch", {"handles": [f"{R}#1"], "max_chars": 200_000}),
        ],
        "related": [("related", {"handle": f"{R}#{n}", "hops": 2}) for n in numbers[1:11]],
        "context": [("context", {"query": q, "max_tokens": 20_000}) for q in queries[:10]],
        "sql": [
            ("sql", {"query": "SELECT * FROM issues", "max_rows": 1000}),
            ("sql", {"query": "SELECT * FROM comments", "max_rows": 1000}),
        ],
        "status": [("status", {})],
    }
    return {"typical": typical, "worst": worst}


async def measure(server, planned) -> dict:
    found: dict = {}
    async with mcp.Client(server) as client:
        for case, per_tool in planned.items():
            for tool, tool_calls in per_tool.items():
                counts, errors, spent = [], 0, []
                for name, arguments in tool_calls:
                    started = time.perf_counter()
                    try:
                        result = await client.call_tool(name, arguments)
                    except Exception:  # an older server may refuse what it does not know
                        errors += 1
                        continue
                    spent.append((time.perf_counter() - started) * 1000)
                    count, failed = answer_tokens(result)
                    errors += failed
                    if not failed:
                        counts.append(count)
                found[(case, tool)] = {
                    "median": statistics.median(counts) if counts else None,
                    "max": max(counts) if counts else None,
                    "errors": errors,
                    "ms_median": round(statistics.median(spent), 1) if spent else None,
                }
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ghindex-answers-") as folder:
        workdir, queries, numbers = snapshot(Path(folder) / "work")
        holder = SnapshotHolder(current=open_snapshot(workdir, immutable=True))
        found = asyncio.run(measure(create_server(holder), calls(queries, numbers)))
        holder.current.close()
    print("| case | tool | tokens: median | max | errors | ms (median) |")
    print("|---|---|---:|---:|---:|---:|")
    for (case, tool), row in found.items():
        cells = [case, tool, row["median"], row["max"], row["errors"], row["ms_median"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if options.json:
        options.json.write_text(json.dumps({f"{c}/{t}": v for (c, t), v in found.items()}))


if __name__ == "__main__":
    main()
