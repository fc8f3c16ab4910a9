"""Exports OpenVoice v2's tone-colour converter to the ONNX files engine.conversion.model reads (docs/conversion.md)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

from engine.conversion.model import CONVERTER_INPUTS, ENCODER_INPUTS

OPSET = 17
DATA_KEYS = ("sampling_rate", "filter_length", "hop_length", "win_length")


class SpeakerEncoder(nn.Module):
    """Linear spectrogram [1, bins, frames] -> speaker embedding [1, gin, 1] (OpenVoice's extract_se)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        return self.model.ref_enc(spec.transpose(1, 2)).unsqueeze(-1)  # type: ignore[operator]


class ToneConverter(nn.Module):
    """Spectrogram, its length, source and target embeddings and tau -> audio [1, 1, samples] (convert)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, spec: torch.Tensor, spec_lengths: torch.Tensor, src_se: torch.Tensor, tgt_se: torch.Tensor,
                tau: torch.Tensor) -> torch.Tensor:
        return self.model.voice_conversion(  # type: ignore[operator]
            spec, spec_lengths, sid_src=src_se, sid_tgt=tgt_se, tau=tau)[0]


def _strip_weight_norm(model: nn.Module) -> None:
    """Fold weight normalization into plain weights: the exported graph does not recompute them each run."""
    for module in model.modules():
        if hasattr(module, "weight_g"):
            torch.nn.utils.remove_weight_norm(module)
        elif torch.nn.utils.parametrize.is_parametrized(module, "weight"):
            torch.nn.utils.parametrize.remove_parametrizations(module, "weight")


def export(model: nn.Module, data: dict, out: Path, *, gin_channels: int, tau: float = 0.3) -> list[Path]:
    """Write `out` (the converter), its speaker encoder and `out`.json; `model` has OpenVoice's `ref_enc` and
    `voice_conversion`, `data` its config's data table. Returns the files written."""
    model = model.eval()
    _strip_weight_norm(model)
    bins = int(data["filter_length"]) // 2 + 1
    encoder_path = out.with_name(out.name.removesuffix(".onnx") + ".speaker.onnx")
    spec = torch.rand(1, bins, 64)
    se = torch.rand(1, gin_channels, 1)
    frames = {"spec": {2: "frames"}}
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and GRU batch notes
        torch.onnx.export(SpeakerEncoder(model), (spec,), str(encoder_path), dynamo=False, opset_version=OPSET,
                          input_names=list(ENCODER_INPUTS), output_names=["se"], dynamic_axes=frames)
        args = (spec, torch.tensor([spec.shape[-1]], dtype=torch.long), se, se, torch.tensor([tau]))
        torch.onnx.export(ToneConverter(model), args, str(out), dynamo=False, opset_version=OPSET,
                          input_names=list(CONVERTER_INPUTS), output_names=["audio"],
                          dynamic_axes={**frames, "audio": {2: "samples"}})
    config = {key: data[key] for key in DATA_KEYS}
    config.update(gin_channels=gin_channels, tau=tau, speaker_encoder=encoder_path.name)
    config_path = Path(f"{out}.json")
    config_path.write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    return [out, encoder_path, config_path]


def load_openvoice(repo: Path, converter_dir: Path) -> tuple[nn.Module, dict]:
    """Upstream's SynthesizerTrn built from `converter_dir`/config.json with checkpoint.pth's weights, and
    that config (the OpenVoice checkout `repo` supplies the code)."""
    sys.path.insert(0, str(repo))
    from openvoice.models import SynthesizerTrn

    hps = json.loads((converter_dir / "config.json").read_text(encoding="utf-8"))
    model = SynthesizerTrn(
        len(hps.get("symbols", [])), hps["data"]["filter_length"] // 2 + 1,
        n_speakers=hps["data"]["n_speakers"], **hps["model"],
    )
    state = torch.load(converter_dir / "checkpoint.pth", map_location="cpu", weights_only=True)
    missing, unexpected = model.load_state_dict(state["model"], strict=False)
    if missing:
        raise SystemExit(f"export: the checkpoint lacks {len(missing)} weights, e.g. {missing[:3]}")
    return model, hps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.conversion.export_openvoice", description=__doc__)
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of github.com/myshell-ai/OpenVoice")
    parser.add_argument("--converter", type=Path, required=True,
                        help="its checkpoints_v2/converter folder (config.json and checkpoint.pth)")
    parser.add_argument("--out", type=Path, required=True, help="the converter's .onnx to write, e.g. tone.onnx")
    parser.add_argument("--tau", type=float, default=0.3, help="sampling temperature kept in the config")
    args = parser.parse_args(argv)
    model, hps = load_openvoice(args.repo, args.converter)
    for path in export(model, hps["data"], args.out, gin_channels=int(hps["model"]["gin_channels"]), tau=args.tau):
        print(f"wrote {path}")
    print(f"set engine.conversion.model = \"{args.out.resolve()}\"")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
