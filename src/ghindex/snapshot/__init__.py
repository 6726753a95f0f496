"""Snapshots: publishing a workdir to a store, pulling it back, and retention.

See docs/snapshots.md for the store layout and guarantees.
"""

from ghindex.snapshot.gc import GRACE, GcReport, gc
from ghindex.snapshot.publish import PublishReport, Staged, publish, stage
from ghindex.snapshot.pull import PullReport, pull
from ghindex.snapshot.status import local_status, store_status
from ghindex.snapshot.stores import Store

__all__ = [
    "GRACE",
    "GcReport",
    "PublishReport",
    "PullReport",
    "Staged",
    "Store",
    "gc",
    "local_status",
    "publish",
    "pull",
    "stage",
    "store_status",
]
