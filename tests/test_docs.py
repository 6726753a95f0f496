"""The docs are part of the product: their commands must be real."""

from __future__ import annotations

import itertools
import re
import shlex
import warnings
from pathlib import Path

import click
import pytest

from ghindex.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def code_blocks(text):
    return re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S)


def ghindex_lines(text):
    for block in code_blocks(text):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("ghindex "):
                yield line


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    blocks = [b.strip() for b in code_blocks(README.split("## Quick start", 1)[1].split("##")[0])]
    assert len(blocks) == 2
    demo, tests = blocks
    assert demo.endswith("ghindex demo")
    ci_lines = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1] == tests


def parse(args):
    """Resolve the command and parse its options exactly as click would, without running."""
    with cli.make_context("ghindex", list(args)) as ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # protected_args, until click 9
        name, command, rest = cli.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
        command.make_context(name, rest, parent=ctx)


@pytest.mark.parametrize("line", sorted(set(ghindex_lines(README))))
def test_every_documented_command_parses(line, isolated):
    args = shlex.split(line)[1:]
    for flag, value in itertools.pairwise(args):
        if flag in ("--snapshot", "--git", "--wiki"):  # paths that must exist
            (isolated / value).mkdir(parents=True, exist_ok=True)
    if args[0] == "merge":  # its arguments are workdirs that must exist
        for value in args[1:]:
            (isolated / value).mkdir(parents=True, exist_ok=True)
    parse(args)


def test_the_readme_documents_every_command():
    for name in cli.commands:
        assert f"ghindex {name}" in README, name


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_has_help_with_an_example(name, run):
    result = run(name, "--help")

    assert result.exit_code == 0
    assert "Example" in result.stdout
    assert f"ghindex {name}" in result.stdout.split("Example", 1)[1]


def test_version(run):
    from ghindex import __version__

    result = run("--version")
    assert result.stdout == f"ghindex, version {__version__}\n"


def test_unknown_command_is_a_usage_error(run):
    result = run("frobnicate")
    assert result.exit_code == 2
    assert "No such command 'frobnicate'" in result.stderr


def test_the_readme_table_lists_every_declared_environment_setting():
    """config.ENVIRONMENT is the one table of GHINDEX_* settings: the README's table of
    variables lists each a user may set, and no other."""
    from ghindex.config import ENVIRONMENT

    table = README.split("| variable | `ghindex.toml` key |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"`(GHINDEX_[A-Z_]+)`", table))
    declared = {name for name, v in ENVIRONMENT.items() if not v.internal}
    assert listed == declared, (sorted(listed - declared), sorted(declared - listed))
    for name in declared:  # each default as the table states it
        default = ENVIRONMENT[name].default
        if default is None:
            continue
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        row = next(line for line in table.splitlines() if f"`{name}`" in line)
        assert f"`{shown}`" in row.rsplit("|", 2)[1], (name, shown, row)
    mentioned = set(re.findall(r"`(GHINDEX_[A-Z_]+)", README))
    assert mentioned <= set(ENVIRONMENT), sorted(mentioned - set(ENVIRONMENT))


def test_every_environment_setting_the_code_names_is_declared_and_read_in_one_place():
    from ghindex.config import ENVIRONMENT

    package = ROOT / "src" / "ghindex"
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        named = set(re.findall(r"[\"'](GHINDEX_[A-Z_]+)[\"']", text))
        assert named <= set(ENVIRONMENT), (path.name, sorted(named - set(ENVIRONMENT)))
        if path.name != "config.py":
            assert not re.search(r"(?:environ\.get|environ\[|getenv)\(?\s*[\"']GHINDEX_", text), (
                f"{path.relative_to(package)} reads a GHINDEX_ variable itself: use config.env"
            )


def test_click_parses_documented_commands_strictly():
    """The parse check above must be able to fail."""
    with pytest.raises(click.UsageError):
        parse(["search", "q", "--no-such-flag"])
