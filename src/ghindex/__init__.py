"""ghindex: GitHub repositories' working state as a portable, versioned snapshot."""

import os as _os

__version__ = "0.1.0"

# LanceDB's Rust core logs deprecation notes at WARN; users asked for none of them.
_os.environ.setdefault("LANCEDB_LOG", "error")
