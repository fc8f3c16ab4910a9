"""Kokoro-82M, the default backend: natural voices in eight languages from one int8 ONNX model and its voice packs,
on the CPU (backend.py), with what setup installs (assets.py, graph.py, tuning.py, setup.py)."""
