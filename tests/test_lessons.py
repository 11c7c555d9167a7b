"""Every lesson claim is decided by a rule that fails where its effect is absent, and every notebook uses rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labformat.lab import claims, lessons

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))

def _rules():
    return sorted(claims.RULES.values(), key=lambda r: r.name)


@pytest.mark.parametrize("found", _rules(), ids=lambda r: r.name.removeprefix("labformat.lab.lessons."))
def test_each_rule_says_not_held_where_its_effect_is_absent_and_held_where_it_shows(found):
    for numbers in found.absent:
        held, evidence = found.decide(**numbers)
        assert type(held).__name__ in ("bool", "bool_") and not held, (found.text, numbers, evidence)
        assert isinstance(evidence, str) and evidence
    for numbers in found.present:
        held, evidence = found.decide(**numbers)
        assert type(held).__name__ in ("bool", "bool_") and held, (found.text, numbers, evidence)


def _sources(path: Path) -> list[str]:
    return ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]


@pytest.mark.parametrize("notebook", SOLUTIONS,
                         ids=lambda p: p.stem)
def test_a_notebook_decides_its_claims_by_rules_of_its_own_module(notebook):
    code = "\n".join(_sources(notebook))
    assert ".claim(" not in code, "claims are made with lessons.check(rule, ...), so each has its counterfactual test"
    used = set(re.findall(r"\.check\(\s*(?:\w+\.)*(\w+)\s*,", code))
    assert used, "a notebook states its lessons as claims"
    module = f"labformat.lab.lessons.{lessons.module_for(notebook.stem)}"
    known = {r.name.rsplit(".", 1)[1] for r in claims.RULES.values() if r.name.startswith(module + ".")}
    assert used <= known, f"rules not declared in {module}: {sorted(used - known)}"


def test_clearly_faster_needs_the_margin_and_runs_enough():
    assert claims.clearly_faster([1.0] * 5, [1.5] * 5)[0]
    assert not claims.clearly_faster([1.0] * 5, [1.1] * 5)[0]  # below the 1.2x margin
    assert not claims.clearly_faster([1.0] * 3, [2.0] * 3)[0]  # too few runs
    # the medians differ by 1.5x but the slow variant's fastest run beats the fast one's median
    assert not claims.clearly_faster([1.0, 1.0, 1.0, 1.0, 1.0], [0.9, 1.5, 1.5, 1.5, 1.5])[0]


@pytest.mark.parametrize("notebook", SOLUTIONS,
                         ids=lambda p: p.stem)
def test_every_chart_is_named_for_what_it_shows(notebook):
    """A cell that draws names its chart (`chart` metadata), so out/charts never holds `06-cell21.png`."""
    unnamed = [number for number, cell in enumerate(json.loads(notebook.read_text())["cells"], 1)
               if cell["cell_type"] == "code" and not cell["metadata"].get("chart")
               and any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))]
    assert not unnamed, f"cells drawing a chart without a `chart` name in their metadata: {unnamed}"
