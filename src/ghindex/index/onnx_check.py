"""What an ONNX file read from a snapshot may hold, checked before ONNX Runtime sees it.

A snapshot's query encoder comes from a store, so its `model.onnx` is untrusted input.
ONNX Runtime would follow a tensor's *external data* to a file named inside the model
(any path on this machine) and run operators of any domain a library registered. So the
model's protobuf is walked here first, with no library but this one (the reader install
has no `onnx` package): every tensor must hold its data inline, every operator must be
of ONNX's own domains or ONNX Runtime's built-in `com.microsoft` (which the int8 file
uses), and there are no model-local functions. Anything else, or bytes that are not a
well-formed protobuf, is refused with `OnnxRefused`.

Field numbers are those of onnx.proto (ModelProto, GraphProto, NodeProto,
AttributeProto, TensorProto, SparseTensorProto), which ONNX keeps stable.
"""

from __future__ import annotations

from collections.abc import Iterator

ALLOWED_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
MAX_DEPTH = 16  # graphs inside attributes inside graphs (If, Loop, Scan)

# ModelProto
_MODEL_OPSET, _MODEL_GRAPH, _MODEL_FUNCTIONS = 8, 7, 25
# OperatorSetIdProto
_OPSET_DOMAIN = 1
# GraphProto
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_SPARSE_INITIALIZER = 1, 5, 15
# NodeProto
_NODE_ATTRIBUTE, _NODE_DOMAIN = 5, 7
# AttributeProto: t, g, tensors, graphs, sparse_tensor, sparse_tensors
_ATTR_TENSOR, _ATTR_GRAPH, _ATTR_TENSORS, _ATTR_GRAPHS = 5, 6, 10, 11
_ATTR_SPARSE, _ATTR_SPARSES = 22, 23
# TensorProto
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14
# SparseTensorProto: values, indices
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


class OnnxRefused(ValueError):
    """The bytes are not an ONNX model this reader loads (said in one short clause)."""


def check_model(data: bytes) -> None:
    """Refuse `data` unless it is an ONNX model whose tensors are all inline and whose
    operators are all built into ONNX Runtime."""
    view = memoryview(data)
    graphs = 0
    for number, value in _fields(view):
        if number == _MODEL_OPSET and isinstance(value, memoryview):
            for field, domain in _fields(value):
                if field == _OPSET_DOMAIN:
                    _check_domain(domain, "imports operator set")
        elif number == _MODEL_GRAPH and isinstance(value, memoryview):
            graphs += 1
            _check_graph(value, 0)
        elif number == _MODEL_FUNCTIONS:
            raise OnnxRefused("it defines functions of its own")
    if graphs != 1:
        raise OnnxRefused("it holds no graph" if not graphs else "it holds several graphs")


def _check_graph(graph: memoryview, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise OnnxRefused(f"its graphs nest deeper than {MAX_DEPTH}")
    for number, value in _fields(graph):
        if not isinstance(value, memoryview):
            continue
        if number == _GRAPH_NODE:
            _check_node(value, depth)
        elif number == _GRAPH_INITIALIZER:
            _check_tensor(value)
        elif number == _GRAPH_SPARSE_INITIALIZER:
            _check_sparse(value)


def _check_node(node: memoryview, depth: int) -> None:
    for number, value in _fields(node):
        if number == _NODE_DOMAIN:
            _check_domain(value, "uses an operator of")
        elif number == _NODE_ATTRIBUTE and isinstance(value, memoryview):
            for field, inner in _fields(value):
                if not isinstance(inner, memoryview):
                    continue
                if field in (_ATTR_TENSOR, _ATTR_TENSORS):
                    _check_tensor(inner)
                elif field in (_ATTR_GRAPH, _ATTR_GRAPHS):
                    _check_graph(inner, depth + 1)
                elif field in (_ATTR_SPARSE, _ATTR_SPARSES):
                    _check_sparse(inner)


def _check_tensor(tensor: memoryview) -> None:
    for number, value in _fields(tensor):
        if number == _TENSOR_EXTERNAL_DATA or (number == _TENSOR_DATA_LOCATION and value != 0):
            raise OnnxRefused("a tensor keeps its data in an external file")


def _check_sparse(sparse: memoryview) -> None:
    for number, value in _fields(sparse):
        if number in (_SPARSE_VALUES, _SPARSE_INDICES) and isinstance(value, memoryview):
            _check_tensor(value)


def _check_domain(value: int | memoryview, what: str) -> None:
    if not isinstance(value, memoryview):
        raise OnnxRefused("it is not a well-formed ONNX file (a domain that is not text)")
    try:
        domain = bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise OnnxRefused("it is not a well-formed ONNX file (a domain that is not text)") from None
    if domain not in ALLOWED_DOMAINS:
        shown = domain if len(domain) <= 60 else domain[:57] + "..."
        raise OnnxRefused(f"it {what} domain {shown!r}, not built into ONNX Runtime")


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """(field number, value) of each field of one protobuf message: an int for a varint
    or fixed-width field, the bytes of a length-delimited one."""
    at, end = 0, len(data)
    while at < end:
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OnnxRefused("it is not a well-formed ONNX file (field number 0)")
        if wire == _VARINT:
            value, at = _varint(data, at)
            yield number, value
        elif wire == _BYTES:
            length, at = _varint(data, at)
            if length > end - at:
                raise OnnxRefused("it is not a well-formed ONNX file (a field runs past its end)")
            yield number, data[at : at + length]
            at += length
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if width > end - at:
                raise OnnxRefused("it is not a well-formed ONNX file (a field runs past its end)")
            yield number, int.from_bytes(data[at : at + width], "little")
            at += width
        else:
            raise OnnxRefused(f"it is not a well-formed ONNX file (wire type {wire})")


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise OnnxRefused("it is not a well-formed ONNX file (a number runs past its end)")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
