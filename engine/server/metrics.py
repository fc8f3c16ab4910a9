"""The engine server's Prometheus metrics: its own counters and the engine's stats, in a per-app registry."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from engine.base import Engine


class ServerMetrics:
    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("engine_server_requests", "HTTP requests by route and status",
                                ("route", "status"), registry=self.registry)
        self.errors = Counter("engine_server_errors", "Failed requests by error code", ("code",),
                              registry=self.registry)
        self.ttfa = Histogram("engine_server_ttfa_seconds", "Request start to first audio byte written",
                              buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0),
                              registry=self.registry)
        self.active = Gauge("engine_server_active_streams", "Speech responses being streamed", registry=self.registry)
        self.audio = Counter("engine_server_audio_seconds", "Audio seconds sent", registry=self.registry)
        self.registry.register(EngineCollector(engine))


class EngineCollector:
    """The engine's running totals and its scheduler's state (Engine.stats()), read at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Any:
        totals = asdict(self.engine.stats())
        running, waiting = totals.pop("running"), totals.pop("waiting")
        totals.pop("sessions")  # for soaks, in /v1/status
        by_load = totals.pop("by_load")
        for name, value in totals.items():
            yield GaugeMetricFamily(f"engine_{name}", f"Engine counter {name}", value=float(value))
        for i, name in enumerate(("audio_seconds", "synthesis_seconds")):
            family = GaugeMetricFamily(f"engine_{name}_by_load", f"Engine counter {name} by slots busy",
                                       labels=["busy"])
            for busy, totals_there in sorted(by_load.items()):
                family.add_metric([str(busy)], float(totals_there[i]))
            yield family
        yield GaugeMetricFamily("engine_scheduler_running", "Segments synthesizing now", value=running)
        yield GaugeMetricFamily("engine_scheduler_waiting", "Segments waiting for a slot", value=waiting)
