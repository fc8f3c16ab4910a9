"""How Kokoro's speech flows, as a listener hears it through the engine: pauses inside a sentence (none should be a
break), the pause between two sentences against the same two inside one run, and a registered voice's first audio
against a stock voice's."""

from __future__ import annotations

import io
import statistics
import time

import numpy as np

from engine.base import Voice

BREAK_S = 0.42  # a silence this long inside a sentence is heard as a break (natural phrase pauses: 0.30-0.36 s)
QUIET_DBFS = -50.0  # a 10 ms frame under this is silence
# sentences of our own, long, with no comma inside: each must be heard whole
SENTENCES = {
    "en": ("Please remind everyone that the meeting on Thursday afternoon has been moved to the larger room "
           "downstairs.",
           "The quick brown fox jumps over the lazy dog near the river bank on a warm summer evening.",
           "My grandmother used to bake fresh bread every Sunday morning before the rest of the family woke up.",
           "The train was delayed by almost an hour because of a broken signal somewhere outside the city.",
           "We spent the whole weekend painting the kitchen walls a pale shade of yellow that my sister picked.",
           "Nobody expected the little team from the village to win the championship this year.",
           "Remember to turn off the lights and lock the back door before you go to bed tonight."),
    "ja": ("来週の月曜日の会議は午後三時から大きい会議室で始まる予定です。",
           "駅の近くに新しくできた図書館には子供向けの本がたくさんあります。",
           "週末は家族と一緒に山へハイキングに行くつもりです。"),
    "zh": ("我们明天早上八点在学校门口见面然后一起去博物馆参观。",
           "这家新开的餐厅的菜非常好吃而且价格也很便宜。",
           "周末我想和朋友一起去公园散步和看电影。"),
}
# two sentences each, spoken as two runs by the engine and as one run by the model
PAIRS = {
    "en": (("The library opens at nine in the morning.", "It closes at six in the evening."),
           ("We watched a long movie about bears.", "Then we went home for dinner.")),
    "ja": (("次の会議は午後三時から始まります。", "資料を忘れずに持ってきてください。"),),
    "zh": (("我们明天早上八点在学校门口见面。", "请不要迟到。"),),
}
SEPARATOR = {"en": " ", "ja": "", "zh": ""}


def mono(pcm: bytes) -> np.ndarray:
    """The engine's 48 kHz stereo s16 as float mono."""
    return np.frombuffer(pcm, "<i2").reshape(-1, 2).mean(axis=1).astype(np.float32) / 32768


def silences(audio: np.ndarray, rate: int) -> list[float]:
    """Seconds of each silence between the first and the last sound (10 ms frames under QUIET_DBFS)."""
    step = rate // 100
    frames = audio[: len(audio) // step * step].reshape(-1, step).astype(np.float64)
    loud = np.flatnonzero(np.sqrt(np.mean(frames**2, axis=1)) > 10 ** (QUIET_DBFS / 20))
    return [(b - a - 1) * 0.01 for a, b in zip(loud, loud[1:]) if b - a > 1]


async def sentence_breaks(engine) -> tuple[int, int, str]:
    """(breaks, sentences, note): silences of BREAK_S or more inside each of SENTENCES, spoken by the engine."""
    breaks, worst = 0, {}
    count = 0
    for language, texts in SENTENCES.items():
        for text in texts:
            gaps = silences(mono(await engine.synthesize_all(text, Voice(language=language))), 48_000)
            breaks += sum(g >= BREAK_S for g in gaps)
            worst[language] = max(worst.get(language, 0.0), max(gaps, default=0.0))
            count += 1
    return breaks, count, ", ".join(f"{k} longest {v * 1000:.0f} ms" for k, v in worst.items())


async def sentence_pause(engine, model) -> tuple[float, str]:
    """(the largest ratio, note): the pause between two sentences the engine speaks as two runs, over the pause the
    model puts between the same two read as one run (`model`: the engine's KokoroModel), per language."""
    from engine.backends.kokoro.backend import DEFAULT_VOICES
    from engine.backends.kokoro.g2p import g2p_key, phonemize

    ratios: dict[str, list[float]] = {}
    for language, pairs in PAIRS.items():
        style = model.style(DEFAULT_VOICES[language])
        for first, second in pairs:
            text = first + SEPARATOR[language] + second
            two = max(silences(mono(await engine.synthesize_all(text, Voice(language=language))), 48_000))
            tokens = model.tokens(phonemize(text, g2p_key(language)))
            row = style[len(tokens)].reshape(1, 256)
            x, f0, _ = model.features(tokens, row, 1.0, None)
            one = max(silences(model.vocode(x, f0, row, 0, x.shape[2], None, None)[0], 24_000))
            ratios.setdefault(language, []).append(two / one)
    worst = max(r for rs in ratios.values() for r in rs)
    return worst, ", ".join(f"{k} {max(v):.2f}" for k, v in ratios.items())


async def registered_ttfa(engine, clip_wav: bytes, transcript: str, text: str, rounds: int = 9) -> tuple[float, float]:
    """Median seconds to the first chunk of `text` in the default voice and in a voice registered from `clip_wav`,
    alternating on the same engine, once the registered voice's vocoder statistics are learned."""
    from engine.base import VoiceProfile

    reg = await engine.register(clip_wav, transcript, max_bytes=len(clip_wav) + 1)
    features = reg.features[(engine.info.name, engine.info.version)]
    voice = Voice(profile=VoiceProfile("bench", engine.info.name, engine.info.version, features), language="en")
    for _ in range(3):  # its first runs teach its statistics (vocoded in long windows till then)
        await engine.synthesize_all(text, voice)

    async def first(v: Voice) -> float:
        t0, took = time.perf_counter(), None
        async for _chunk in engine.stream(text, v, key="bench-registered"):
            took = took if took is not None else time.perf_counter() - t0
        return took or 0.0

    stock, registered = [], []
    for _ in range(rounds):
        stock.append(await first(Voice(language="en")))
        registered.append(await first(voice))
    return statistics.median(stock), statistics.median(registered)


def wav_bytes(audio: np.ndarray, rate: int) -> bytes:
    import soundfile as sf

    out = io.BytesIO()
    sf.write(out, audio, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()
