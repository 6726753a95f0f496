"""ghindex: GitHub repositories' working state as a portable, versioned snapshot."""

__version__ = "0.1.0"
