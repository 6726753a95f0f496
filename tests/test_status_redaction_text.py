"""The line `ghindex status` prints about secret redaction reads without a glossary."""

from __future__ import annotations

from ghindex.cli.output import redaction_text


def test_both_surfaces_under_the_same_rules_with_counts_per_kind():
    line = redaction_text(
        {"rules": {"github": "v3", "git": "v3"}, "redacted": {"secret": 3, "github-pat": 5}}
    )
    assert line == (
        "secret redaction: rules v3 (text from GitHub and text from git sources); "
        "8 values replaced by [redacted:<kind>] (5 github-pat, 3 secret)"
    )


def test_a_surface_not_fetched_yet_is_said_plainly():
    line = redaction_text({"rules": {"github": None, "git": "v3"}, "redacted": {"secret": 1}})
    assert line == (
        "secret redaction: rules v3 (text from git sources); nothing from GitHub fetched yet; "
        "1 value replaced by [redacted:<kind>] (1 secret)"
    )


def test_redaction_off_and_nothing_replaced():
    line = redaction_text({"rules": {"github": "off", "git": None}, "redacted": {}})
    assert line == (
        "secret redaction: off (text from GitHub kept raw: redact = false); "
        "nothing from git sources read yet; no values replaced"
    )
