"""The query encoder, loaded in a thread while a cold search imports the index's libraries.

A cold `ghindex search` spends most of its time importing LanceDB (pure Python work that
holds the GIL) and then loading the query encoder (ONNX Runtime reading and optimising
the model, native work that mostly does not). Started first, the encoder loads on the
second core during the import instead of after it.

What is loaded is the encoder the index carries (`index/carried_encoder.py`), else the
installed model's export. Which model and precision comes from the manifest, which is
only a hint: the `Searcher` asks for the model and precision its index's metadata
records, and gets this encoder only when they are the same; otherwise (an edited or
stale manifest) it loads the right one as before. Nothing is loaded ahead that is not
ready to load in a fraction of a second: a model neither carried nor yet exported, or
GHINDEX_ENCODER=torch, loads when the first query asks, as it always did.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ghindex.config import PRECISIONS
from ghindex.index import carried_encoder, onnx_encoder


class EncoderAhead:
    """`factory` is the Searcher's query encoder for the index at `lance_path`, answered
    by the encoder loading here when asked for the same model and precision."""

    def __init__(self, lance_path: Path, name: str, precision: str) -> None:
        self.key = (name, precision)
        self._lance_path = lance_path
        self._done = threading.Event()
        self._encoder: Any = None
        self._error: BaseException | None = None
        # the imports hold the GIL: done here, so the thread's work is the native load
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401

        threading.Thread(target=self._load, name="ghindex-encoder", daemon=False).start()

    def _load(self) -> None:
        try:
            self._encoder = carried_encoder.query_encoder(self._lance_path, *self.key)
        except BaseException as exc:  # handed to the caller, as a direct load would raise
            self._error = exc
        finally:
            self._done.set()

    def factory(self, name: str, precision: str) -> Any:
        if (name, precision) != self.key:
            return carried_encoder.query_encoder(self._lance_path, name, precision)
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._encoder


def start(manifest: Mapping[str, Any], lance_path: Path) -> Callable[[str, str], Any]:
    """The Searcher's encoder factory for the index at `lance_path` that `manifest`
    describes: one loading ahead when the index carries its encoder or the manifest
    names an exported model, else `carried_encoder.query_encoder` itself."""
    direct = functools.partial(carried_encoder.query_encoder, lance_path)
    model = manifest.get("model") if isinstance(manifest, Mapping) else None
    name = model.get("name") if isinstance(model, Mapping) else None
    precision = model.get("precision") if isinstance(model, Mapping) else None
    if not isinstance(name, str) or precision not in PRECISIONS:
        return direct
    try:
        ready = onnx_encoder.encoder_choice() == "onnx" and (
            carried_encoder.carries(lance_path) or onnx_encoder.exported(name, precision)
        )
    except Exception:  # a bad setting or name is reported by the load the query makes
        return direct
    if not ready:
        return direct
    try:
        return EncoderAhead(lance_path, name, precision).factory
    except ImportError:  # no ONNX Runtime: the query's own load says what to do
        return direct
