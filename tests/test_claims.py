"""Lesson claims: computed from a run, refused when they cannot fail, listed in the summary, fatal when exact and broken."""

from __future__ import annotations

import numpy as np
import pytest

import labformat as lf
from labformat.lab import claims, runner


def test_a_claim_needs_a_computed_bool_and_is_made_once():
    lessons = claims.Lessons("02-demo")
    lessons.claim("files rewritten stay flat", np.int64(3) <= 4, "day 1: 3; day 28: 4")
    with pytest.raises(lf.LabformatError, match="held must be a bool"):
        lessons.claim("a truthy string always holds", "yes", "")
    with pytest.raises(lf.LabformatError, match="held must be a bool"):
        lessons.claim("a count always holds", 1, "")
    with pytest.raises(lf.LabformatError, match="made twice"):
        lessons.claim("files rewritten stay flat", True, "")


def test_verdicts_show_in_the_notebook_and_only_exact_claims_are_fatal(tmp_path):
    lessons = claims.Lessons("02-demo")
    lessons.claim("GLOBAL_SORT's files do not overlap", True, "at most 1 file at one key")
    lessons.claim("BLOOM tags faster than SIMPLE", False, "median 0.40 s vs 0.38 s", exact=False)
    assert "[held] GLOBAL_SORT's files do not overlap" in repr(lessons)
    assert "[BROKEN] BLOOM tags faster than SIMPLE (timing)" in repr(lessons)
    assert lessons.broken() == [] and len(lessons.broken(exact_only=False)) == 1
    assert list(lessons.frame(exact=True)["verdict"]) == ["held"]
    assert repr(lessons.only(exact=False)).splitlines() == [
        "1 timing claims (medians after a warm-up; never fatal) of 02-demo:",
        "  [BROKEN] BLOOM tags faster than SIMPLE (timing): median 0.40 s vs 0.38 s"]

    lessons.save(tmp_path)
    assert claims.load(tmp_path, "02-demo") == lessons.claims
    assert claims.load(tmp_path, "03-none") == []


def test_the_summary_lists_every_claim_and_the_broken_exact_ones_fail_the_job(tmp_path):
    good, bad = claims.Lessons("01-a"), claims.Lessons("02-b")
    good.claim("write tasks equal files written", True, "6 tasks, 6 files")
    bad.claim("range pruning keeps a falling share", False, "day 1: 3 of 32; day 3: 4 of 38")
    bad.claim("smaller files upsert faster", True, "median 1.2 s vs 1.5 s", exact=False)
    for lessons in (good, bad):
        lessons.save(tmp_path / "summary")
    done = [runner.Executed("01-a", tmp_path / "a", (), 1.0), runner.Executed("02-b", tmp_path / "b", (), 1.0)]

    text = runner.summary_markdown(tmp_path, "tiny", done)
    assert "1 of 2 claims on exact quantities held; BROKEN: 1." in text
    assert "| 02 | range pruning keeps a falling share | day 1: 3 of 32; day 3: 4 of 38 | **BROKEN** |" in text
    assert "smaller files upsert faster (timing)" in text and "1 of 1 timing claims held" in text
    assert [c.text for c in runner.broken_claims(tmp_path, done)] == ["range pruning keeps a falling share"]


def test_a_rule_is_checked_by_name_and_refuses_a_plain_function():
    @claims.rule("the demo effect is at least 2x", absent=dict(a=1, b=1), present=[dict(a=1, b=2), dict(a=2, b=5)])
    def demo_twice(a: int, b: int):
        return b >= 2 * a, f"{a} vs {b}"

    lessons = claims.Lessons("09-demo")
    made = lessons.check(demo_twice, a=3, b=7)
    assert made.held and made.text == "the demo effect is at least 2x" and made.rule.endswith("demo_twice")
    with pytest.raises(lf.LabformatError, match="not a rule"):
        lessons.check(lambda: (True, ""))
    del claims.RULES[made.rule]


def test_a_timing_claim_run_too_few_times_is_not_timed_rather_than_broken():
    few = claims.clearly_faster([1.0], [2.0])
    assert few[0] is False and few[1].startswith(claims.TOO_FEW_RUNS)
    timing = claims.Claim("02", "A is faster", few[0], few[1], exact=False)
    assert timing.verdict == claims.NOT_TIMED
    assert claims.Claim("02", "A is faster", False, "median 1.0 s vs 1.1 s", exact=False).verdict == claims.BROKEN
    assert claims.Claim("02", "3 files", False, few[1], exact=True).verdict == claims.BROKEN  # exact claims never are
