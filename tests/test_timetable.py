"""The instructor's guide's timetable: scripts/timetable.py rewrites it from a main job's out/summary.md."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "instructor-guide.md"

_spec = importlib.util.spec_from_file_location("labformat_timetable", ROOT / "scripts" / "timetable.py")
timetable = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timetable)

SUMMARY = """\
# Workshop run at preset `small`

2 notebooks, 170 s in all. Every number below was recorded by the notebook that measured it, in this run.

## Lessons

11 of 12 claims on exact quantities held; BROKEN: 1. 2 of 3 timing claims held (timings are medians after a warm-up).

## 00-setup-and-dataset (48 s)

| what | value |

## 01-bulk-insert (122 s)

Charts: none
"""

GUIDE_TEXT = """\
# Guide

## Timetable

<!-- timetable: begin -->
| lab | run time at `small` | what it is about |
| --- | --- | --- |
| `00-setup-and-dataset` | 40 s | the environment |
| `01-bulk-insert` | 55 s | sort modes, key ranges |
| all 2 | 95 s | |

Measured long ago.
<!-- timetable: end -->

Class time is reading.
"""


def test_a_summary_gives_each_notebooks_seconds_and_the_claims_that_held():
    summary = timetable.read_summary(SUMMARY)
    assert summary == {"preset": "small", "notebooks": [("00-setup-and-dataset", 48), ("01-bulk-insert", 122)],
                       "exact": (11, 12), "timing": (2, 3), "claims": {}}


def test_write_replaces_the_table_and_keeps_each_labs_description(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.md").write_text(SUMMARY)
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE_TEXT)
    assert timetable.main([str(out), "--write", "--machine", "a test box", "--guide", str(guide)]) == 0
    text = guide.read_text()
    assert "| `00-setup-and-dataset` | 48 s | the environment |" in text
    assert "| `01-bulk-insert` | 122 s (2:02) | sort modes, key ranges |" in text
    assert "| all 2 | 170 s (2:50) | |" in text
    assert "by `python3 scripts/lab.py run` on a test box (" in text
    assert "11 of 12 claims on exact quantities and 2 of 3 timing claims held" in text
    assert "Measured long ago." not in text
    assert text.startswith("# Guide\n\n## Timetable\n\n<!-- timetable: begin -->\n")
    assert text.endswith("<!-- timetable: end -->\n\nClass time is reading.\n")


def test_the_guides_timetable_has_a_row_for_every_notebook_and_says_where_it_was_measured():
    text = GUIDE.read_text()
    block = text.split(timetable.BEGIN)[1].split(timetable.END)[0]
    rows = dict(timetable._ROW.findall(block))
    notebooks = sorted(p.stem for p in (ROOT / "notebooks" / "solutions").glob("[0-9][0-9]-*.ipynb"))
    assert sorted(rows) == notebooks, "run the main job at small and `python3 scripts/timetable.py out --write`"
    assert all(rows.values()), "each lab keeps its description"
    assert re.search(r"Measured on \d{4}-\d\d-\d\d by `python3 scripts/lab.py run` on .+", block)


def test_runs_of_some_notebooks_each_make_one_table():
    first = timetable.read_summary(SUMMARY)
    second = {"preset": "small", "notebooks": [("01-bulk-insert", 100), ("02-daily-upserts", 90)],
              "exact": (5, 5), "timing": None}
    merged = timetable.merge([first, second])
    assert merged == {"preset": "small", "exact": (16, 17), "timing": (2, 3), "notebooks": [
        ("00-setup-and-dataset", 48), ("01-bulk-insert", 100), ("02-daily-upserts", 90)]}
    block = timetable.timetable(merged, {}, "2026-11-28", "a box", runs=2)
    assert "by 2 runs of the main job" in block and "| all 3 | 238 s (3:58) | |" in block


def test_a_notebook_run_twice_counts_its_claims_once_from_the_later_run():
    def run(rows):
        table = "\n".join(f"| {lab} | {claim} | evidence | {verdict} |" for lab, claim, verdict in rows)
        return timetable.read_summary("# Workshop run at preset `small`\n\n## Lessons\n\n"
                                      f"| lab | claim | evidence from this run | verdict |\n| --- | --- | --- | --- |\n{table}\n")
    first = run([("01", "sorted files", "held"), ("02", "pruning", "**BROKEN**"), ("02", "faster (timing)", "held")])
    again = run([("02", "pruning", "held"), ("02", "faster (timing)", "not timed")])
    assert first["claims"] == {"01": [1, 1, 0, 0], "02": [0, 1, 1, 1]}
    merged = timetable.merge([first, again])
    assert merged["exact"] == (2, 2) and merged["timing"] == (0, 1)
    failed = {"preset": "small", "notebooks": [("02-daily-upserts", 50)], "exact": None, "timing": None, "claims": {}}
    merged = timetable.merge([first, again, failed])  # 02 ran once more and stopped before its claims
    assert merged["exact"] == (1, 1) and merged["timing"] is None
