"""What the CLI does to LanceDB's import so that a cold command starts fast, in its own
process only (`import ghindex` changes nothing): two things when `ghindex.cli` is
imported (`cli_process`), invisible to code that uses the libraries, and a third when
the command runs (`no_pandas_probe`, see there). Each is a workaround with a test that
fails once the library no longer needs it (tests/test_cold_start.py):

1. A third-party package's `__init__` deferred until one of its own names is used.
`import lancedb` imports `lance_namespace`, which imports the models of the generated
REST client `lance_namespace_urllib3_client`. Python runs a package's `__init__` before
any submodule, and that client's `__init__` imports all its API classes, whose ~370
`pydantic.validate_call` methods build validators on import: about 0.8 s of every cold
`ghindex search` on a 2-core machine, for a REST client that a local snapshot never
uses. (pylance made the same client import lazy in lance-format/lance#9273; lancedb 0.40
still imports it eagerly.)

`defer_package_init` puts the package's module object in `sys.modules` with its
`__path__` set but its `__init__` not yet run, so `import pkg.models` loads that
submodule alone. The first time anyone asks the package itself for a name
(`from pkg import ApiClient`, `pkg.__version__`), its `__init__` runs in the same module
object and the name is answered as before: nothing that uses the client changes.

2. lancedb imported on Python 3.11 as on 3.12+. On 3.12+ lancedb marks its overriding
methods with `typing.override`, which only sets `__override__`; before 3.12 it uses the
`overrides` package, whose decorator disassembles the defining class's bytecode to check
each of ~100 methods against its base class at import (~0.1 s here, for a check that
lancedb's own tests make). While lancedb's modules execute, `overrides.override` is the
marker-only decorator (`typing_extensions.override`); it is restored right after, so
any other code gets the real one.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from importlib.machinery import ModuleSpec
from typing import Any

#: Packages whose `__init__` costs far more than what ghindex takes from them.
DEFERRED = ("lance_namespace_urllib3_client",)


def defer_package_init(name: str) -> bool:
    """Register `name` with its `__init__` deferred; False when it is already imported,
    not installed or not a package (then nothing changes)."""
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = importlib.util.module_from_spec(spec)
    lock = threading.Lock()

    def run_init(attribute: str) -> object:
        with lock:
            if module.__dict__.get("__getattr__") is run_init:
                del module.__getattr__
                spec.loader.exec_module(module)
        return getattr(module, attribute)

    module.__getattr__ = run_init
    sys.modules[name] = module
    return True


class AroundImport:
    """A one-use import finder: `name`'s module executes inside `around()`, a context
    manager; every other import, and any later one, goes on as usual."""

    def __init__(self, name: str, around: Callable[[], AbstractContextManager[Any]]) -> None:
        self.name = name
        self.around = around

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            with self.around():
                execute(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def around_import(name: str, around: Callable[[], AbstractContextManager[Any]]) -> bool:
    """Run `name`'s import inside `around()` when it comes; False when it already came."""
    if name in sys.modules:
        return False
    if any(isinstance(f, AroundImport) and f.name == name for f in sys.meta_path):
        return True
    sys.meta_path.insert(0, AroundImport(name, around))
    return True


@contextmanager
def marker_only_override() -> Iterator[None]:
    try:
        import overrides
        from typing_extensions import override
    except ImportError:  # nothing to swap: lancedb imports as it would
        yield
        return
    saved = overrides.override
    overrides.override = override
    try:
        yield
    finally:
        overrides.override = saved


def cli_process() -> None:
    """The CLI's start-up: LanceDB's Rust core quiet below errors (it logs deprecation
    notes at WARN, which no user asked for), and `defer_all`."""
    os.environ.setdefault("LANCEDB_LOG", "error")
    defer_all()


def defer_all() -> None:
    for name in DEFERRED:
        defer_package_init(name)
    if sys.version_info < (3, 12):
        around_import("lancedb", marker_only_override)


class _NoPandas:
    """An import finder under which pandas is not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@contextmanager
def pandas_hidden() -> Iterator[None]:
    hide = _NoPandas()
    sys.meta_path.insert(0, hide)
    try:
        yield
    finally:
        sys.meta_path.remove(hide)


def no_pandas_probe() -> None:
    """For the CLI's own process only: `pyarrow.dataset` imports with pandas hidden.

    Its initialisation makes an Arrow scalar, and pyarrow then probes for pandas: ~0.3 s
    of importing pandas in every cold `search`, which never uses it. With pandas hidden
    for that moment the probe finds none; a later call that needs pandas
    (`Table.to_pandas()`) imports it then, as pyarrow tries again whenever pandas is
    required. Until then pyarrow does not recognise pandas objects handed to it, which
    the CLI never does; a program importing ghindex as a library is left as it is."""
    if "pandas" not in sys.modules:
        around_import("pyarrow.dataset", pandas_hidden)
