"""Fault injection: config validation, rates, call-by-call reproducibility, corruption, latency."""

from __future__ import annotations

import time
from typing import Any

import pytest

from star_lib.travel.faults import FaultConfig, FaultInjector
from star_lib.travel.tools import ToolRegistry
from star_lib.travel.world import World
from star_lib.types import Observation, Tools


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    return ToolRegistry(World.synthetic(seed=0, scale="tiny"))


@pytest.fixture(scope="module")
def calls(registry: ToolRegistry) -> list[tuple[str, dict[str, str]]]:
    world = registry.world
    (origin, dest), dates = next(iter(world.flight_routes().items()))
    base = [
        ("SearchFlight", {"departure": origin, "destination": dest, "date": dates[0]}),
        ("GoogleDistanceMatrix", {"departure": origin, "destination": dest, "mode": "taxi"}),
        ("SearchAccommodation", {"city": world.cities[0]}),
        ("SearchRestaurant", {"city": world.cities[1]}),
        ("SearchAttraction", {"city": world.cities[2]}),
        ("SearchCity", {"state": world.states[0]}),
    ]
    return [base[i % len(base)] for i in range(10_000)]


def _run(injector: FaultInjector, calls) -> list[Observation]:
    return [injector.call(name, args) for name, args in calls]


class EchoTools:
    """A minimal Tools implementation: the wrapper must not depend on ToolRegistry."""

    def schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "Echo", "parameters": {"type": "object"}}}]

    def call(self, name: str, arguments: Any) -> Observation:
        if name != "Echo":
            return Observation(text=f"Error: unknown tool {name!r}.", ok=False, error="unknown_tool")
        return Observation(text=f"echo: {arguments!r} " * 5)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"failure_rate": -0.1}, "failure_rate"),
        ({"failure_rate": 1.5}, "failure_rate"),
        ({"failure_rate": float("nan")}, "failure_rate"),
        ({"failure_rate": True}, "failure_rate"),
        ({"corruption_rate": 2}, "corruption_rate"),
        ({"corruption_rate": "0.1"}, "corruption_rate"),
        ({"latency_ms": -1.0}, "latency_ms"),
        ({"latency_ms": float("nan")}, "latency_ms"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_faults_config_rejects_bad_values(kwargs, field) -> None:
    with pytest.raises(ValueError, match=f"FaultConfig.{field}"):
        FaultConfig(**kwargs)


def test_faults_config_accepts_edges() -> None:
    assert FaultConfig(failure_rate=0, corruption_rate=1.0, latency_ms=0).corruption_rate == 1.0


def test_faults_failure_rate_is_observed_within_one_point(registry, calls) -> None:
    injector = FaultInjector(registry, FaultConfig(failure_rate=0.1, seed=7))
    observations = _run(injector, calls)
    failures = [o for o in observations if o.fault == "failure"]
    assert abs(len(failures) / len(calls) - 0.1) <= 0.01
    assert injector.counters["calls"] == 10_000 and injector.counters["failures"] == len(failures)
    for obs in failures:
        assert not obs.ok and obs.error == "service_failure" and "Please retry." in obs.text
    assert any("HTTP 503" in o.text and "SearchFlight" in o.text for o in failures)


def test_faults_same_seed_same_sequence(registry, calls) -> None:
    config = FaultConfig(failure_rate=0.2, corruption_rate=0.2, seed=11, latency_ms=1.0, sleep=False)
    first = _run(FaultInjector(registry, config), calls[:2000])
    second = _run(FaultInjector(registry, config), calls[:2000])
    assert first == second
    other = _run(
        FaultInjector(registry, FaultConfig(failure_rate=0.2, corruption_rate=0.2, seed=12)), calls[:2000]
    )
    assert [o.fault for o in other] != [o.fault for o in first]


def test_faults_reset_replays_the_sequence(registry, calls) -> None:
    injector = FaultInjector(registry, FaultConfig(failure_rate=0.3, corruption_rate=0.3, seed=5))
    first = _run(injector, calls[:500])
    injector.reset()
    assert injector.counters["calls"] == 0
    assert _run(injector, calls[:500]) == first
    injector.reset(seed=6)
    assert _run(injector, calls[:500]) != first


def test_faults_rate_zero_never_fails(registry, calls) -> None:
    injector = FaultInjector(registry, FaultConfig())
    observations = _run(injector, calls)
    assert all(o.fault is None for o in observations)
    assert observations[:6] == [registry.call(n, a) for n, a in calls[:6]]
    assert injector.counters == {"calls": 10_000, "failures": 0, "corruptions": 0, "latency_ms": 0.0}


def test_faults_corruption_truncates_or_garbles(registry, calls) -> None:
    injector = FaultInjector(registry, FaultConfig(corruption_rate=1.0, seed=3))
    kinds = set()
    for name, args in calls[:300]:
        clean = registry.call(name, args)
        obs = injector.call(name, args)
        assert obs.fault == "corruption" and obs.text != clean.text and obs.ok == clean.ok
        kinds.add("truncated" if clean.text.startswith(obs.text) else "garbled")
        if kinds == {"truncated", "garbled"}:
            break
    assert kinds == {"truncated", "garbled"}
    assert injector.counters["corruptions"] == injector.counters["calls"]


def test_faults_unknown_tool_passes_through(registry) -> None:
    injector = FaultInjector(registry, FaultConfig(failure_rate=1.0, corruption_rate=1.0))
    obs = injector.call("NoSuchTool", {})
    assert obs.error == "unknown_tool" and obs.fault is None
    assert injector.counters["failures"] == 0 and injector.counters["calls"] == 1


def test_faults_latency_sleeps_or_is_only_counted(registry, calls) -> None:
    sleeping = FaultInjector(registry, FaultConfig(latency_ms=3.0, seed=1))
    start = time.perf_counter()
    _run(sleeping, calls[:30])
    waited = time.perf_counter() - start
    assert sleeping.counters["latency_ms"] > 0 and waited >= 0.9 * sleeping.counters["latency_ms"] / 1000
    counted = FaultInjector(registry, FaultConfig(latency_ms=1000.0, seed=1, sleep=False))
    start = time.perf_counter()
    _run(counted, calls[:30])
    assert time.perf_counter() - start < 1.0 and counted.counters["latency_ms"] > 1000.0


def test_faults_wraps_any_tools_without_forwarding() -> None:
    inner = EchoTools()
    injector = FaultInjector(inner, FaultConfig(failure_rate=0.5, seed=2))
    assert isinstance(injector, Tools) and injector.inner is inner
    assert injector.schemas() == inner.schemas()
    assert not hasattr(injector, "world")  # no attribute forwarding to the inner object
    faults = [injector.call("Echo", {"x": i}).fault for i in range(200)]
    assert 50 < faults.count("failure") < 150
    counters = injector.counters
    counters["calls"] = -1  # a copy: the injector's own counters are unaffected
    assert injector.counters["calls"] == 200
