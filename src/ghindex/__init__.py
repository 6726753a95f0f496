"""ghindex: GitHub repositories' working state as a portable, versioned snapshot."""

import os as _os

from ghindex.index import deferred as _deferred

__version__ = "0.1.0"

# LanceDB's Rust core logs deprecation notes at WARN; users asked for none of them.
_os.environ.setdefault("LANCEDB_LOG", "error")
# LanceDB imports a REST client that a local snapshot never calls; its package
# `__init__` costs ~0.8 s per cold command (see index/deferred.py).
_deferred.defer_all()
