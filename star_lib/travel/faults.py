"""Fault injection around any :class:`~star_lib.types.Tools`: the paper's environment-stability axis.

``FaultInjector(inner, FaultConfig(failure_rate=0.1, seed=0))`` behaves like ``inner`` except that,
per call, it may return a realistic service error instead of calling the tool (``failure``), damage
the text of the tool's answer (``corruption``: truncation or garbling), and wait (``latency``).

Every call draws the same fixed number of values from one seeded :class:`numpy.random.Generator`,
whatever happens, so the fault sequence is a function of the call index alone: the same seed gives
the same faults call by call. Calls to a tool the inner object does not list (the inner's own
unknown-tool error) are passed through unharmed but still consume their draws. The inner object is
reached explicitly as ``.inner``; there is no attribute forwarding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from star_lib.types import Observation, Tools

__all__ = ["FaultConfig", "FaultInjector"]

_FAILURES: tuple[str, ...] = (
    "Error: {tool} service temporarily unavailable (HTTP 503). Please retry.",
    "Error: {tool} request timed out after 30 s (HTTP 504 Gateway Timeout). Please retry.",
    "Error: {tool} rate limit exceeded (HTTP 429 Too Many Requests). Please retry.",
    "Error: {tool} internal server error (HTTP 500). Please retry.",
    "Error: connection to the {tool} service was reset. Please retry.",
)
_GARBLE = np.array(list("#@%&*?~^$!0123456789abcdefghijklmnopqrstuvwxyz"))
_DRAWS_PER_CALL = 6  # fail, corrupt, message/kind, position, span, latency jitter


@dataclass(frozen=True)
class FaultConfig:
    """How often and how badly the tool service misbehaves (paper: stable ≤ 5 %, clear drop at 10 %)."""

    failure_rate: float = 0.0
    """Probability that a call returns a service error instead of a result."""
    latency_ms: float = 0.0
    """Mean added latency per call in milliseconds (exponentially distributed around it)."""
    corruption_rate: float = 0.0
    """Probability that a successful result comes back truncated or garbled."""
    seed: int = 0
    """Seed of the generator all fault draws come from."""
    sleep: bool = True
    """Actually sleep the latency; False only records it in the counters (fast simulations)."""

    def __post_init__(self) -> None:
        """Check ranges, saying what to change."""
        for name in ("failure_rate", "corruption_rate"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
                raise ValueError(f"FaultConfig.{name} must be a probability in [0, 1], got {value!r}")
        if not isinstance(self.latency_ms, (int, float)) or isinstance(self.latency_ms, bool):
            raise ValueError(
                f"FaultConfig.latency_ms must be a number of milliseconds, got {self.latency_ms!r}"
            )
        if not self.latency_ms >= 0.0:
            raise ValueError(f"FaultConfig.latency_ms must be >= 0, got {self.latency_ms!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"FaultConfig.seed must be an int, got {self.seed!r}")


class FaultInjector:
    """A :class:`~star_lib.types.Tools` wrapper that injects seeded failures, corruption and latency."""

    def __init__(self, inner: Tools, config: FaultConfig | None = None) -> None:
        """Wrap ``inner``; faults follow ``config`` (no faults by default)."""
        self.inner = inner
        self.config = config or FaultConfig()
        self._tools = frozenset(s.get("function", {}).get("name") for s in inner.schemas())
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Restart the fault sequence (from ``seed``, else the config's seed) and zero the counters."""
        self._rng = np.random.default_rng(self.config.seed if seed is None else seed)
        self._counters = {"calls": 0, "failures": 0, "corruptions": 0, "latency_ms": 0.0}

    @property
    def counters(self) -> dict[str, float]:
        """Calls seen, failures and corruptions injected, total latency added (a copy)."""
        return dict(self._counters)

    def schemas(self) -> list[dict[str, Any]]:
        """Return the inner tools' schemas (faults do not change the interface)."""
        return self.inner.schemas()

    def call(self, name: str, arguments: Any) -> Observation:
        """Run one call through the fault model; never raises."""
        u = self._rng.random(_DRAWS_PER_CALL)
        cfg = self.config
        self._counters["calls"] += 1
        if cfg.latency_ms > 0:
            delay = float(-np.log1p(-u[5]) * cfg.latency_ms)  # exponential with mean latency_ms
            self._counters["latency_ms"] += delay
            if cfg.sleep:
                time.sleep(delay / 1000.0)
        if not isinstance(name, str) or name not in self._tools:
            return self.inner.call(name, arguments)
        if u[0] < cfg.failure_rate:
            self._counters["failures"] += 1
            message = _FAILURES[int(u[2] * len(_FAILURES))].format(tool=name)
            return Observation(text=message, ok=False, error="service_failure", fault="failure")
        obs = self.inner.call(name, arguments)
        if u[1] < cfg.corruption_rate and obs.text:
            self._counters["corruptions"] += 1
            text = _truncate(obs.text, u[3]) if u[2] < 0.5 else _garble(obs.text, u[3], u[4])
            return Observation(text=text, ok=obs.ok, error=obs.error, fault="corruption")
        return obs


def _truncate(text: str, u: float) -> str:
    """Cut the text somewhere in its middle 20–90 %, as a dropped connection would."""
    keep = max(1, int(len(text) * (0.2 + 0.7 * u)))
    return text[:keep]


def _garble(text: str, u_pos: float, u_span: float) -> str:
    """Overwrite a span (5–25 % of the text, at least 3 characters) with noise, seeded by the draws."""
    span = min(len(text), max(3, int(len(text) * (0.05 + 0.2 * u_span))))
    start = int((len(text) - span) * u_pos)
    noise_rng = np.random.default_rng(int(u_pos * 2**31) ^ int(u_span * 2**31))
    noise = "".join(noise_rng.choice(_GARBLE, size=span).tolist())
    return text[:start] + noise + text[start + span :]
