"""Kokoro's vocoder as setup cuts it (engine/backends/kokoro_graph.py) sounds as the model's own: its added inputs at
their neutral values change nothing, the fused Snakes keep the float sums, the integer convolutions differ from the
float ones by their quantization alone, and the vocoder kokoro_tuning.py chooses loads and says so."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.utils import Extractor

from engine.backends.kokoro import assets as kokoro_assets
from engine.backends.kokoro import graph as graph
from engine.backends.kokoro.tuning import concurrency, text_feeds, tuning
from engine.backends.sessions import new_session
from engine.settings import EngineSettings

pytestmark = pytest.mark.timeout(600)

# The integer convolutions quantize each activation to 8 bits (per tensor, on the fly): their audio differs from the
# float convolutions' over the same dequantized weights at an SNR of ~16-18 dB, and a float rounding upstream of a
# quantizer moves it as much (the fused Snakes' integer vocoder against the uncut one: ~22 dB).
QUANTIZED_SNR_DB = 12.0
FLOAT_SNR_DB = 80.0  # float rewrites (fused Snakes, scales folded into weights): measured ~116 dB


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    reference, other = reference.reshape(-1), other.reshape(-1)
    return float(10 * np.log10(np.sum(reference ** 2) / max(np.sum((other - reference) ** 2), 1e-30)))


@pytest.fixture(scope="module")
def joined():
    return onnx.load(str(kokoro_assets.model_path()))


@pytest.fixture(scope="module")
def features() -> dict[str, np.ndarray]:
    """The vocoder's feeds for a short sentence, its added inputs neutral (the model as it was)."""
    feeds = text_feeds("My brother bought a small red car.")
    x, f0 = new_session(str(kokoro_assets.graph_paths()[graph.FEATURES]), 2).run([graph.X, graph.F0], feeds)
    return {graph.X: x, graph.F0: f0, "style": feeds["style"]}


def run(model, feeds: dict[str, np.ndarray], threads: int = 2, options=()) -> np.ndarray:
    """The audio of `model` (a proto or a path); the cut vocoder's added inputs neutral: PHASE0 0, OWN 1."""
    session = new_session(model if isinstance(model, str) else model.SerializeToString(), threads, options=options)
    inputs = {i.name: i for i in session.get_inputs()}
    feeds = dict(feeds)
    if graph.NORMS in inputs:
        shape = inputs[graph.NORMS].shape
        feeds |= {graph.PHASE0: np.zeros((1, 1, graph.HARMONICS), np.float32),
                  graph.NORMS: np.zeros(shape, np.float32), graph.OWN: np.ones(shape, np.float32)}
    return session.run(["audio"], feeds)[0].reshape(-1)


def uncut(joined, integer: bool):
    part = Extractor(joined).extract_model([graph.X, graph.F0, "style"], ["audio"])
    if not integer:
        graph.float_convolutions(part)
    return part


def test_the_added_inputs_at_own_one_give_the_uncut_vocoders_audio(joined, features):
    """kokoro_graph's invariant: PHASE0 0 and OWN 1 are the model as it was, exactly (its integer convolutions)."""
    part = uncut(joined, integer=True)
    reference = run(part, features)
    graph.with_start_phase(part)
    graph.with_given_norms(part)
    assert np.max(np.abs(run(part, features) - reference)) <= 1e-6


def test_fused_snakes_keep_the_float_vocoders_sums(joined, features):
    reference = run(uncut(joined, integer=False), features)
    shipped = run(str(kokoro_assets.graph_paths()[graph.VOCODER]), features)
    assert snr_db(reference, shipped) >= FLOAT_SNR_DB
    assert np.max(np.abs(shipped - reference)) <= 1e-4


def test_integer_convolutions_differ_from_float_by_their_quantization(joined, features):
    files = kokoro_assets.graph_paths()
    floats = run(str(files[graph.VOCODER]), features)
    integers = run(str(files[graph.VOCODER_INT]), features)
    assert snr_db(floats, integers) >= QUANTIZED_SNR_DB
    assert snr_db(run(uncut(joined, integer=True), features), integers) >= QUANTIZED_SNR_DB


def test_the_chosen_vocoder_loads_and_sounds_as_its_kind(joined, features):
    chosen = tuning("", concurrency(EngineSettings()))  # what setup measured
    assert chosen.vocoder in graph.FILES and chosen.threads >= 1 and "real time" in chosen.why
    audio = run(str(kokoro_assets.graph_paths()[chosen.vocoder]), features, chosen.threads, chosen.options)
    reference = run(uncut(joined, integer=False), features)
    assert snr_db(reference, audio) >= (FLOAT_SNR_DB if chosen.vocoder == graph.VOCODER else QUANTIZED_SNR_DB)
