"""A second Piper voice for tests: the bundled model's files under another name, its .onnx.json naming
another language (what an admin dropping a voice into engine.piper.voices_dir does)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine.backends.piper.backend import bundled_model_path


def drop_piper_voice(folder: Path, name: str = "de_DE-joe-medium", language: str = "de_DE") -> Path:
    """Put `name`.onnx (the bundled model, hard-linked or copied) and its .onnx.json with `language` into `folder`."""
    src = bundled_model_path()
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / f"{name}.onnx"
    try:
        os.link(src, model)
    except OSError:
        shutil.copyfile(src, model)
    config = json.loads(Path(f"{src}.json").read_text("utf-8"))
    family = language.split("_")[0]
    config["language"] = {**config.get("language", {}), "code": language, "family": family}
    Path(f"{model}.json").write_text(json.dumps(config), "utf-8")
    return model
