"""The eSpeak NG backend: Debian's `espeak-ng --stdout`, read as it is written, for every language it knows."""

from __future__ import annotations

import io
import logging
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from engine.backends.espeak.settings import EspeakSettings
from engine.base import BackendDefaults, BackendInfo, BackendUnavailable, CancelToken, EngineError, Progress, Voice
from engine.languages import base

if TYPE_CHECKING:
    from engine.settings import EngineSettings

log = logging.getLogger(__name__)

VOICE_NAME = "espeak-ng"  # the name of its voice in the engine (Voice.name); Voice.language picks the language
SAMPLE_RATE = 22_050  # what espeak-ng writes
READ_BYTES = 4_410  # 100 ms of its s16 mono: a chunk is passed on as soon as it is read
WORDS_PER_MINUTE = 175  # espeak-ng's default rate, Voice.speed 1.0
_LINE = re.compile(r"^\s*(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s*(.*)$")
_ALIAS = re.compile(r"\(([^\s()]+)\s+(\d+)\)")
NAMES = {"zh": "Chinese (Mandarin)", "cmn": "Chinese (Mandarin)",
         "yue": "Chinese (Cantonese)"}  # where eSpeak NG's own name says less


def parse_voices(listing: str) -> tuple[dict[str, str], dict[str, str]]:
    """From `espeak-ng --voices`: base code -> the eSpeak voice to use (the lowest priority number among the
    voices naming that language, itself or as one of its other languages), and base code -> English name."""
    best: dict[str, tuple[int, int, str, str]] = {}  # code -> (priority, not its own, voice, name)
    for line in listing.splitlines()[1:]:
        m = _LINE.match(line)
        if m is None or m.group(4).startswith("mb/"):  # mbrola voices need data Debian does not install
            continue
        priority, language, voice_name, others = int(m.group(1)), m.group(2), m.group(3), m.group(5)
        full = voice_name.replace("_", " ").strip()
        tags = [(language, priority)] + [(tag, int(p)) for tag, p in _ALIAS.findall(others)]
        for tag, prio in tags:
            code = base(tag)
            if not code:
                continue
            own = language.lower() == code  # the voice's own language, no regional variant: its name keeps its brackets
            name = NAMES.get(code) or (full if own else re.sub(r"\s*\(.*\)$", "", full))
            rank = (prio, 0 if tag.lower() == code else 1, language, name)
            if code not in best or rank < best[code]:
                best[code] = rank
    return {c: r[2] for c, r in best.items()}, {c: r[3] for c, r in best.items()}


class EspeakBackend(BackendDefaults):
    """One espeak-ng process per segment: the text on its standard input, WAV on its standard output,
    read in 100 ms pieces as it comes (espeak-ng writes as it synthesizes). Cancelling kills the process."""

    def __init__(self, command: str = "espeak-ng") -> None:
        path = shutil.which(command)
        if path is None:
            raise BackendUnavailable(f"{command} is not installed (Debian: apt-get install espeak-ng)")
        self.path = path
        try:
            listing = subprocess.run([path, "--voices"], capture_output=True, text=True, timeout=10, check=True).stdout
            version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendUnavailable(f"{command} does not run: {exc}") from exc
        self.voices, self.names = parse_voices(listing)
        if not self.voices:
            raise BackendUnavailable(f"{command} lists no voices")
        self.info = BackendInfo(
            name="espeak-ng", version=version.split("Data at")[0].strip() or "espeak-ng", sample_rate=SAMPLE_RATE,
            clones=False, voices=(VOICE_NAME,), languages=tuple(sorted(self.voices)),
            language_names=tuple(sorted(self.names.items())),
        )

    def command(self, voice: Voice) -> list[str]:
        """The espeak-ng command line for `voice` (its language, speed and pitch); EngineError for a language
        it does not speak."""
        code = base(voice.language) or "en"
        espeak_voice = self.voices.get(code)
        if espeak_voice is None:
            raise EngineError(f"eSpeak NG does not speak {voice.language[:20]!r}.")
        rate = int(min(500, max(80, WORDS_PER_MINUTE * voice.speed)))
        pitch = int(min(99, max(0, 50 + 4 * voice.pitch)))
        return [self.path, "--stdout", "-v", espeak_voice, "-s", str(rate), "-p", str(pitch)]

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        """Yield float32 mono at 22.05 kHz as espeak-ng writes it."""
        proc = subprocess.Popen(self.command(voice), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        remove = cancel.on_cancel(proc.kill) if cancel is not None else (lambda: None)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # (all piped)
        try:
            try:
                proc.stdin.write(text.encode("utf-8"))  # a segment is far below a pipe's buffer
                proc.stdin.close()
            except BrokenPipeError:
                pass
            yield from self._read(proc, cancel)
            if proc.wait(timeout=10) != 0 and not (cancel is not None and cancel.cancelled):
                err = proc.stderr.read().decode("utf-8", "replace").strip()[:200]
                raise EngineError(f"eSpeak NG failed: {err or f'exit code {proc.returncode}'}")
        finally:
            remove()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def _read(self, proc: subprocess.Popen[bytes], cancel: CancelToken | None) -> Iterator[np.ndarray]:
        out = proc.stdout
        assert isinstance(out, io.BufferedReader)  # (piped, buffered)
        header = b""
        while len(header) < 44:  # espeak-ng writes a canonical 44-byte WAV header
            more = out.read1(44 - len(header))
            if not more:
                return
            header += more
        if header[:4] != b"RIFF" or header[8:12] != b"WAVE" or int.from_bytes(header[24:28], "little") != SAMPLE_RATE:
            raise EngineError("eSpeak NG wrote audio in a form this engine does not read.")
        carry = b""
        while not (cancel is not None and cancel.cancelled):
            data = out.read1(READ_BYTES)
            if not data:
                break
            data = carry + data
            even = len(data) & ~1
            carry = data[even:]
            if even:
                yield np.frombuffer(data[:even], dtype="<i2").astype(np.float32) / 32768.0

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        """eSpeak NG speaks no registered voice."""
        return None

    def close(self) -> None:
        """Nothing stays open between segments."""


def espeak_voice(settings: EngineSettings, taken: set[str]) -> dict[str, EspeakBackend]:
    """eSpeak NG's voice beside the configured backend (engine.backends.Package.voices), when engine.espeak.enabled;
    when it is not installed, a warning says so and the engine does without it."""
    espeak = EspeakSettings.of(settings)
    if not espeak.enabled:
        return {}
    try:
        return {VOICE_NAME: EspeakBackend(espeak.command)}
    except BackendUnavailable as exc:
        log.warning("eSpeak NG backend off: %s", exc)
        return {}
