"""Lesson claims: what a notebook teaches, stated as a check on the numbers of the learner's own run.

A claim's check is a *rule*: a function of the run's numbers, declared with `@rule`, that returns
whether the effect shows with its stated margin and the numbers that decided it. Each rule carries
numbers where the effect is absent (it must then say "not held") and numbers where it shows; the
tests feed it both (`tests/test_lessons.py`), so no claim can hold by construction. The rules of a
notebook live in `labformat.lab.lessons.<notebook>`; a notebook only passes its numbers:

    @rule("smaller files make an upsert rewrite at least 2x fewer rows",
          absent=dict(rows_small=100, rows_big=100), present=dict(rows_small=40, rows_big=100))
    def fewer_rows_rewritten(rows_small: int, rows_big: int) -> tuple[bool, str]:
        return rows_big >= 2 * rows_small, f"{rows_small:,} vs {rows_big:,} rows rewritten"

    lessons = Lessons("03-query-skipping")
    lessons.check(fewer_rows_rewritten, rows_small=34_560, rows_big=161_564)
    lessons.save()
    lessons.only(exact=True)  # one line per claim: [held] or [BROKEN], the claim, its evidence

An exact claim is decided by counts (files, bytes, tasks, keys) and must hold at every preset: the
main job fails when one breaks, and the saved notebooks (run at `tiny`) must show every exact claim
held. A timing claim (`exact=False`) is decided by repeated, interleaved runs after a warm-up
(`clearly_faster`); it is reported with its spread and never fails the run, since a shared 2-core
machine is noisy.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from labformat.errors import LabformatError

HELD, BROKEN, NOT_TIMED = "held", "BROKEN", "not timed"
TOO_FEW_RUNS = "too few runs to decide"  # a timing claim's evidence at `tiny`, which times each variant once
SUFFIX = ".claims.json"


@dataclass(frozen=True)
class Claim:
    """One lesson as a check: `held` was computed from the run, `evidence` shows the numbers it used."""

    lab: str
    text: str
    held: bool
    evidence: str
    exact: bool = True  # decided by exact quantities; False: by timings (reported, never fatal)
    rule: str = ""  # the rule that decided it ("module.function"); empty only in the framework's own tests

    @property
    def verdict(self) -> str:
        if not self.held and not self.exact and self.evidence.startswith(TOO_FEW_RUNS):
            return NOT_TIMED  # nothing was timed often enough to be refuted either
        return HELD if self.held else BROKEN


@dataclass(frozen=True)
class Rule:
    """A claim's check: `decide(**numbers)` returns (held, evidence); `absent` are numbers where the
    effect is missing (the rule must say not held), `present` numbers where it shows (held)."""

    name: str
    text: str
    decide: Callable[..., tuple[Any, str]]
    absent: tuple[Mapping[str, Any], ...]
    present: tuple[Mapping[str, Any], ...]
    exact: bool = True


RULES: dict[str, Rule] = {}


def _examples(given) -> tuple[Mapping[str, Any], ...]:
    examples = (given,) if isinstance(given, Mapping) else tuple(given)
    if not examples:
        raise LabformatError("a rule needs at least one example")
    return examples


def rule(text: str, *, absent, present, exact: bool = True):
    """Declare `text` (the effect and its margin) as decided by the function below; `absent` and
    `present` are keyword arguments for it (one dict, or a list of them) where the effect is missing
    and where it shows."""

    def register(decide):
        name = f"{decide.__module__}.{decide.__qualname__}"
        if name in RULES and RULES[name].decide.__code__ is not decide.__code__:
            raise LabformatError(f"rule {name} is declared twice")
        RULES[name] = Rule(name, text, decide, _examples(absent), _examples(present), exact)
        decide.rule = RULES[name]
        return decide

    return register


def rule_of(decide) -> Rule:
    found = getattr(decide, "rule", None)
    if not isinstance(found, Rule):
        raise LabformatError(f"{getattr(decide, '__qualname__', decide)!r} is not a rule: declare it with @rule")
    return found


def median(samples: Sequence[float]) -> float:
    return float(statistics.median(samples))


def clearly_faster(fast: Sequence[float], slow: Sequence[float], margin: float = 1.2,
                   min_runs: int = 5) -> tuple[bool, str]:
    """Timing verdict: `fast` beats `slow` when each has at least `min_runs` runs, the median ratio is at
    least `margin`, and the slower variant's fastest run is slower than the faster variant's median
    (the spreads do not swallow the gap). Evidence: both medians, their min-max, the ratio."""
    fast, slow = [float(x) for x in fast], [float(x) for x in slow]
    if len(fast) < min_runs or len(slow) < min_runs:
        return False, f"{TOO_FEW_RUNS} ({len(fast)} and {len(slow)}; at least {min_runs} each)"
    f, s = median(fast), median(slow)
    ratio = s / f if f > 0 else float("inf")
    held = ratio >= margin and min(slow) > f
    return held, (f"median {f:.3f} s ({min(fast):.3f}-{max(fast):.3f}) vs {s:.3f} s ({min(slow):.3f}-{max(slow):.3f}), "
                  f"{ratio:.2f}x over {len(fast)} and {len(slow)} interleaved runs (needs {margin:.2f}x)")


class Lessons:
    """The claims one notebook makes, in the order it makes them."""

    def __init__(self, lab: str):
        self.lab = lab
        self.claims: list[Claim] = []

    def check(self, decide, **numbers) -> Claim:
        """Decide a rule (declared with `@rule`) on this run's numbers and record its claim."""
        found = rule_of(decide)
        held, evidence = found.decide(**numbers)
        return self.claim(found.text, held, evidence, found.exact, found.name)

    def claim(self, text: str, held, evidence: str, exact: bool = True, rule: str = "") -> Claim:
        """Record that the run shows `text`; `held` must be a real bool computed from the run.
        Notebooks use `check` (a rule with its counterfactual test); this is its bookkeeping."""
        # numpy.bool_ is fine; a string or a number is a mistake that would always read as "held".
        if type(held).__name__ not in ("bool", "bool_"):
            raise LabformatError(f"claim {text!r}: held must be a bool computed from the run, got {held!r}")
        if any(c.text == text for c in self.claims):
            raise LabformatError(f"claim {text!r} is made twice in {self.lab}")
        made = Claim(self.lab, text, bool(held), str(evidence), bool(exact), rule)
        self.claims.append(made)
        return made

    def frame(self, exact: bool | None = None) -> pd.DataFrame:
        """One row per claim (optionally only the exact or only the timing ones): claim, evidence, verdict."""
        chosen = [c for c in self.claims if exact is None or c.exact == exact]
        return pd.DataFrame([{"claim": c.text, "evidence": c.evidence, "verdict": c.verdict} for c in chosen],
                            columns=["claim", "evidence", "verdict"])

    def only(self, exact: bool) -> "Lessons":
        """The exact claims (counts) or the timing ones, as a Lessons that shows each in full."""
        view = Lessons(self.lab)
        view.claims = [c for c in self.claims if c.exact == exact]
        view.kind = "claims on exact quantities" if exact else "timing claims (medians after a warm-up; never fatal)"
        return view

    kind = "lesson claims"

    def broken(self, exact_only: bool = True) -> list[Claim]:
        return [c for c in self.claims if not c.held and (c.exact or not exact_only)]

    def __repr__(self) -> str:
        lines = [f"{len(self.claims)} {self.kind} of {self.lab}:"]
        for c in self.claims:
            kind = "" if c.exact else " (timing)"
            lines.append(f"  [{c.verdict}] {c.text}{kind}: {c.evidence}")
        return "\n".join(lines)

    def save(self, folder: Path | None = None) -> Path:
        """Write the claims to <out>/summary/<lab>.claims.json for the workshop summary."""
        if folder is None:
            from labformat.lab.workshop import out_dir

            folder = out_dir() / "summary"
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.lab}{SUFFIX}"
        path.write_text(json.dumps([asdict(c) for c in self.claims], indent=2) + "\n")
        return path


def load(folder: Path, lab: str) -> list[Claim]:
    """The claims a notebook saved under `folder` (none if it saved none)."""
    path = Path(folder) / f"{lab}{SUFFIX}"
    if not path.exists():
        return []
    return [Claim(**c) for c in json.loads(path.read_text())]
