"""Shards built separately merge into one index with no embedding."""

from __future__ import annotations

import json

import pytest

from ghindex.index.build import build
from testkit.github_server import comment_node, issue_node
from testkit.state import rows, settings_for, store_issues


@pytest.mark.slow
def test_shards_merge_without_embedding_again(isolated, run):
    for name, repo in (("a", "octo/alpha"), ("b", "octo/beta")):
        shard = settings_for(isolated / "shards" / name)
        store_issues(
            shard,
            [
                issue_node(
                    n,
                    repo=repo,
                    title=f"{repo} issue {n}",
                    body=f"Text of {repo} #{n}.",
                    comments=[comment_node(n * 10, body=f"A comment long enough on {n}.")],
                )
                for n in range(1, 4)
            ],
            repo=repo,
        )
        build(shard)

    result = run("merge", str(isolated / "shards" / "a"), str(isolated / "shards" / "b"), "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["built"]["embedded"] == 0
    assert report["built"]["counts"] == {"issue": 6, "issue_comment": 6}
    assert report["merged"]["rows"]["issues"] == 6
    workdir = isolated / "work"
    assert rows(workdir, "SELECT repo, count(*) FROM issues GROUP BY 1 ORDER BY 1") == [
        ("octo/alpha", 3),
        ("octo/beta", 3),
    ]
    assert rows(workdir, "SELECT repo FROM repos ORDER BY 1") == [("octo/alpha",), ("octo/beta",)]
    assert rows(workdir, "SELECT count(*) FROM comments") == [(6,)]
    found = run("search", "Text of octo/beta #2", "--mode", "sparse", "--json")
    assert json.loads(found.stdout)["results"][0]["handle"] == "octo/beta#2"

    again = run("merge", str(isolated / "shards" / "a"), "--json")  # idempotent
    assert json.loads(again.stdout)["built"]["embedded"] == 0
    assert rows(workdir, "SELECT count(*) FROM issues") == [(6,)]


def test_merge_refuses_what_is_not_a_workdir(isolated, run):
    (isolated / "empty").mkdir()
    result = run("merge", str(isolated / "empty"))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {isolated / 'empty'} holds no state.duckdb: is it a ghindex workdir?\n"
    )


def test_two_shards_embedded_apart_and_merged_equal_one_build(isolated):
    """`build --shard I/N` (issue #33): each shard embeds only its own chunks into the
    cache and writes no index; merged, the build after embeds nothing and its index is
    the one a single build makes."""
    import shutil

    from ghindex.config import FP32
    from ghindex.index import table as index
    from ghindex.index.build import Shard
    from ghindex.index.merge import merge
    from testkit.embedders import HashEmbedder, hash_factory

    fetched = settings_for(isolated / "fetched")
    store_issues(
        fetched,
        [
            issue_node(
                n,
                title=f"Issue {n} about topic {n % 5}",
                body=f"Body of issue {n}. " * 30,
                comments=[comment_node(n * 10, body=f"A comment long enough on {n}.")],
            )
            for n in range(1, 41)
        ],
    )
    for name in ("one", "two", "whole", "work"):
        shutil.copytree(isolated / "fetched", isolated / name)
    embedders = {name: HashEmbedder() for name in ("one", "two", "whole", "work")}
    # a plan counts the work (all of it, and each shard's) and does nothing else
    plans = [
        build(settings_for(isolated / "one"), shard=shard, plan=True, embedder_factory=never)
        for shard in (None, Shard(1, 2), Shard(2, 2))
    ]
    assert plans[0].to_embed == plans[1].to_embed + plans[2].to_embed > 0
    assert all(p.embedded == 0 and p.inserted == 0 for p in plans)
    assert not (isolated / "one" / "manifest.json").exists()
    assert index.index_model(index.connect(isolated / "one" / "lance")) is None
    for number, name in ((1, "one"), (2, "two")):
        report = build(
            settings_for(isolated / name),
            shard=Shard(number, 2),
            embedder_factory=hash_factory(embedders[name]),
        )
        assert report.embedded == sum(embedders[name].calls) == plans[number].to_embed
        assert not (isolated / name / "manifest.json").exists()  # vectors only
        assert index.index_model(index.connect(isolated / name / "lance")) is None
    whole = build(
        settings_for(isolated / "whole"), embedder_factory=hash_factory(embedders["whole"])
    )
    # the shards split the work: together every chunk once, no chunk twice
    assert sum(embedders["one"].calls) + sum(embedders["two"].calls) == whole.embedded
    assert whole.embedded == plans[0].to_embed
    again = build(settings_for(isolated / "whole"), plan=True, embedder_factory=never)
    assert again.to_embed == 0 and again.from_cache == whole.chunks

    target = settings_for(isolated / "work")
    merged = merge(
        target.workdir, [isolated / "one", isolated / "two"], target.model, precision=FP32
    )
    joined = build(target, embedder_factory=hash_factory(embedders["work"]))

    assert merged.vectors == whole.embedded
    assert joined.embedded == 0 and embedders["work"].calls == []
    assert joined.chunks == whole.chunks

    def chunks(path):
        table = index.connect(path / "lance").open_table("chunks").to_arrow()
        columns = ("id", "content_hash", "vector")
        return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))

    assert chunks(isolated / "work") == chunks(isolated / "whole")

    # a shard's cache alone (its lance/, without the state every shard shares) is enough
    only = isolated / "vectors-only"
    shutil.copytree(isolated / "two" / "lance", only / "lance")
    late = settings_for(isolated / "late")
    shutil.copytree(isolated / "one", late.workdir)
    again = merge(late.workdir, [only], late.model, precision=FP32)
    assert again.rows == {} and again.shards == [str(only)]
    assert again.vectors == sum(embedders["two"].calls)
    late_embedder = HashEmbedder()
    assert build(late, embedder_factory=hash_factory(late_embedder)).embedded == 0
    assert chunks(late.workdir) == chunks(isolated / "whole")


def never(_model):
    raise AssertionError("a plan loads no model")


def test_plan_says_what_there_is_to_embed_in_one_line_or_json(isolated, run):
    store_issues(
        settings_for(isolated / "work"),
        [issue_node(n, title=f"Issue {n}", body=f"Body {n}. " * 20) for n in range(1, 6)],
    )
    planned = run("build", "--plan", "--json")
    assert planned.exit_code == 0, planned.output
    report = json.loads(planned.stdout)
    assert report["to_embed"] == report["chunks"] > 0 and report["embedded"] == 0
    text = run("build", "--plan", "--shard", "1/3")
    assert text.exit_code == 0, text.output
    assert text.stdout.strip().endswith("nothing embedded or indexed")
    assert "in shard 1/3" in text.stdout
    refused = run("build", "--plan", "--full")
    assert refused.exit_code != 0 and len(refused.stderr.strip().splitlines()) == 1
    assert "--plan" in refused.stderr
    assert not (isolated / "work" / "manifest.json").exists()


@pytest.mark.parametrize("given", ["0/2", "3/2", "2", "a/b", "1/300", "-1/2"])
def test_a_shard_that_is_not_i_of_n_is_one_line(run, given):
    result = run("build", "--shard", given)

    assert result.exit_code != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--shard" in result.stderr
    assert "I/N" in result.stderr or "1 to N" in result.stderr


def test_a_build_stopped_by_its_time_limit_keeps_its_vectors_and_the_next_goes_on(
    isolated, monkeypatch
):
    """`stop_after` (a job that must end before its limit): the build stops embedding,
    keeps every finished step in the cache, writes no index and says what is left; the
    next build embeds only that, and its index is the one an unstopped build makes."""
    import shutil

    from ghindex.index import build as building
    from ghindex.index import table as index
    from testkit.embedders import HashEmbedder, hash_factory

    monkeypatch.setattr(building, "EMBED_STEP", 4)
    monkeypatch.setattr(building, "SLICE_ROWS", 8)
    store_issues(
        settings_for(isolated / "work"),
        [issue_node(n, title=f"Issue {n}", body=f"Body of issue {n}. " * 20) for n in range(1, 13)],
    )
    shutil.copytree(isolated / "work", isolated / "whole")
    first = HashEmbedder()

    stopped = build(
        settings_for(isolated / "work"), embedder_factory=hash_factory(first), stop_after=1e-9
    )

    assert stopped.embedded == sum(first.calls) == 4  # one step, then the limit
    assert stopped.unfinished == stopped.to_embed - 4 > 0
    assert stopped.inserted == 0 and not (isolated / "work" / "manifest.json").exists()
    assert any("still to embed" in note for note in stopped.notes)
    second = HashEmbedder()
    finished = build(settings_for(isolated / "work"), embedder_factory=hash_factory(second))
    assert finished.from_cache == 4 and finished.embedded == sum(second.calls)
    assert finished.embedded == stopped.unfinished and finished.unfinished == 0
    whole = build(settings_for(isolated / "whole"), embedder_factory=hash_factory())
    assert whole.chunks == finished.chunks == whole.embedded

    def chunks(path):
        table = index.connect(path / "lance").open_table("chunks").to_arrow()
        return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "vector")), strict=True))

    assert chunks(isolated / "work") == chunks(isolated / "whole")


@pytest.mark.slow  # the real model
def test_stop_after_exits_3_and_a_shard_goes_on_from_its_earlier_vectors(
    isolated, run, monkeypatch
):
    """An embedding job stopped by --stop-after exits 3 (not a failure, not finished);
    its cache handed to the rerun's fresh copy of the workdir (--vectors) is not embedded
    again."""
    import shutil

    from ghindex.index import build as building

    monkeypatch.setattr(building, "EMBED_STEP", 4)
    store_issues(
        settings_for(isolated / "work"),
        [issue_node(n, title=f"Issue {n}", body=f"Body of issue {n}. " * 20) for n in range(1, 13)],
    )
    shutil.copytree(isolated / "work", isolated / "fresh")

    stopped = run("build", "--shard", "1/1", "--stop-after", "0.000001", "--json")

    assert stopped.exit_code == 3, stopped.output
    first = json.loads(stopped.stdout)
    assert first["embedded"] == 4 and first["unfinished"] == first["to_embed"] - 4 > 0
    text = run("build", "--shard", "1/1", "--stop-after", "0.000001")
    assert text.exit_code == 3
    assert "left; no index written. Run the same build again" in text.stdout
    # the rerun's job: a new copy of the workdir, given the cache the stopped one left
    monkeypatch.setenv("GHINDEX_WORKDIR", str(isolated / "fresh"))
    resumed = run("build", "--shard", "1/1", "--vectors", str(isolated / "work"), "--json")
    assert resumed.exit_code == 0, resumed.output
    again = json.loads(resumed.stdout)
    assert again["from_cache"] == 8 and again["unfinished"] == 0
    assert again["embedded"] == again["to_embed"] == first["to_embed"] - 8 > 0


@pytest.mark.slow
def test_shards_embedded_by_the_real_int8_encoder_merge_to_one_build(isolated, quantised):
    """With the packaged model quantised to int8 (the default precision), two shards
    embedded apart and merged give every chunk the very vector one build gives it."""
    import shutil

    from ghindex.config import INT8
    from ghindex.index import table as index
    from ghindex.index.build import Shard
    from ghindex.index.merge import merge

    fetched = settings_for(isolated / "fetched")
    store_issues(
        fetched,
        [
            issue_node(n, title=f"Issue {n} on topic {n % 3}", body=f"Body {n}. " * (5 + 7 * n))
            for n in range(1, 13)
        ],
    )
    for name in ("one", "two", "whole", "work"):
        shutil.copytree(isolated / "fetched", isolated / name)
    for number, name in ((1, "one"), (2, "two")):
        assert build(settings_for(isolated / name), shard=Shard(number, 2)).embedded > 0
    whole = build(settings_for(isolated / "whole"))
    target = settings_for(isolated / "work")
    merge(target.workdir, [isolated / "one", isolated / "two"], target.model, precision=INT8)
    joined = build(target)

    assert joined.embedded == 0 and joined.chunks == whole.chunks

    def vectors(path):
        table = index.connect(path / "lance").open_table("chunks").to_arrow()
        return dict(zip(*(table.column(c).to_pylist() for c in ("id", "vector")), strict=True))

    assert index.index_precision(index.connect(isolated / "work" / "lance")) == INT8
    assert vectors(isolated / "work") == vectors(isolated / "whole")
