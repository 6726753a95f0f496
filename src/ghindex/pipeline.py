"""`ghindex update`: the CI entry point. Pull the latest snapshot (its state,
cursors and embedding cache), fetch what changed, build, publish.

Each step works on the local workdir; only the last one touches the store, and it
moves the pointer last, so an update interrupted anywhere publishes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ghindex.config import Settings
from ghindex.github.client import GraphQLClient
from ghindex.github.ingest import chosen_repos, fetch
from ghindex.index.build import GitSource, build
from ghindex.progress import Progress
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.local import absolute, locked
from ghindex.snapshot.refs import latest_ref


def update(
    settings: Settings,
    store: Store,
    client: GraphQLClient,
    *,
    full: bool = False,
    force: bool = False,
    git: Sequence[GitSource] = (),
    progress: Progress | None = None,
) -> dict[str, Any]:
    progress = progress or Progress()
    say = progress.note
    # An absolute workdir: the caller's working directory may be inside it.
    settings = replace(settings, workdir=absolute(settings.workdir))
    report: dict[str, Any] = {"pulled": None}
    store.create()
    with locked(settings.workdir, "update"):  # one pull, sync or update at a time
        ref = latest_ref(store)
        if ref is not None:
            say("pulling the latest snapshot")
            pulled = pull(store, settings.workdir, ref=ref, progress=progress)
            report["pulled"] = pulled.as_dict()
        repos = chosen_repos(client, settings)
        report["fetched"] = fetch(
            settings.state_path,
            client,
            repos,
            full=full,
            force=force,
            redacted=settings.redact,
            progress=progress,
        ).as_dict()
        report["built"] = build(settings, git=git, progress=progress).as_dict()
        say("publishing")
        report["published"] = publish(settings.workdir, store, progress=progress).as_dict()
    return report
