"""Finds, checks, imports and loads the upstream CosyVoice2 model, and sizes how many streams its GPU runs at once."""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.backends.cosyvoice.device import check_device, cuda_index, place
from engine.backends.cosyvoice.settings import CosyVoiceSettings
from engine.base import BackendUnavailable

log = logging.getLogger(__name__)

GIB = 1 << 30
# Conservative guess of the GPU memory one concurrent CosyVoice2-0.5B stream needs beyond the weights
# (LLM KV cache, flow-matching activations, HiFT). Unmeasured: bench/gpu.py prints the real peak.
DEFAULT_STREAM_BYTES = int(1.5 * GIB)
DEFAULT_RESERVE_BYTES = 2 * GIB

REQUIRED_FILES = (
    "cosyvoice2.yaml",
    "llm.pt",
    "flow.pt",
    "hift.pt",
    "campplus.onnx",
    "speech_tokenizer_v2.onnx",
    "CosyVoice-BlankEN",
)
INSTALL_HINT = (
    "git clone --recursive https://github.com/FunAudioLLM/CosyVoice, pip install -r requirements.txt, and put "
    "the clone and its third_party/Matcha-TTS on PYTHONPATH (see docs/gpu.md, 'GPU deployment')"
)
MIN_COMMIT = "6dd68b9 (2025-05-30)"  # the oldest upstream commit whose API the adapter runs on
TESTED_COMMIT = "ace7c47 (2026-03-16)"
DOWNLOAD_HINT = (
    "download CosyVoice2-0.5B into it first, e.g. `python -c \"from modelscope import snapshot_download; "
    "snapshot_download('iic/CosyVoice2-0.5B', local_dir='DIR')\"` (or huggingface_hub with "
    "'FunAudioLLM/CosyVoice2-0.5B'); the bot never downloads models itself"
)


# -- sizing -----------------------------------------------------------------------------------------


def suggest_concurrency(
    free_bytes: int,
    per_stream_bytes: int = DEFAULT_STREAM_BYTES,
    reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    cap: int = 16,
) -> int:
    """How many segments may synthesize at once (`engine.max_concurrency`) on one GPU.

    `free_bytes` is what the GPU has free after the model is loaded (`torch.cuda.mem_get_info()[0]`);
    `reserve_bytes` is kept back for fragmentation and the CUDA context of other work; each stream is
    budgeted `per_stream_bytes`. The answer is at least 1 (a GPU that holds the model runs one stream)
    and at most `cap`, past which the GPU's compute, not its memory, is the limit (see bench/gpu.py).
    """
    if per_stream_bytes <= 0:
        raise ValueError("per_stream_bytes must be positive")
    usable = max(0, int(free_bytes) - max(0, int(reserve_bytes)))
    return max(1, min(int(cap), usable // int(per_stream_bytes)))


# -- checks and loading -----------------------------------------------------------------------------


def check_model_dir(settings: CosyVoiceSettings) -> Path:
    """The model folder, or BackendUnavailable naming what to download and where."""
    if not settings.model_dir:
        raise BackendUnavailable(
            "engine.cosyvoice.model_dir is not set: set it to a folder holding CosyVoice2-0.5B and " + DOWNLOAD_HINT
        )
    path = Path(settings.model_dir).expanduser()
    if not path.is_dir():
        hint = DOWNLOAD_HINT.replace("DIR", str(path))
        raise BackendUnavailable(f"CosyVoice2 model folder {path} does not exist: {hint}")
    if (path / "cosyvoice3.yaml").exists() and not (path / "cosyvoice2.yaml").exists():
        raise BackendUnavailable(f"{path} holds a CosyVoice3 model; the cosyvoice2 backend runs CosyVoice2-0.5B.")
    missing = [name for name in REQUIRED_FILES if not (path / name).exists()]
    if settings.load_trt and not (path / "flow.decoder.estimator.fp32.onnx").exists():
        missing.append("flow.decoder.estimator.fp32.onnx (needed by load_trt)")
    if settings.load_jit:
        jit = f"flow.encoder.{'fp16' if settings.fp16 else 'fp32'}.zip"
        if not (path / jit).exists():
            missing.append(f"{jit} (needed by load_jit)")
    if missing:
        raise BackendUnavailable(
            f"CosyVoice2 model folder {path} is incomplete (missing {', '.join(missing)}): "
            + DOWNLOAD_HINT.replace("DIR", str(path))
        )
    return path


def import_cosyvoice() -> Any:
    """The upstream `cosyvoice.cli.cosyvoice` module, or BackendUnavailable saying how to install it."""
    try:
        return importlib.import_module("cosyvoice.cli.cosyvoice")
    except ImportError as exc:
        raise BackendUnavailable(f"The cosyvoice package is not importable ({exc}): {INSTALL_HINT}.") from exc


def upstream_version(module: Any) -> str:
    """The installed cosyvoice's package version or the git commit of the clone it is imported from."""
    try:
        return metadata.version("cosyvoice")
    except metadata.PackageNotFoundError:
        pass
    try:
        root = Path(module.__file__).resolve().parents[2]
        git = root / ".git"
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            ref_file = git / ref
            if ref_file.exists():
                return ref_file.read_text().strip()[:12]
            for line in (git / "packed-refs").read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0][:12]
            return "unknown"
        return head[:12]
    except (OSError, AttributeError, TypeError, IndexError):
        return "unknown"


def _accepted(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The subset of `kwargs` that `fn` takes (older upstream releases lack load_vllm, trt_concurrent)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return kwargs
    dropped = [k for k in kwargs if k not in params]
    if any(kwargs[k] for k in dropped if isinstance(kwargs[k], bool)):
        log.warning("this cosyvoice release ignores %s", ", ".join(dropped))
    return {k: v for k, v in kwargs.items() if k in params}


def load_cosyvoice(settings: CosyVoiceSettings, workers: int = 1) -> tuple[Any, str]:
    """Load the upstream CosyVoice2 object from `settings.model_dir`; returns it and its version string."""
    path = check_model_dir(settings)
    check_device(settings.device)
    module = import_cosyvoice()
    cls = getattr(module, "CosyVoice2", None)
    if cls is None:
        raise BackendUnavailable(f"This cosyvoice release has no CosyVoice2 class: {INSTALL_HINT}.")
    kwargs = _accepted(
        cls,
        {
            "load_jit": settings.load_jit,
            "load_trt": settings.load_trt,
            "load_vllm": settings.load_vllm,
            "fp16": settings.fp16,
            "trt_concurrent": max(1, workers),
        },
    )
    log.info("loading CosyVoice2 from %s (%s)", path, kwargs)
    # an existing local folder is passed, so upstream never falls back to snapshot_download
    model = cls(str(path.resolve()), **kwargs)
    index = cuda_index(settings.device)
    if index is not None:
        place(model, path, index)
    return model, upstream_version(module)


def check_api(model: Any, version: str | None) -> None:
    """BackendUnavailable, naming the commit to check out, for a clone older than the API the adapter runs on."""
    problems = []
    if "zero_shot_spk_id" not in inspect.signature(model.frontend.frontend_zero_shot).parameters:
        problems.append("frontend_zero_shot takes no zero_shot_spk_id (added 2025-04-15)")
    token2wav = getattr(model.model, "token2wav", None)
    if token2wav is not None:
        params = inspect.signature(token2wav).parameters
        if "token_offset" not in params or "stream" not in params:
            problems.append("token2wav takes no token_offset and stream (its flow-cache form, 2025-01-23 to "
                            "2025-05-27)")
        if hasattr(model.model, "trt_context_dict"):
            problems.append("token2wav needs a per-request TensorRT context (2025-04-16 to 2025-05-30)")
    if problems:
        raise BackendUnavailable(
            f"This CosyVoice clone ({version or 'unknown commit'}) is older than the API the cosyvoice2 backend "
            f"runs on: {'; '.join(problems)}. Check out commit {MIN_COMMIT} or later; {TESTED_COMMIT} is the one "
            "targeted: git -C CosyVoice fetch && git -C CosyVoice checkout "
            f"{TESTED_COMMIT.split()[0]} && git -C CosyVoice submodule update --init --recursive (docs/gpu.md)."
        )
