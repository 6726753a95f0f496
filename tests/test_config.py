"""Settings precedence: flag > environment > ghindex.toml > default."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghindex.config import DEFAULT_GRAPHQL_URL, DEFAULT_MODEL, load_settings, parse_repo
from ghindex.errors import ConfigError


def test_defaults(monkeypatch):
    monkeypatch.delenv("GHINDEX_WORKDIR")
    settings = load_settings()
    assert settings.workdir == Path(".ghindex")
    assert settings.graphql_url == DEFAULT_GRAPHQL_URL
    assert settings.model == DEFAULT_MODEL
    assert settings.store is None and settings.repos == ()


def test_flag_beats_environment_beats_file(isolated, monkeypatch):
    (isolated / "ghindex.toml").write_text(
        'workdir = "from-file"\nmodel = "file-model"\ngraphql_url = "http://file/graphql"\n'
        'repos = ["a/b"]\n'
    )
    monkeypatch.setenv("GHINDEX_WORKDIR", "from-env")
    monkeypatch.setenv("GHINDEX_MODEL", "env-model")

    settings = load_settings(workdir="from-flag")

    assert settings.workdir == Path("from-flag")
    assert settings.model == "env-model"
    assert settings.graphql_url == "http://file/graphql"
    assert settings.repos == ("a/b",)
    assert load_settings(repos=("c/d",)).repos == ("c/d",)


def test_explicit_config_path(isolated):
    path = isolated / "elsewhere.toml"
    path.write_text('model = "m"\n')
    assert load_settings(path).model == "m"
    with pytest.raises(ConfigError, match=r"^config file not found: .*missing\.toml$"):
        load_settings(isolated / "missing.toml")


def test_unknown_keys_are_an_error(isolated):
    (isolated / "ghindex.toml").write_text('modle = "typo"\n')
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert str(error.value) == (
        "ghindex.toml: unknown key 'modle' "
        "(known keys: archived, device, exclude, forks, graphql_url, include, index_bots, "
        "keep, max_wait, min_comment_chars, model, orgs, precision, redact, repos, "
        "skip_types, store, workdir)"
    )


def test_document_types_to_skip_from_the_file_or_the_environment(isolated, monkeypatch):
    (isolated / "ghindex.toml").write_text('skip_types = ["diff", "wiki_doc"]\n')
    assert load_settings().skip_types == ("diff", "wiki_doc")

    monkeypatch.setenv("GHINDEX_SKIP_TYPES", "doc, diff,doc")
    assert load_settings().skip_types == ("doc", "diff")

    monkeypatch.setenv("GHINDEX_SKIP_TYPES", "diffs")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert str(error.value) == (
        "skip_types: unknown document type 'diffs': use some of issue, pull_request, "
        "discussion, issue_comment, pr_review, pr_review_comment, release, doc, wiki_doc, diff"
    )


def test_secrets_are_never_read_from_the_file(isolated):
    (isolated / "ghindex.toml").write_text('token = "ghp_x"\n')
    with pytest.raises(ConfigError, match="secrets are never read from the config file"):
        load_settings()


def test_invalid_toml_names_the_file(isolated):
    (isolated / "ghindex.toml").write_text("repos = [\n")
    with pytest.raises(ConfigError, match=r"^ghindex.toml: not valid TOML: "):
        load_settings()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("octo/hello", "octo/hello"),
        ("https://github.com/octo/hello", "octo/hello"),
        ("github.com/octo/hello.git", "octo/hello"),
        ("  octo/hello/ ", "octo/hello"),
    ],
)
def test_repo_forms(given, expected):
    assert parse_repo(given) == expected


@pytest.mark.parametrize("bad", ["octo", "octo/", "/hello", "a/b/c", "octo hello/x"])
def test_bad_repos(bad):
    with pytest.raises(ConfigError, match="use the form owner/name"):
        parse_repo(bad)
