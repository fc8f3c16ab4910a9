"""Prometheus metrics of the bot: TTFA, utterances, queues, underruns, voice connections, engine RTF and errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from bot.speech.queue.utterance import Outcome, Utterance
    from bot.speech.service import SpeechService
    from engine.base import Engine

TTFA_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class _LiveCollector:
    """Values read from the running services at scrape time."""

    def __init__(self, speech: SpeechService, engine: Engine) -> None:
        self.speech = speech
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        queue = GaugeMetricFamily("voicebot_queue_length", "Utterances waiting per guild", labels=["guild"])
        connections = GaugeMetricFamily("voicebot_voice_connections", "Active voice connections")
        underruns = CounterMetricFamily("voicebot_underruns", "Silence frames inserted mid-utterance")
        total_underruns = 0
        for guild_id, sp in self.speech.speakers().items():
            queue.add_metric([str(guild_id)], len(sp.pending()))
            total_underruns += sp.underruns
        connections.add_metric([], self.speech.voice_connections())
        underruns.add_metric([], total_underruns)
        yield from (queue, connections, underruns)
        received = self.speech.received
        heard = CounterMetricFamily("voicebot_voice_received_packets", "Members' audio packets the calls received")
        heard.add_metric([], received.packets)
        dropped = CounterMetricFamily("voicebot_voice_receive_dropped", "Packets and voice messages the receive "
                                      "path dropped", labels=["reason"])
        for reason, count in sorted(received.drops().items()):
            dropped.add_metric([reason], count)
        yield from (heard, dropped)
        counters = self.engine.stats()
        errors = CounterMetricFamily("voicebot_engine_errors", "Engine segment failures", labels=["kind"])
        errors.add_metric(["timeout"], counters.timeouts)
        errors.add_metric(["other"], counters.errors - counters.timeouts)
        yield errors
        audio = CounterMetricFamily("voicebot_engine_audio_seconds", "Audio synthesized")
        audio.add_metric([], counters.audio_seconds)
        synth = CounterMetricFamily("voicebot_engine_synthesis_seconds", "Time spent synthesizing")
        synth.add_metric([], counters.synthesis_seconds)
        rtf = GaugeMetricFamily("voicebot_engine_rtf", "Synthesis seconds per audio second, since start")
        rtf.add_metric([], counters.synthesis_seconds / counters.audio_seconds if counters.audio_seconds else 0.0)
        yield from (audio, synth, rtf)


class BotMetrics:
    """The bot's Prometheus registry: a speech listener's counts and the live collector above."""

    def __init__(self, speech: SpeechService, engine: Engine) -> None:
        self.speech = speech
        self.registry = CollectorRegistry()
        self.ttfa = Histogram("voicebot_ttfa_seconds", "Request to first audio frame played",
                              buckets=TTFA_BUCKETS, registry=self.registry)
        self.utterances = Counter("voicebot_utterances", "Finished utterances", ["outcome", "kind"],
                                  registry=self.registry)
        self.registry.register(_LiveCollector(speech, engine))

    def observe(self, _guild_id: int, utt: Utterance, outcome: Outcome) -> None:
        """A speech listener: count the utterance and record its TTFA."""
        self.utterances.labels(outcome.value, utt.request.kind).inc()
        if utt.ttfa is not None:
            self.ttfa.observe(utt.ttfa)

    def render(self) -> bytes:
        return generate_latest(self.registry)
