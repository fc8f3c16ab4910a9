"""Faults injected on demand: failing REST routes (429/500) and lossy or delayed UDP."""
from __future__ import annotations

import fnmatch
import json
import random
from dataclasses import dataclass
from typing import Optional, Pattern, Union


@dataclass
class RouteFault:
    method: str
    pattern: Union[str, Pattern]
    status: int
    times: int
    retry_after: float
    is_global: bool = False
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times <= 0 or (self.method != "*" and self.method.upper() != method.upper()):
            return False
        if isinstance(self.pattern, str):
            return fnmatch.fnmatchcase(path, self.pattern)
        return self.pattern.fullmatch(path) is not None

    def response(self) -> tuple[int, dict, bytes]:
        """(status, headers, body) of the failure, shaped so discord.py retries 429 and 5xx."""
        self.times -= 1
        self.hits += 1
        if self.status == 429:
            body = {"message": "You are being rate limited.", "retry_after": self.retry_after,
                    "global": self.is_global, "code": 0}
            headers = {"Via": "1.1 google", "Retry-After": str(max(1, int(self.retry_after + 0.999))),
                       "X-RateLimit-Scope": "global" if self.is_global else "user"}
            if self.is_global:
                headers["X-RateLimit-Global"] = "true"
        else:
            body = {"code": 0, "message": f"{self.status}: sandbox fault"}
            headers = {}
        headers["Content-Type"] = "application/json"
        return self.status, headers, json.dumps(body).encode()


class Faults:
    """The faults currently armed on a sandbox."""

    def __init__(self) -> None:
        self.routes: list[RouteFault] = []
        self.udp_drop = 0.0
        self.udp_delay_s = 0.0
        self.udp_rng = random.Random(0)
        self.udp_dropped = 0

    def fail_route(self, method: str, path_pattern: Union[str, Pattern], status: int = 500, times: int = 1,
                   retry_after: float = 0.1, is_global: bool = False) -> RouteFault:
        """Answer ``times`` matching REST calls with ``status``. The pattern is matched against the path
        after ``/api/v10`` (fnmatch, e.g. ``/channels/*/messages``, or a compiled regex)."""
        fault = RouteFault(method, path_pattern, status, times, retry_after, is_global)
        self.routes.append(fault)
        return fault

    def route_fault(self, method: str, path: str) -> Optional[RouteFault]:
        for fault in self.routes:
            if fault.matches(method, path):
                return fault
        return None

    def set_udp(self, drop: float = 0.0, delay_s: float = 0.0, seed: Optional[int] = None) -> None:
        self.udp_drop = drop
        self.udp_delay_s = delay_s
        if seed is not None:
            self.udp_rng = random.Random(seed)

    def udp_should_drop(self) -> bool:
        if self.udp_drop > 0 and self.udp_rng.random() < self.udp_drop:
            self.udp_dropped += 1
            return True
        return False

