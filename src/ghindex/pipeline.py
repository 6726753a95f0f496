"""`ghindex update`: the CI entry point. Pull the latest snapshot (its state,
cursors and embedding cache), fetch what changed, build, publish.

Each step works on the local workdir; only the last one touches the store, and it
moves the pointer last, so an update interrupted anywhere publishes nothing.

A first build too large for one CI job is split (`shard_above`): the update stops
after the fetch, saying how many embedding shards to run (`build --shard I/N`, one
job each); the update run after them joins their caches (`vectors`) after the pull,
so that its build embeds nothing they did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ghindex.config import Settings
from ghindex.github.client import GraphQLClient
from ghindex.github.ingest import chosen_repos, fetch
from ghindex.index.build import MAX_SHARDS, GitSource, build
from ghindex.index.embed import canonical_model_name
from ghindex.index.merge import merge_vectors
from ghindex.progress import Progress
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.local import absolute, locked
from ghindex.snapshot.publish import trusted_blobs
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
    shard_above: int | None = None,
    vectors: Sequence[Path] = (),
) -> dict[str, Any]:
    """Pull, fetch, build and publish; the report of each step. `shard_above`: when
    more than that many chunks are to embed, stop before the build with `shards`, the
    number of embedding jobs of `shard_above` chunks each to run. `vectors`: workdirs
    (or caches alone) of such jobs, joined to the workdir's cache after the pull."""
    progress = progress or Progress()
    say = progress.note
    # An absolute workdir: the caller's working directory may be inside it.
    settings = replace(settings, workdir=absolute(settings.workdir))
    report: dict[str, Any] = {"pulled": None}
    store.create()
    with locked(settings.workdir, "update"):  # one pull, sync or update at a time
        ref = latest_ref(store)
        damage = trusted_blobs(store, ref)[1] if ref is not None else None
        if damage is not None:  # a pull would fail on every run: publish over it
            say("the store's newest snapshot is unusable: building on the workdir")
            report["repaired"] = damage
        elif ref is not None:
            say("pulling the latest snapshot")
            pulled = pull(store, settings.workdir, ref=ref, progress=progress)
            report["pulled"] = pulled.as_dict()
        if vectors:
            say(f"joining the vectors of {len(vectors)} embedding shards")
            model = canonical_model_name(settings.model)
            report["vectors"] = merge_vectors(settings.workdir, vectors, model, progress=progress)
        notes: list[str] = []
        repos = chosen_repos(client, settings, notes)
        report["fetched"] = fetch(
            settings.state_path,
            client,
            repos,
            full=full,
            force=force,
            redacted=settings.redact,
            progress=progress,
            notes=notes,
        ).as_dict()
        # one pass: a build that stops, having counted, when there is too much to embed
        built = build(settings, git=git, progress=progress, plan_above=shard_above)
        report["built"] = built.as_dict()
        if shard_above is not None and built.to_embed > shard_above:
            shards = min(MAX_SHARDS, math.ceil(built.to_embed / max(shard_above, 1)))
            say(f"{built.to_embed} chunks to embed: {shards} embedding shards first")
            report.update(published=None, shards=shards)
            return report
        say("publishing")
        report["published"] = publish(settings.workdir, store, progress=progress).as_dict()
    report["shards"] = 0
    return report
