"""The query encoder, loaded in a thread while a cold search imports the index's libraries.

A cold `ghindex search` spends most of its time importing LanceDB (pure Python work that
holds the GIL) and then loading the query encoder (ONNX Runtime reading and optimising
the model, native work that mostly does not). Started first, the encoder loads on the
second core during the import instead of after it.

What to load comes from the manifest, which is only a hint: the `Searcher` asks for the
model and precision its index's metadata records, and gets this encoder only when they
are the same; otherwise (an edited or stale manifest) it loads the right one as before.
Nothing is loaded ahead that is not ready to load in a fraction of a second: a model not
yet exported, or GHINDEX_ENCODER=torch, loads when the first query asks, as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ghindex.config import PRECISIONS
from ghindex.index import onnx_encoder


class EncoderAhead:
    """`factory` is `query_encoder` for the Searcher, answered by the encoder loading
    here when asked for the same model and precision."""

    def __init__(self, name: str, precision: str) -> None:
        self.key = (name, precision)
        self._done = threading.Event()
        self._encoder: Any = None
        self._error: BaseException | None = None
        # the imports hold the GIL: done here, so the thread's work is the native load
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401

        threading.Thread(target=self._load, name="ghindex-encoder", daemon=False).start()

    def _load(self) -> None:
        try:
            self._encoder = onnx_encoder.query_encoder(*self.key)
        except BaseException as exc:  # handed to the caller, as a direct load would raise
            self._error = exc
        finally:
            self._done.set()

    def factory(self, name: str, precision: str) -> Any:
        if (name, precision) != self.key:
            return onnx_encoder.query_encoder(name, precision)
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._encoder


def start(manifest: Mapping[str, Any]) -> Callable[[str, str], Any]:
    """The Searcher's encoder factory for the index `manifest` describes: one loading
    ahead when the manifest names an exported model, else `query_encoder` itself."""
    model = manifest.get("model") if isinstance(manifest, Mapping) else None
    name = model.get("name") if isinstance(model, Mapping) else None
    precision = model.get("precision") if isinstance(model, Mapping) else None
    if not isinstance(name, str) or precision not in PRECISIONS:
        return onnx_encoder.query_encoder
    try:
        ready = onnx_encoder.encoder_choice() == "onnx" and onnx_encoder.exported(name, precision)
    except Exception:  # a bad setting or name is reported by the load the query makes
        return onnx_encoder.query_encoder
    if not ready:
        return onnx_encoder.query_encoder
    try:
        return EncoderAhead(name, precision).factory
    except ImportError:  # no ONNX Runtime: the query's own load says what to do
        return onnx_encoder.query_encoder
