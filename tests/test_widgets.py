"""The notebooks' explorers: a preset far bigger than `small` asks before it runs."""

from __future__ import annotations

import ipywidgets as W

from labformat.lab import widgets


def test_only_presets_far_bigger_than_small_warn_and_the_warning_says_the_size():
    assert widgets.size_warning("tiny") is None and widgets.size_warning("small") is None
    warning = widgets.size_warning("large")
    assert "172,800,000 readings" in warning and "357x" in warning and "Click Run again" in warning


def test_a_big_preset_runs_on_the_second_click_only():
    runs = []
    preset = W.Dropdown(options=["small", "large"], value="large", description="preset:")
    box = widgets._explorer([preset], runs.append)
    button = box.children[1].children[-1]
    note = box.children[2]
    button.click()
    assert runs == [] and "Click Run again" in note.value
    button.click()
    assert runs == [{"preset": "large"}] and note.value == ""
    preset.value = "small"
    button.click()
    assert len(runs) == 2  # small: no question asked
