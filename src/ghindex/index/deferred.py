"""Deferring a third-party package's `__init__` until one of its own names is used.

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
"""

from __future__ import annotations

import importlib.util
import sys
import threading

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


def defer_all() -> None:
    for name in DEFERRED:
        defer_package_init(name)
