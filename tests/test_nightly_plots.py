"""The nightly trend plot's per-process memo: the same history gives the bytes a fresh drawing gives, a changed one is redrawn."""

from __future__ import annotations

import dataclasses

import matplotlib
import pytest

from neuronprobe.report.nightly_plots import TrendPoint, clear_trend_cache, trend_svg


def history(cpu_fallbacks_last_night: float = 1.0) -> list[TrendPoint]:
    values = {"support_percentage": 99.0, "cpu_fallbacks": 0.0, "device_graphs": 2.0, "static_graphs": None, "padding_overhead": None}
    return [
        TrendPoint("2025-06-01", "neuron/trn1", values),
        TrendPoint("2025-06-02", "neuron/trn1", {**values, "cpu_fallbacks": cpu_fallbacks_last_night}),
    ]


def test_a_remembered_trend_is_the_bytes_of_a_fresh_drawing():
    clear_trend_cache()
    fresh = trend_svg(history(), salt="m-a", title="a")
    assert fresh is not None and fresh.startswith('<svg class="np-plot"')
    assert trend_svg(history(), salt="m-a", title="a") is fresh  # from the memo
    clear_trend_cache()
    assert trend_svg(history(), salt="m-a", title="a") == fresh  # drawn again: same bytes


@pytest.mark.parametrize(
    "change",
    [
        lambda points: history(cpu_fallbacks_last_night=3.0),
        lambda points: [points[0], dataclasses.replace(points[1], series="xla-cpu/trn1")],
        lambda points: [points[0], dataclasses.replace(points[1], date="2025-06-03")],
    ],
    ids=["a value", "a series", "a date"],
)
def test_a_changed_history_is_drawn_again(change):
    before = trend_svg(history(), salt="m-a", title="a")
    assert trend_svg(change(history()), salt="m-a", title="a") != before


def test_another_model_or_changed_settings_are_drawn_again(monkeypatch):
    before = trend_svg(history(), salt="m-a", title="a")
    assert trend_svg(history(), salt="m-b", title="a") != before  # page-unique ids
    assert trend_svg(history(), salt="m-a", title="b") != before  # its accessible name
    monkeypatch.setitem(matplotlib.rcParams, "axes.grid", True)
    assert trend_svg(history(), salt="m-a", title="a") != before


def test_one_night_has_no_trend():
    assert trend_svg(history()[:1], salt="m-a", title="a") is None
