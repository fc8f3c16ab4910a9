"""Puts every part of a loaded CosyVoice2 on the one GPU that `engine.cosyvoice.device` names."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.base import BackendUnavailable

log = logging.getLogger(__name__)

# The frontend's onnxruntime sessions and their files in the model folder. Upstream (ace7c47) creates the
# speech tokenizer with a bare "CUDAExecutionProvider" (device 0, whatever torch's current device is) and
# CAM++ on the CPU; both are made again here on the configured GPU.
ONNX_SESSIONS = (("speech_tokenizer_session", "speech_tokenizer_v2.onnx"), ("campplus_session", "campplus.onnx"))


def cuda_index(device: str) -> int | None:
    """The GPU index of "cuda" (0) or "cuda:N" (N); None for any other device."""
    if not device.startswith("cuda"):
        return None
    _, _, index = device.partition(":")
    try:
        return int(index) if index else 0
    except ValueError:
        raise BackendUnavailable(f"engine.cosyvoice.device {device!r} is not \"cpu\", \"cuda\" or "
                                 "\"cuda:N\".") from None


def check_device(device: str) -> None:
    """BackendUnavailable when a CUDA device is asked for and torch cannot see it; else make it current,
    so that what upstream builds on the current device (weights, CUDA streams, TensorRT contexts) lands there."""
    import torch

    index = cuda_index(device)
    if index is None:
        if torch.cuda.is_available():
            log.warning(
                "engine.cosyvoice.device is %r, but upstream CosyVoice uses the GPU whenever one is visible; "
                "set CUDA_VISIBLE_DEVICES= to keep it off the GPU",
                device,
            )
        return
    if not torch.cuda.is_available():
        raise BackendUnavailable(
            "No CUDA device for the cosyvoice2 backend: install the CUDA build of torch "
            "(the GPU engine environment, `make engine-gpu`, has it; see docs/gpu.md), check nvidia-smi, "
            "or set engine.cosyvoice.device = \"cpu\" (very slow)."
        )
    if index >= torch.cuda.device_count():
        raise BackendUnavailable(f"engine.cosyvoice.device is {device}, but torch sees {torch.cuda.device_count()} "
                                 "GPU(s).")
    torch.cuda.set_device(index)


def cuda_session(path: str, index: int) -> Any:
    """An onnxruntime session on GPU `index`, with upstream's session options."""
    import onnxruntime

    option = onnxruntime.SessionOptions()
    option.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    option.intra_op_num_threads = 1
    providers = [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
    session = onnxruntime.InferenceSession(path, sess_options=option, providers=providers)
    if "CUDAExecutionProvider" not in session.get_providers():
        log.warning("%s runs on the CPU: this onnxruntime has no CUDA provider (install onnxruntime-gpu)",
                    Path(path).name)
    return session


def place(model: Any, model_dir: Path, index: int, new_session: Callable[[str, int], Any] | None = None) -> None:
    """Bind the loaded upstream `CosyVoice2` object to `cuda:index`: the torch device its frontend and model
    move inputs to (upstream keeps a bare `cuda`, which means device 0 in any thread that has not set its
    own), the speaker table's tensors, and both onnxruntime sessions."""
    import torch

    device = torch.device("cuda", index)
    frontend, inner = model.frontend, model.model
    frontend.device = device
    inner.device = device
    for entry in getattr(frontend, "spk2info", {}).values():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                entry[key] = value.to(device)
    make = new_session or cuda_session
    for attr, filename in ONNX_SESSIONS:
        setattr(frontend, attr, make(str(model_dir / filename), index))
    log.info("CosyVoice2 placed on %s (torch parts, speech tokenizer and CAM++)", device)


def bind_thread(index: int | None) -> None:
    """Make GPU `index` current in the calling thread (CUDA's current device is per thread; new threads start on 0)."""
    if index is None:
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(index)
