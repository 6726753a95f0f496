"""Embedding queries with ONNX Runtime: the same vectors as the sentence-transformers
model, without importing torch.

Importing torch and sentence-transformers takes seconds, far longer than embedding one
query, so a command that searches once spent most of its time importing. The model's
transformer is exported to ONNX once, from the very weights `embed.py` loads, into
GHINDEX_CACHE_DIR (default `~/.cache/ghindex`) with its own `tokenizer.json`;
later queries load only onnxruntime, tokenizers and numpy. Pooling (the mean over the
attention mask) and L2 normalisation are done here, as sentence-transformers does them;
truncation is the model's `max_seq_length`. Vectors match the torch path to about 1e-7.

A model whose pipeline is not transformer + mean pooling (+ normalise) is not exported,
and any failure to export or load falls back to `Embedder`: the ONNX path only ever makes
queries faster, never different. GHINDEX_ENCODER=torch turns it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ghindex.errors import ConfigError, first_line
from ghindex.index.embed import Embedder, canonical_model_name, model_source

if TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger(__name__)

FORMAT = 1  # bump when what is exported changes: older exports are then made again
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"
ENCODERS = ("onnx", "torch")


def cache_dir() -> Path:
    """Where exported models are kept (GHINDEX_CACHE_DIR, default ~/.cache/ghindex)."""
    given = os.environ.get("GHINDEX_CACHE_DIR")
    return Path(given).expanduser() if given else Path.home() / ".cache" / "ghindex"


def export_dir(name: str) -> Path:
    """The folder of `name`'s export: one per model (and per export format)."""
    canonical = canonical_model_name(name)
    digest = hashlib.sha256(f"{FORMAT}:{canonical}".encode()).hexdigest()[:16]
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in canonical)[-60:]
    return cache_dir() / "onnx" / f"{slug}-{digest}"


class OnnxEncoder:
    """An exported model: texts in, L2-normalised float32 vectors out (as `Embedder`)."""

    def __init__(self, folder: Path, *, batch_size: int = 32, threads: int | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        self.name = meta["model"]
        self.dimension = int(meta["dimension"])
        self.batch_size = batch_size
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        # a tokenizer.json may carry its own truncation and fixed padding: use the model's
        tokenizer.enable_truncation(max_length=int(meta["max_seq_length"]))
        tokenizer.enable_padding(pad_id=int(meta["pad_id"]), pad_token=meta["pad_token"])
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(os.cpu_count() or 1, 4)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # longest first, so each batch pads little; answers in the order given
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            picked = order[start : start + self.batch_size]
            out[picked] = self._batch([texts[i] for i in picked])
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.asarray([e.type_ids for e in encoded], dtype=np.int64)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def export(name: str) -> Path:
    """Export `name`'s transformer and tokenizer into `export_dir(name)` (imports torch).
    Written beside the target and renamed into place, so a reader never sees half."""
    import torch

    from ghindex.index.embed import _load

    model = _load(model_source(name))
    modules = [type(m).__name__ for m in model]
    if modules[:2] != ["Transformer", "Pooling"] or set(modules[2:]) - {"Normalize"}:
        raise ValueError(f"pipeline {modules} is not transformer + pooling")
    pooling = model[1].get_config_dict().get("pooling_mode")
    if pooling != "mean":
        raise ValueError(f"pooling is {pooling!r}, not mean")
    tokenizer = model.tokenizer
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in tokenizer.model_input_names:
        names.append("token_type_ids")

    class LastHidden(torch.nn.Module):  # the transformer's output, as torch can export it
        def __init__(self) -> None:
            super().__init__()
            self.network = model[0].auto_model

        def forward(self, *inputs: Any) -> Any:  # by name: models order their inputs apart
            return self.network(**dict(zip(names, inputs, strict=True))).last_hidden_state

    network = LastHidden().eval()
    sample = tokenizer(["an example", "a longer example of text"], padding=True,
                       return_tensors="pt")  # fmt: skip
    target = export_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation notes, not for users
            torch.onnx.export(
                network, tuple(sample[n] for n in names), str(work / MODEL_FILE),
                dynamo=False, input_names=names, output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                opset_version=17, do_constant_folding=True,
            )  # fmt: skip
        tokenizer.backend_tokenizer.save(str(work / TOKENIZER_FILE))
        meta = {"model": canonical_model_name(name), "format": FORMAT,
                "dimension": int(model.get_embedding_dimension()),
                "max_seq_length": int(model.max_seq_length),
                "pad_id": int(tokenizer.pad_token_id),
                "pad_token": tokenizer.pad_token}  # fmt: skip
        (work / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def query_encoder(name: str) -> Any:
    """The encoder for queries: ONNX Runtime on the cached export (made on first use),
    or `Embedder` when GHINDEX_ENCODER=torch or the ONNX path cannot be used."""
    choice = os.environ.get("GHINDEX_ENCODER", "onnx").strip().lower() or "onnx"
    if choice not in ENCODERS:
        raise ConfigError(f"GHINDEX_ENCODER must be one of {', '.join(ENCODERS)}, not {choice!r}")
    if choice == "onnx":
        folder = export_dir(name)
        try:
            if not (folder / META_FILE).exists():
                log.info("exporting %s to ONNX for fast queries (once)", name)
                export(name)
            return OnnxEncoder(folder)
        except ConfigError:
            raise  # the model itself cannot be loaded: torch would fail the same way
        except Exception as exc:  # the torch path answers the same, only slower
            log.warning("ONNX encoder unavailable (%s): embedding with torch", first_line(exc))
    return Embedder(name)
