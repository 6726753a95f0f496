"""Ranking stages that need no index: lifting what closes or fixes a hit (and its merge
commit), and the cap on one type's share of each block of results."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ghindex.query.fusion import cap_types
from ghindex.query.hits import make_hit
from ghindex.query.search import LINK_SOURCES, LINK_WEIGHT, follow_links, lift_nearest

R = "o/r"


def hit(number: int, score: float, kind: str = "issue"):
    row = {
        "handle": f"{R}#{number}",
        "entity": f"{R}#{number}",
        "type": kind,
        "repo": R,
        "entity_type": kind,
        "number": number,
        "text": f"text {number}",
    }
    return make_hit(row, score, None, None)


def ranking(hits):
    return [(h.number, h.score) for h in hits]


class Heads:
    """Hits for entities not ranked yet, as the index would give them (None: filtered)."""

    def __init__(self, *numbers: int) -> None:
        self.numbers = numbers
        self.asked: list[list[str]] = []

    def __call__(self, entities, where):
        self.asked.append(list(entities))
        return [hit(n, 0.0) for n in self.numbers if f"{R}#{n}" in entities]


def links(**pairs):
    """links(a=[b]) : #b fixed #a (and closes it)."""
    found = {}
    for issue, fixers in pairs.items():
        number = int(issue.removeprefix("n"))
        found.setdefault(f"{R}#{number}", {"fixed_by": [], "closes": []})
        for fixer in fixers:
            found[f"{R}#{number}"]["fixed_by"].append(f"{R}#{fixer}")
            found.setdefault(f"{R}#{fixer}", {"fixed_by": [], "closes": []})
            found[f"{R}#{fixer}"]["closes"].append(f"{R}#{number}")
    return found


def test_the_fix_of_a_found_issue_joins_right_below_it():
    heads = Heads(9)
    ranked = follow_links([hit(1, 0.03), hit(2, 0.02), hit(3, 0.01)], links(n1=[9]), heads, None)

    assert ranking(ranked) == [(1, 0.03), (9, round(LINK_WEIGHT * 0.03, 6)), (2, 0.02), (3, 0.01)]
    assert heads.asked == [[f"{R}#9"]]


def test_a_found_fix_lifts_its_issue_and_never_lowers_anything():
    ranked = follow_links(
        [hit(5, 0.05), hit(1, 0.04), hit(2, 0.02), hit(9, 0.01)], links(n2=[9, 5]), Heads(), None
    )
    # #2 is lifted by its best fixer (#5), #9 by #2's score before it was lifted
    lifted_2, lifted_9 = round(LINK_WEIGHT * 0.05, 6), round(LINK_WEIGHT * 0.02, 6)
    assert ranking(ranked) == [(5, 0.05), (2, lifted_2), (1, 0.04), (9, lifted_9)]


def test_nothing_moves_without_links_or_when_the_filters_exclude_the_other_end():
    before = [hit(1, 0.03), hit(2, 0.02)]
    assert ranking(follow_links(list(before), {}, Heads(), None)) == ranking(before)
    filtered = follow_links(list(before), links(n1=[9]), Heads(), "state = 'open'")
    assert ranking(filtered) == [(1, 0.03), (2, 0.02)]


def test_only_the_best_hits_lift_their_links():
    ranked = [hit(n, 1.0 / n) for n in range(1, LINK_SOURCES + 3)]
    last = LINK_SOURCES + 2  # beyond the sources
    found = follow_links(list(ranked), links(**{f"n{last}": [999]}), Heads(999), None)
    assert 999 not in [h.number for h in found]


def test_a_lifted_pull_request_brings_its_merge_commit_just_below_it():
    merges = {f"{R}#9": [f"{R}#77"]}  # the merge commit, as a hit of its own
    heads = Heads(9, 77)
    ranked = follow_links([hit(1, 0.03), hit(2, 0.02)], links(n1=[9]), heads, None, merges=merges)
    pull = round(LINK_WEIGHT * 0.03, 6)
    assert ranking(ranked) == [(1, 0.03), (9, pull), (77, round(LINK_WEIGHT * pull, 6)), (2, 0.02)]
    # a pull request that nothing lifted keeps its merge commit where it is
    alone = follow_links([hit(9, 0.03), hit(77, 0.001)], {}, Heads(), None, merges=merges)
    assert ranking(alone) == [(9, 0.03), (77, 0.001)]


def near(*items):
    """The best hit's nearest items as the build lists them: (number, type, cosine)."""
    return [(f"{R}#{n}", kind, cosine) for n, kind, cosine in items]


def test_the_best_hits_nearest_items_of_other_types_gain_a_share_of_its_score():
    heads = Heads(9)
    before = [hit(1, 0.1), hit(2, 0.05), hit(3, 0.04, "pull_request"), hit(4, 0.03), hit(5, 0.02)]
    listed = near(
        (2, "issue", 0.9), (3, "pull_request", 0.7), (9, "pull_request", 0.6), (4, "commit", 0.2)
    )

    ranked = lift_nearest(list(before), listed, heads, None, weight=1.0)

    # #2 is of the best hit's own type: unchanged; #3 scores at least 0.1 x 0.7; #9 joins
    # with 0.1 x 0.6; #4 keeps its own 0.03, more than 0.1 x 0.2
    assert ranking(ranked) == [(1, 0.1), (3, 0.07), (9, 0.06), (2, 0.05), (4, 0.03), (5, 0.02)]
    assert heads.asked == [[f"{R}#9"]]


def test_nothing_moves_without_nearest_items_of_another_type_or_past_the_filters():
    before = [hit(1, 0.1), hit(2, 0.05)]
    assert ranking(lift_nearest(list(before), [], Heads(), None)) == ranking(before)
    same_type = near((2, "issue", 0.9), (1, "pull_request", 1.0))  # and the hit itself
    assert ranking(lift_nearest(list(before), same_type, Heads(), None)) == ranking(before)
    filtered = lift_nearest(list(before), near((9, "commit", 0.8)), Heads(), "state = 'open'")
    assert ranking(filtered) == ranking(before)


KINDS = st.sampled_from(["issue", "pull_request", "commit", "doc"])


@given(
    hits=st.lists(st.tuples(KINDS, st.floats(0.001, 0.2)), min_size=1, max_size=20),
    listed=st.lists(
        st.tuples(st.integers(0, 40), KINDS, st.floats(-2.0, 1.0)),
        max_size=10,
        unique_by=lambda t: t[0],
    ),
    weight=st.floats(0.0, 2.0),
)
def test_lifting_nearest_items_never_lowers_a_score_nor_loses_a_hit(hits, listed, weight):
    before = sorted(
        (hit(n, score, kind) for n, (kind, score) in enumerate(hits)), key=lambda h: -h.score
    )
    scores = {h.number: h.score for h in before}
    top = before[0]
    lifted = [n for n, kind, c in listed if kind != top.entity_type and c > 0 and n != top.number]
    absent = [n for n in lifted if n not in scores]
    after = lift_nearest(list(before), near(*listed), Heads(*absent), None, weight)

    assert sorted(h.number for h in after) == sorted(set(scores) | set(absent))
    assert [h.score for h in after] == sorted((h.score for h in after), reverse=True)
    cosine = {n: c for n, _kind, c in listed if n in lifted}
    for h in after:
        own = scores.get(h.number, 0.0)
        assert h.score == pytest.approx(
            max(own, weight * top.score * cosine.get(h.number, 0.0)), abs=1e-6
        )


@settings(max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "200")), deadline=None)
@given(kinds=st.lists(KINDS, max_size=60), cap=st.integers(1, 10), block=st.integers(1, 12))
def test_each_block_holds_at_most_cap_of_a_type_and_nothing_is_lost(kinds, cap, block):
    hits = [hit(n, 1.0 - n / 100, kind) for n, kind in enumerate(kinds, 1)]

    capped = cap_types(hits, cap, block)

    assert sorted(h.number for h in capped) == [h.number for h in hits]
    for kind in set(kinds):  # each type keeps its own order
        assert [h.number for h in capped if h.entity_type == kind] == [
            h.number for h in hits if h.entity_type == kind
        ]
    for start in range(0, len(capped), block):
        here = Counter(h.entity_type for h in capped[start : start + block])
        later = Counter(h.entity_type for h in capped[start + block :])
        for count in here.values():
            # over the cap only when every type left had its full share of the block
            assert count <= cap or all(here[other] >= cap for other in later)
    if cap >= block:
        assert capped == hits


def test_a_type_over_the_cap_waits_for_the_next_block():
    hits = [hit(n, 1.0 - n / 100, "pull_request") for n in range(1, 13)] + [hit(13, 0.5, "issue")]
    capped = [h.number for h in cap_types(hits, 8, 10)]
    # eight pull requests, then the issue takes a place of the first ten (the tenth, in
    # order, filled by the next pull request: no other type is left)
    assert capped == [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 10, 11, 12]


def test_a_long_row_is_shown_around_the_words_asked_for():
    from ghindex.query.context import PASSAGE_TOKENS, passage
    from ghindex.query.hits import snippet

    text = "o/r > Title\n\n" + "alpha " * 300 + "needle here " + "beta " * 300
    shown = snippet(text, 80, query="the needle")
    assert shown.startswith("…") and shown.endswith("…") and "needle here" in shown
    assert len(shown) <= 80
    assert snippet(text, 80, query="absent").startswith("alpha alpha")
    assert snippet("o/r > T\n\nshort", 80, query="needle") == "short"

    cut = passage(text, "needle")
    assert cut.startswith("o/r > Title\n\n…") and "needle here" in cut
    assert len(cut) <= PASSAGE_TOKENS * 4
    assert passage("o/r > T\n\nshort", "needle") == "o/r > T\n\nshort"
