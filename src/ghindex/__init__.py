"""ghindex: GitHub repositories' working state as a portable, versioned snapshot.

Importing ghindex changes nothing in the process: the CLI's own start-up steps (LanceDB's
log level, the deferred imports of `index/deferred.py`) run in `ghindex.cli` only.
"""

__version__ = "0.1.0"
