"""Piper: one bundled English voice (or any Piper .onnx) on the CPU, registered voices by voice matching."""
