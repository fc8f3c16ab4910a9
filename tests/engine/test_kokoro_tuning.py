"""Kokoro's per-host tuning (engine/backends/kokoro_tuning.py): measured on the real model, stored beside it, read
back, and measured again when the CPU, the graph or the engine's inferences at once change."""

from __future__ import annotations

import json

import pytest

from engine.backends.cpu import usable_cores
from engine.backends.kokoro import assets as kokoro_assets
from engine.backends.kokoro import graph as graph
from engine.backends.kokoro import tuning as kokoro_tuning

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def assets(tmp_path):
    """A folder holding the installed files (linked), without a tuning."""
    installed = kokoro_assets.folder()
    for path in installed.iterdir():
        if path.name != kokoro_tuning.TUNING_FILE:
            (tmp_path / path.name).symlink_to(path)
    return tmp_path


def test_a_real_measurement_tries_each_vocoder_and_thread_count(assets):
    result = kokoro_tuning.measure(str(assets), 2, frames=24, rounds=1)
    cores = usable_cores()
    tried = {(f["vocoder"], f["threads"]) for f in result["figures"]}
    assert tried == set(kokoro_tuning.candidates(cores, 2))
    assert {threads for _, threads in tried} == {max(1, cores // 2), cores}
    assert all(f["together"] > 0 and f["alone"] > 0 for f in result["figures"])
    assert (result["chosen"]["vocoder"], result["chosen"]["threads"]) in tried


def test_the_tuning_is_stored_read_back_and_measured_again_when_stale(assets, monkeypatch):
    measured = []

    def fake(assets_dir: str, at_once: int) -> dict:
        measured.append(at_once)
        figures = [{"vocoder": v, "threads": n, "together": 1.0 + n, "alone": 1.0} for v, n in [(graph.VOCODER, 1),
                   (graph.VOCODER, 2), (graph.VOCODER_INT, 1)]]
        return {"at_once": at_once, "chosen": {"vocoder": graph.VOCODER, "threads": 2}, "figures": figures,
                "measured": "now"}

    monkeypatch.setattr(kokoro_tuning, "measure", fake)
    first = kokoro_tuning.tuning(str(assets), 2)
    assert first == kokoro_tuning.tuning(str(assets), 2) and measured == [2]  # read back, not measured again
    assert (first.vocoder, first.threads, first.options) == (graph.VOCODER, 2, kokoro_tuning.OPTIONS)
    assert "float convolutions, 2 thread(s)" in first.why and "3.00x real time with 2 at once" in first.why
    stored = json.loads((assets / kokoro_tuning.TUNING_FILE).read_text())
    assert stored["stamp"] == kokoro_tuning.stamp() and stored["stamp"]["host"]["cores"] == usable_cores()

    kokoro_tuning.tuning(str(assets), 1)  # another engine's inferences at once: measured for it, the other kept
    assert measured == [2, 1] and set(json.loads((assets / kokoro_tuning.TUNING_FILE).read_text())["by_concurrency"]) \
        == {"1", "2"}

    other = dict(kokoro_tuning.host(), model="Another CPU")
    monkeypatch.setattr(kokoro_tuning, "host", lambda: other)
    kokoro_tuning.tuning(str(assets), 2)
    assert measured == [2, 1, 2]  # another CPU: measured again, the old figures dropped
    assert set(json.loads((assets / kokoro_tuning.TUNING_FILE).read_text())["by_concurrency"]) == {"2"}

    monkeypatch.setattr(kokoro_assets, "graph_stamp", lambda: "another graph")
    kokoro_tuning.tuning(str(assets), 2)
    assert measured == [2, 1, 2, 2]


def test_ties_go_to_float_then_more_threads():
    figures = [{"vocoder": graph.VOCODER_INT, "threads": 1, "together": 2.0},
               {"vocoder": graph.VOCODER, "threads": 1, "together": 1.97},
               {"vocoder": graph.VOCODER, "threads": 2, "together": 1.5}]
    assert kokoro_tuning.choose(figures) == (graph.VOCODER, 1)
    figures[1]["together"] = 1.7
    assert kokoro_tuning.choose(figures) == (graph.VOCODER_INT, 1)
