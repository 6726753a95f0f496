"""Embedding with ONNX Runtime: the same vectors as the sentence-transformers model,
without importing torch, for builds and queries; and the choice of encoder.

Importing torch and sentence-transformers takes seconds, far longer than embedding one
query, and ONNX Runtime embeds about twice as fast as torch on CPU. The model's
transformer is exported to ONNX once, from the very weights `embed.py` loads, into
GHINDEX_CACHE_DIR (default `~/.cache/ghindex`) with its own `tokenizer.json`; later runs
load only onnxruntime, tokenizers and numpy. Pooling (the mean over the attention mask)
and L2 normalisation are done here, as sentence-transformers does them; truncation is
the model's `max_seq_length`. fp32 vectors match the torch path to about 2e-7.

int8 is that export with its weights quantised (dynamic, per channel), made from the
fp32 file at first use and kept beside it: a different kind of vector (cosine to fp32
about 0.99), which only ONNX Runtime makes, on the CPU. Its activations are quantised
by the range of each run's input, so int8 runs one text at a time: a text's vector is
the same in any build, in any shard and as a query.

A model whose pipeline is not transformer + mean pooling (+ normalise) is not exported,
and any failure to export or load fp32 falls back to `Embedder`: the ONNX path only ever
makes embedding faster, never different. GHINDEX_ENCODER=torch turns it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ghindex.config import DEFAULT_PRECISION, DEVICES, FP32, INT8, PRECISIONS, cache_dir, env
from ghindex.errors import ConfigError, IndexUnusable, first_line
from ghindex.index.embed import Embedder, canonical_model_name, model_source, require_builder

log = logging.getLogger(__name__)

FORMAT = 1  # bump when what is exported changes: older exports are then made again
MODEL_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"  # MODEL_FILE quantised (`quantise`), made at first use
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
QUERY_THREADS = 4  # a query is one short text: more threads only contend with the server
TOKENIZE_WINDOW = 1024  # texts tokenised at once, then batched by their token counts
NO_CUDA = (
    "--device cuda (or GHINDEX_DEVICE=cuda) but no CUDA device can be used: ONNX Runtime "
    "lists no CUDAExecutionProvider and torch sees no GPU: install onnxruntime-gpu, or use "
    "--device cpu"
)


def export_dir(name: str) -> Path:
    """The folder of `name`'s export: one per model (and per export format)."""
    canonical = canonical_model_name(name)
    digest = hashlib.sha256(f"{FORMAT}:{canonical}".encode()).hexdigest()[:16]
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in canonical)[-60:]
    return cache_dir() / "onnx" / f"{slug}-{digest}"


class OnnxEncoder:
    """An exported model: texts in, L2-normalised float32 vectors out (as `Embedder`).
    `threads` defaults to every core; `providers` to the CPU. `spin`: whether its threads
    wait for the next run spinning (a build's batches follow each other) or asleep (a
    query's vector goes to a kNN search, which needs the cores they would spin on)."""

    encoder = "onnx"

    def __init__(
        self,
        folder: Path,
        *,
        precision: str = FP32,
        batch_size: int = 32,
        threads: int | None = None,
        providers: Sequence[str] = (CPU,),
        spin: bool = True,
    ):
        from tokenizers import Tokenizer

        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        model = folder / (INT8_FILE if precision == INT8 else MODEL_FILE)
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self._open(str(model), tokenizer, meta, precision, batch_size, threads, providers, spin)

    @classmethod
    def from_bytes(
        cls,
        model: bytes,
        tokenizer: str,
        meta: dict[str, Any],
        *,
        precision: str,
        threads: int | None = None,
        spin: bool = True,
    ) -> OnnxEncoder:
        """An encoder from a model's bytes, its `tokenizer.json` text and its metadata
        (`model`, `dimension`, `max_seq_length`, `pad_id`), already checked by the caller
        (`carried_encoder.py`): loaded as an ONNX model only, on the CPU."""
        from tokenizers import Tokenizer

        encoder = cls.__new__(cls)
        parsed = Tokenizer.from_str(tokenizer)
        encoder._open(model, parsed, meta, precision, 32, threads, (CPU,), spin, onnx_only=True)
        return encoder

    def _open(
        self,
        model: str | bytes,
        tokenizer: Any,
        meta: dict[str, Any],
        precision: str,
        batch_size: int,
        threads: int | None,
        providers: Sequence[str],
        spin: bool,
        *,
        onnx_only: bool = False,
    ) -> None:
        import onnxruntime as ort

        self.name = meta["model"]
        self.dimension = int(meta["dimension"])
        self.precision = precision
        # Dynamic quantisation scales activations by the whole input's range, so in a
        # batch a text's int8 vector would depend on its neighbours and their padding:
        # int8 encodes each text alone, as a query is (no slower: nothing is padded)
        self.batch_size = 1 if precision == INT8 else batch_size
        # a tokenizer.json may carry its own truncation and padding: use the model's
        # truncation, and pad each batch here to its own longest text
        tokenizer.enable_truncation(max_length=int(meta["max_seq_length"]))
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._pad_id = int(meta["pad_id"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        if onnx_only:  # never ONNX Runtime's own (flatbuffers) format
            options.add_session_config_entry("session.load_model_format", "ONNX")
        self.spin = spin
        if not spin:  # 5-6 ms less kNN after each query at 1M rows (bench/README.md)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(model, options, providers=list(providers))
        self.device = "cuda" if CUDA in self._session.get_providers() else "cpu"
        self._inputs = {i.name for i in self._session.get_inputs()}

    def encode(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Vectors in the order given; `progress(n)` as each batch of n is done. Texts
        are tokenised a window at a time and batched longest first by token count, so a
        batch pads little."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), TOKENIZE_WINDOW):
            window = range(start, min(start + TOKENIZE_WINDOW, len(texts)))
            encoded = self._tokenizer.encode_batch([texts[i] for i in window])
            order = sorted(range(len(encoded)), key=lambda j: -len(encoded[j].ids))
            for first in range(0, len(order), self.batch_size):
                picked = order[first : first + self.batch_size]
                out[[window[j] for j in picked]] = self._batch([encoded[j] for j in picked])
                if progress is not None:
                    progress(len(picked))
        return out

    def _batch(self, encoded: list[Any]) -> np.ndarray:
        length = max(len(e.ids) for e in encoded)
        ids = np.full((len(encoded), length), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encoded), length), dtype=np.int64)
        types = np.zeros((len(encoded), length), dtype=np.int64)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
            types[row, : len(e.ids)] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = types
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def export(name: str) -> Path:
    """Export `name`'s transformer and tokenizer into `export_dir(name)` (imports torch).
    Written beside the target and renamed into place, so a reader never sees half."""
    require_builder(f"exporting {canonical_model_name(name)} to ONNX (once, to embed with it)")
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
    sample = tokenizer(
        ["an example", "a longer example of text"], padding=True, return_tensors="pt"
    )
    target = export_dir(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation notes, not for users
            torch.onnx.export(
                network,
                tuple(sample[n] for n in names),
                str(work / MODEL_FILE),
                dynamo=False,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                opset_version=17,
                do_constant_folding=True,
            )
        tokenizer.backend_tokenizer.save(str(work / TOKENIZER_FILE))
        meta = {
            "model": canonical_model_name(name),
            "format": FORMAT,
            "dimension": int(model.get_embedding_dimension()),
            "max_seq_length": int(model.max_seq_length),
            "pad_id": int(tokenizer.pad_token_id),
            "pad_token": tokenizer.pad_token,
        }
        (work / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def quantise(folder: Path) -> Path:
    """Make the int8 file beside the fp32 export in `folder` (no torch; a few seconds):
    dynamic quantisation of the weights to int8, per channel, as measured for quality
    in bench/README.md. Written beside the target and renamed into place."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = folder / INT8_FILE
    work = folder / f".{INT8_FILE}.{os.getpid()}.tmp"
    try:
        with _quiet_root_logger():
            quantize_dynamic(
                folder / MODEL_FILE, work, weight_type=QuantType.QInt8, per_channel=True
            )
        work.replace(target)
    finally:
        work.unlink(missing_ok=True)
    return target


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """The quantiser advises pre-processing through `logging.warning`, which would also
    give the root logger a stderr handler: neither is for users."""
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)

    def errors_only(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR

    root.addFilter(errors_only)
    try:
        yield
    finally:
        root.removeFilter(errors_only)
        root.removeHandler(guard)


@dataclass(frozen=True)
class Placement:
    """Where vectors are made: which encoder ("onnx" or "torch") on which device."""

    encoder: str
    device: str  # "cpu" or "cuda"


def place(
    device: str,
    *,
    precision: str,
    encoder: str,
    ort_providers: Sequence[str],
    torch_cuda: Callable[[], bool],
) -> Placement:
    """Where a build embeds, from the device asked for (auto, cpu, cuda), the precision,
    the encoder asked for (GHINDEX_ENCODER), the providers ONNX Runtime lists and whether
    torch sees a GPU (asked only when it matters: it imports torch).

    cuda is ONNX Runtime's CUDA provider when listed, else torch on the GPU; auto is the
    CUDA provider when listed, else the CPU. int8 runs on the CPU only: its dynamically
    quantised operators have no CUDA kernels, so int8 with cuda is refused and auto
    means the CPU."""
    if device not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == INT8:
        if encoder == "torch":
            raise ConfigError(
                "int8 vectors are made by ONNX Runtime only: unset "
                "GHINDEX_ENCODER=torch, or use --precision fp32"
            )
        if device == "cuda":
            raise ConfigError(
                "int8 vectors are made on the CPU only: use --device cpu, or "
                "--precision fp32 to embed on the GPU"
            )
        return Placement("onnx", "cpu")
    if device == "cpu":
        return Placement(encoder, "cpu")
    if encoder == "onnx" and CUDA in ort_providers:
        return Placement("onnx", "cuda")
    if (encoder == "torch" or device == "cuda") and torch_cuda():
        return Placement("torch", "cuda")
    if device == "auto":
        return Placement(encoder, "cpu")
    raise ConfigError(NO_CUDA)


def build_encoder(
    model: str, *, precision: str = DEFAULT_PRECISION, device: str | None = None
) -> Any:
    """The encoder a build (or the eval harness) embeds with: `.name`, `.dimension`,
    `.precision`, `.encoder` ("onnx" or "torch") and `.encode(texts)`. ONNX Runtime on
    every core, unless GHINDEX_ENCODER=torch or the export cannot be used (fp32 then
    falls back to torch with a warning; int8 has no fallback). `device` None is auto."""
    choice = encoder_choice()
    placement = place(
        device or "auto",
        precision=precision,
        encoder=choice,
        ort_providers=_ort_providers(),
        torch_cuda=_torch_cuda,
    )
    if placement.encoder == "onnx":
        encoder = _onnx(
            model,
            precision,
            threads=os.cpu_count(),
            providers=(CUDA, CPU) if placement.device == "cuda" else (CPU,),
            int8_refusal=lambda why: ConfigError(
                f"int8 vectors need ONNX Runtime, which failed here ({why}): use --precision fp32"
            ),
        )
        if encoder is not None and device == "cuda" and encoder.device != "cuda":
            raise ConfigError(
                "--device cuda (or GHINDEX_DEVICE=cuda) but ONNX Runtime could not open a "
                "CUDA session: check the CUDA libraries, or use --device cpu"
            )
        if encoder is not None:
            return encoder
        if placement.device == "cuda":  # the CUDA provider failed: torch's GPU, if any
            if _torch_cuda():
                return Embedder(model, device="cuda")
            if device == "cuda":
                raise ConfigError(NO_CUDA)
            return Embedder(model)
    return Embedder(model, device=placement.device)


def query_encoder(name: str, precision: str = FP32) -> Any:
    """The encoder for queries of an index of `precision`: ONNX Runtime on the cached
    export (made on first use) with a few threads, on the CPU; for fp32 `Embedder` when
    GHINDEX_ENCODER=torch or the ONNX path cannot be used. An int8 index has no such
    fallback (torch makes other vectors): that is one error line instead."""
    refusal = "the index holds int8 vectors, which only ONNX Runtime makes"
    if encoder_choice() == "torch":
        if precision == INT8:
            raise IndexUnusable(f"{refusal}: unset GHINDEX_ENCODER=torch to search it")
        return Embedder(name)
    encoder = _onnx(
        name,
        precision,
        threads=min(os.cpu_count() or 1, QUERY_THREADS),
        spin=False,
        int8_refusal=lambda why: IndexUnusable(
            f"{refusal}, and it failed here ({why}): repair the onnxruntime install, or "
            "rebuild the index with --precision fp32"
        ),
    )
    return encoder if encoder is not None else Embedder(name)


def _onnx(
    name: str,
    precision: str,
    *,
    threads: int | None,
    providers: Sequence[str] = (CPU,),
    spin: bool = True,
    int8_refusal: Callable[[str], Exception],
) -> OnnxEncoder | None:
    """ONNX Runtime on `name`'s export (made on first use), or None with a warning when
    it cannot be used for fp32 (torch answers the same, only slower). For int8 nothing
    else makes the same vectors: `int8_refusal(reason)` is raised instead."""
    try:
        folder = ready(name, precision)
        return OnnxEncoder(
            folder, precision=precision, threads=threads, providers=providers, spin=spin
        )
    except ConfigError:
        raise  # the model itself cannot be loaded: torch would fail the same way
    except Exception as exc:
        if precision == INT8:
            raise int8_refusal(first_line(exc)) from None
        log.warning("ONNX encoder unavailable (%s): embedding with torch", first_line(exc))
        return None


def exported(name: str, precision: str) -> bool:
    """Whether `name`'s export already holds the file of `precision` (loading it then
    costs a fraction of a second; making it, minutes)."""
    folder = export_dir(name)
    return (folder / META_FILE).exists() and (precision != INT8 or (folder / INT8_FILE).exists())


def ready(name: str, precision: str) -> Path:
    """The export folder of `name` holding the file of `precision`, made if missing."""
    folder = export_dir(name)
    if not (folder / META_FILE).exists():
        log.info("exporting %s to ONNX (once)", name)
        export(name)
    if precision == INT8 and not (folder / INT8_FILE).exists():
        log.info("quantising %s to int8 (once)", name)
        quantise(folder)
    return folder


def new_index_precision(model: str, device: str | None = None) -> str:
    """The precision of a new index: DEFAULT_PRECISION (int8) where ONNX Runtime runs
    `model` on the CPU, else fp32 (GHINDEX_ENCODER=torch, a CUDA device, a model that
    cannot be exported), said in a warning when the export is what failed."""
    if DEFAULT_PRECISION == FP32 or encoder_choice() == "torch":
        return FP32
    providers = _ort_providers()
    if not providers or device == "cuda" or (device in (None, "auto") and CUDA in providers):
        return FP32
    try:
        ready(model, INT8)
    except ConfigError:
        raise  # the model itself cannot be loaded: fp32 would fail the same way
    except Exception as exc:  # any export failure leaves fp32 on torch
        log.warning("no int8 export of %s (%s): building fp32 vectors", model, first_line(exc))
        return FP32
    return INT8


def encoder_choice() -> str:
    """GHINDEX_ENCODER: `onnx` (the default) or `torch`."""
    return env("GHINDEX_ENCODER")


def _ort_providers() -> list[str]:
    try:
        import onnxruntime as ort
    except ImportError:  # the torch path still works
        return []
    return list(ort.get_available_providers())


def _torch_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
