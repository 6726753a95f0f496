"""The query encoder a snapshot carries: the exact encoder its vectors were made with.

A build writes it beside the index, in `lance/query_encoder/`: the ONNX file of the
index's precision (the fp32 export, or its int8 copy), the model's `tokenizer.json`, and
`encoder.json` (the model's name, the precision, the vectors' dimension, truncation and
padding, and each file's size and sha256). Publishing stores these files like every
other (content-addressed pieces, so a store holds one copy while the model is
unchanged); pulling verifies them like every other.

Every reader (the CLI, the MCP server, the Python API) loads the query encoder from
there: ONNX Runtime, tokenizers and numpy, no model package, hub or torch, and never a
different model or precision than the index's (`encoder.json` must name the ones the
index records). An index without one (built before #47, or of a model that cannot be
exported) is searched with the installed model as before, or refused in one line where
no model is installed.

The files are untrusted input (a store, a copied directory): each is read up to its cap
(`vocabulary/layout.py`), checked against the sizes and hashes `encoder.json` gives,
the model checked by `onnx_check.py` (inline tensors only, built-in operators only, no
functions) and then loaded from those very bytes as an ONNX model (never ONNX Runtime's
own format, never a pickle). Anything else is one line (`IndexUnusable`: `the query
encoder in … is damaged (why): restore it with ghindex pull, or build the index again`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ghindex.config import INT8, PRECISIONS
from ghindex.errors import ConfigError, IndexUnusable, first_line
from ghindex.index import onnx_encoder
from ghindex.index.embed import builder_installed
from ghindex.index.onnx_check import OnnxRefused, check_model
from ghindex.vocabulary.layout import (
    ENCODER_DIR,
    ENCODER_FILES,
    ENCODER_META,
    ENCODER_MODEL,
    ENCODER_TOKENIZER,
    fsync_dir,
)

log = logging.getLogger(__name__)

FORMAT = 1  # of `encoder.json`: a reader refuses a newer one
MAX_DIMENSION = 65_536
MAX_TOKENS = 1 << 20
NOT_INSTALLED = (
    "this index carries no query encoder (it was built by an older ghindex) and its "
    "model {name!r} is not installed here: install it (`pip install 'ghindex[build]'`), "
    "or build and publish the snapshot again with this ghindex, or search with --mode sparse"
)


class _Refused(ValueError):
    """A carried encoder that is not what it must be (said in one short clause)."""


def carry(lance_path: Path, model: str, precision: str, *, keep: bool = False) -> bool:
    """Write `model`'s query encoder of `precision` into the index at `lance_path` (the
    export made once per machine, `onnx_encoder.py`); nothing is written when the one
    there is the same. `keep` (a build that embedded nothing): an encoder already there
    of this model and precision stays, and no model is loaded or exported to check it.
    False, with a warning and no encoder left there, when the model cannot be exported:
    readers then need the model installed, as before."""
    target = Path(lance_path) / ENCODER_DIR
    if keep and _names(target, model, precision):
        return True
    try:
        folder = onnx_encoder.ready(model, precision)
        source = folder / (onnx_encoder.INT8_FILE if precision == INT8 else ENCODER_MODEL)
        made = json.loads((folder / onnx_encoder.META_FILE).read_text(encoding="utf-8"))
    except ConfigError:
        raise
    except Exception as exc:  # a model that cannot be exported: readers need it installed
        log.warning("the index carries no query encoder (%s)", first_line(exc))
        shutil.rmtree(target, ignore_errors=True)
        return False
    tokenizer = folder / onnx_encoder.TOKENIZER_FILE
    meta = {
        "format": FORMAT,
        "model": made["model"],
        "precision": precision,
        "dimension": made["dimension"],
        "max_seq_length": made["max_seq_length"],
        "pad_id": made["pad_id"],
        "files": {ENCODER_MODEL: _described(source), ENCODER_TOKENIZER: _described(tokenizer)},
    }
    text = json.dumps(meta, indent=2, sort_keys=True) + "\n"
    try:
        if (target / ENCODER_META).read_text(encoding="utf-8") == text:
            return True
    except (OSError, UnicodeDecodeError):
        pass
    # assembled beside the target (a dot name: a killed write is never published, and
    # the next build clears it), then switched in by renames
    work = Path(lance_path) / f".{ENCODER_DIR}.new"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copyfile(source, work / ENCODER_MODEL)
    shutil.copyfile(tokenizer, work / ENCODER_TOKENIZER)
    (work / ENCODER_META).write_text(text, encoding="utf-8")
    old = Path(lance_path) / f".{ENCODER_DIR}.old"
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    work.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    fsync_dir(Path(lance_path))
    return True


def _names(folder: Path, model: str, precision: str) -> bool:
    """Whether `folder` holds an encoder that says it is `model`'s of `precision`."""
    try:
        meta = _meta(_read(folder / ENCODER_META, None))
    except (_Refused, OSError):
        return False
    return (meta["model"], meta["precision"]) == (model, precision)


def _described(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {"sha256": digest.hexdigest(), "size": path.stat().st_size}


def query_encoder(lance_path: Path, name: str, precision: str) -> Any:
    """The encoder for queries of the index at `lance_path`, whose vectors are of model
    `name` and `precision`: the one it carries, else (an older index) the installed
    model's (`onnx_encoder.query_encoder`), else one line saying what to do.
    GHINDEX_ENCODER=torch asks for the installed model's on purpose."""
    if onnx_encoder.encoder_choice() == "torch":
        return onnx_encoder.query_encoder(name, precision)
    folder = Path(lance_path) / ENCODER_DIR
    if folder.exists() or folder.is_symlink():
        return load(folder, name, precision)
    if not onnx_encoder.exported(name, precision) and not builder_installed():
        raise IndexUnusable(NOT_INSTALLED.format(name=name))
    return onnx_encoder.query_encoder(name, precision)


def carries(lance_path: Path) -> bool:
    """Whether the index at `lance_path` carries a query encoder."""
    return (Path(lance_path) / ENCODER_DIR).exists()


def load(
    folder: Path,
    name: str,
    precision: str,
    *,
    threads: int = onnx_encoder.QUERY_THREADS,
    spin: bool = False,
) -> onnx_encoder.OnnxEncoder:
    """The carried encoder in `folder`, checked as the module says; `IndexUnusable` in one
    line for anything else, or for an encoder of another model or precision than
    `name` and `precision` (the index's)."""
    try:
        meta = _meta(_read(folder / ENCODER_META, None))
        if (meta["model"], meta["precision"]) != (name, precision):
            raise _Refused(
                f"it is of {meta['model']!r} ({meta['precision']}) but the index's vectors "
                f"are of {name!r} ({precision})"
            )
        model = _read(folder / ENCODER_MODEL, meta["files"][ENCODER_MODEL])
        tokenizer = _read(folder / ENCODER_TOKENIZER, meta["files"][ENCODER_TOKENIZER])
        check_model(model)
        encoder = onnx_encoder.OnnxEncoder.from_bytes(
            model,
            tokenizer.decode("utf-8"),
            meta,
            precision=precision,
            threads=min(os.cpu_count() or 1, threads),
            spin=spin,
        )
        made = encoder.encode(["a query"])
        if made.shape != (1, meta["dimension"]):
            raise _Refused(f"it makes vectors of {made.shape[-1]}, not {meta['dimension']}")
    except (_Refused, OnnxRefused) as exc:
        raise IndexUnusable(_refusal(folder, str(exc))) from None
    except Exception as exc:  # tokenizers, ONNX Runtime: a file that is not what it says
        raise IndexUnusable(_refusal(folder, f"it cannot be loaded: {first_line(exc)}")) from None
    return encoder


def _refusal(folder: Path, why: str) -> str:
    return (
        f"the query encoder in {folder} is damaged ({why[:300]}): restore it with "
        "`ghindex pull`, or build the index again"
    )


def _read(path: Path, expected: dict[str, Any] | None) -> bytes:
    """The file at `path` (a regular file, up to its cap), matching `expected`'s size and
    sha256 when given."""
    cap = ENCODER_FILES[path.name]
    if path.is_symlink() or not path.is_file():
        raise _Refused(f"{path.name} is missing or not a regular file")
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise _Refused(f"{path.name} is over {cap:,} bytes")
    if expected is not None:
        if len(data) != expected["size"]:
            raise _Refused(f"{path.name} is {len(data):,} bytes, not {expected['size']:,}")
        if hashlib.sha256(data).hexdigest() != expected["sha256"]:
            raise _Refused(f"{path.name} does not match its sha256")
    return data


def _meta(data: bytes) -> dict[str, Any]:
    """`encoder.json`, every field checked."""
    try:
        meta = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _Refused(f"{ENCODER_META} is not JSON") from None
    if not isinstance(meta, dict):
        raise _Refused(f"{ENCODER_META} is not an object")
    if meta.get("format") != FORMAT:
        raise _Refused(f"{ENCODER_META} has format {_shown(meta.get('format'))}, not {FORMAT}")
    if not isinstance(meta.get("model"), str) or not 0 < len(meta["model"]) <= 500:
        raise _Refused(f"{ENCODER_META} names no model")
    if meta.get("precision") not in PRECISIONS:
        raise _Refused(f"{ENCODER_META} has precision {_shown(meta.get('precision'))}")
    for key, most in (("dimension", MAX_DIMENSION), ("max_seq_length", MAX_TOKENS)):
        if not _whole(meta.get(key), 1, most):
            raise _Refused(f"{ENCODER_META} has {key} {_shown(meta.get(key))}")
    if not _whole(meta.get("pad_id"), 0, 2**31 - 1):
        raise _Refused(f"{ENCODER_META} has pad_id {_shown(meta.get('pad_id'))}")
    files = meta.get("files")
    if not isinstance(files, dict) or set(files) != {ENCODER_MODEL, ENCODER_TOKENIZER}:
        raise _Refused(f"{ENCODER_META} does not list {ENCODER_MODEL} and {ENCODER_TOKENIZER}")
    for file, entry in files.items():
        sha256 = entry.get("sha256") if isinstance(entry, dict) else None
        if not (
            isinstance(sha256, str) and len(sha256) == 64 and set(sha256) <= set("0123456789abcdef")
        ):
            raise _Refused(f"{ENCODER_META} has no sha256 for {file}")
        if not _whole(entry.get("size"), 0, ENCODER_FILES[file]):
            raise _Refused(f"{ENCODER_META} has size {_shown(entry.get('size'))} for {file}")
    return meta


def _whole(value: object, least: int, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= most


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
