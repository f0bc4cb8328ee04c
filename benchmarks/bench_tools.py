"""Per-call latency of the six TravelPlanner tools on a synthetic world, against a full-table-scan baseline.

What is measured (one process, after the world is on disk):

1. ``load_s`` — ``World.from_csv_dir`` on the world's official CSVs (``full``: ≈3.8 M flights).
2. Every tool call of a seeded workload (``--calls`` per tool, arguments drawn from the world: 80 %
   existing flight route-days, 20 % random ones; random city pairs, cities, states) through
   ``ToolRegistry.call`` — argument checks, the hash lookup and the rendered observation text —
   timed one by one. ``median_us`` / ``p99_us`` are over all tools' calls together.
3. ``peak_rss_mb`` — the process's peak RSS at that point (world loaded, calls served).
4. The baseline, as the official sandbox does it: the same tables in polars frames, and per call a
   boolean-mask filter over the whole table (flights by origin & destination & date, distance by
   origin & destination, hotels/restaurants/attractions by city, the city set by state); it only
   filters, it renders no text, so it is a lower bound. The first ``--baseline-calls`` calls of each
   tool are repeated through it. ``speedup_vs_scan`` = baseline time / indexed time over exactly those
   calls (the throughput ratio of the mixed workload); per-tool median ratios are printed too.

The world is generated once (``star world synth`` in a subprocess, so generation memory does not
count) and cached under ``data/worlds/<scale>-<seed>`` (git-ignored), keyed by a hash of the
generator's source.

Usage: ``python benchmarks/bench_tools.py [--scale full|small|tiny] [--seed 0] [--calls 20000]``.
Last line: ``{"median_us": …, "p99_us": …, "speedup_vs_scan": …, "load_s": …, "peak_rss_mb": …}``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from star_lib.travel.tools import TOOL_NAMES, ToolRegistry  # noqa: E402
from star_lib.travel.world import FILE_NAMES, World  # noqa: E402

Call = tuple[str, dict[str, str]]


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generator_stamp() -> str:
    """Hash of the generator's source: a cached world is reused only if the generator is unchanged."""
    digest = hashlib.sha256()
    for name in ("synthetic.py", "names.py", "world.py"):
        digest.update((REPO / "star_lib" / "travel" / name).read_bytes())
    return digest.hexdigest()[:16]


def ensure_world(scale: str, seed: int, cache: Path) -> Path:
    """Generate the world's CSVs in a subprocess unless an up-to-date copy is cached."""
    folder = cache / f"{scale}-{seed}"
    stamp = folder / ".generator"
    if stamp.is_file() and stamp.read_text() == generator_stamp():
        return folder
    print(f"generating synthetic:{scale}:{seed} into {folder} …", flush=True)
    start = time.perf_counter()
    star = "import sys; from star_lib.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", star, "world", "synth", "--scale", scale, "--seed", str(seed)]
    subprocess.run([*command, "--out", str(folder)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    stamp.write_text(generator_stamp())
    print(f"generated in {time.perf_counter() - start:.1f} s", flush=True)
    return folder


def workload(world: World, per_tool: int, seed: int) -> dict[str, list[Call]]:
    """Seeded, realistic arguments for every tool."""
    rng = np.random.default_rng(seed)
    cities, states, dates = world.cities, world.states, world.dates
    routes = list(world.flight_routes().items())
    calls: dict[str, list[Call]] = {name: [] for name in TOOL_NAMES}
    for _ in range(per_tool):
        if rng.random() < 0.8:
            (origin, dest), route_dates = routes[rng.integers(len(routes))]
            date = route_dates[rng.integers(len(route_dates))]
        else:
            origin, dest = (cities[i] for i in rng.choice(len(cities), 2, replace=False))
            date = dates[rng.integers(len(dates))]
        calls["SearchFlight"].append(
            ("SearchFlight", {"departure": origin, "destination": dest, "date": date})
        )
        a, b = (cities[i] for i in rng.choice(len(cities), 2, replace=False))
        mode = ("driving", "taxi")[int(rng.integers(2))]
        calls["GoogleDistanceMatrix"].append(
            ("GoogleDistanceMatrix", {"departure": a, "destination": b, "mode": mode})
        )
        for tool in ("SearchAccommodation", "SearchRestaurant", "SearchAttraction"):
            calls[tool].append((tool, {"city": cities[rng.integers(len(cities))]}))
        calls["SearchCity"].append(("SearchCity", {"state": states[rng.integers(len(states))]}))
    return calls


def time_calls(fn: Any, calls: list[Call]) -> np.ndarray:
    """Seconds per call, each call timed on its own."""
    out = np.empty(len(calls))
    clock = time.perf_counter_ns
    for i, (name, args) in enumerate(calls):
        start = clock()
        fn(name, args)
        out[i] = clock() - start
    return out / 1e9


class ScanBaseline:
    """The official sandbox's access pattern: boolean masks over whole frames, one call at a time.

    ``pandas`` (default) mirrors the official tools line by line: ``pd.read_csv`` with default dtypes,
    flights filtered by origin over the whole table, then by destination and date on what is left;
    distance by a combined origin & destination mask; hotels/restaurants/attractions by city. The
    official ``SearchCity`` is a dict, so the baseline uses one too. ``polars`` applies the same masks
    to polars frames (multi-threaded, so a stronger baseline).
    """

    def __init__(self, folder: Path, kind: str) -> None:
        """Read the tables with the chosen library."""
        self.kind = kind
        if kind == "pandas":
            import pandas as pd

            def read(table: str) -> Any:
                return (
                    pd.read_csv(folder / FILE_NAMES[table][0]).dropna()
                    if table != "distance"
                    else (pd.read_csv(folder / FILE_NAMES[table][0]))
                )
        else:

            def read(table: str) -> Any:
                return pl.read_csv(folder / FILE_NAMES[table][0], infer_schema_length=10_000)

        self.flights = read("flights")
        self.accommodations = read("accommodations")
        self.restaurants = read("restaurants")
        self.attractions = read("attractions")
        self.distance = read("distance")
        self.cities: dict[str, list[str]] = {}
        for line in (folder / FILE_NAMES["cities"][0]).read_text().splitlines():
            if line.strip():
                city, state = line.split("\t")
                self.cities.setdefault(state, []).append(city)

    def call(self, name: str, args: dict[str, str]) -> int:
        """Filter the whole table; return the number of matching rows."""
        if name == "SearchCity":
            return len(self.cities.get(args["state"], ()))
        if self.kind == "pandas":
            return self._pandas(name, args)
        col = pl.col
        if name == "SearchFlight":
            mask = (
                (col("OriginCityName") == args["departure"])
                & (col("DestCityName") == args["destination"])
                & (col("FlightDate") == args["date"])
            )
            return self.flights.filter(mask).height
        if name == "GoogleDistanceMatrix":
            mask = (col("origin") == args["departure"]) & (col("destination") == args["destination"])
            return self.distance.filter(mask).height
        table, column = self._city_table(name)
        return table.filter(col(column) == args["city"]).height

    def _pandas(self, name: str, args: dict[str, str]) -> int:
        if name == "SearchFlight":
            found = self.flights[self.flights["OriginCityName"] == args["departure"]]
            found = found[found["DestCityName"] == args["destination"]]
            return len(found[found["FlightDate"] == args["date"]])
        if name == "GoogleDistanceMatrix":
            d = self.distance
            return len(d[(d["origin"] == args["departure"]) & (d["destination"] == args["destination"])])
        table, column = self._city_table(name)
        return len(table[table[column] == args["city"]])

    def _city_table(self, name: str) -> tuple[Any, str]:
        return {
            "SearchAccommodation": (self.accommodations, "city"),
            "SearchRestaurant": (self.restaurants, "City"),
            "SearchAttraction": (self.attractions, "City"),
        }[name]


def check_baseline(world: World, baseline: ScanBaseline, calls: dict[str, list[Call]], k: int) -> None:
    """Make sure the baseline finds the same rows as the index (else the comparison means nothing)."""
    expected = {
        "SearchFlight": lambda a: len(world.flights(a["departure"], a["destination"], a["date"])),
        "SearchAccommodation": lambda a: len(world.accommodations(a["city"])),
        "SearchRestaurant": lambda a: len(world.restaurants(a["city"])),
        "SearchAttraction": lambda a: len(world.attractions(a["city"])),
        "SearchCity": lambda a: len(world.cities_in(a["state"])),
    }
    for name, count in expected.items():
        for _, args in calls[name][:k]:
            if baseline.call(name, args) != count(args):
                raise SystemExit(f"baseline disagrees with the index on {name} {args}")


def main() -> None:
    """Run the benchmark and print per-tool tables, then the JSON summary line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("tiny", "small", "full"), default="full")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calls", type=int, default=20_000, help="indexed calls per tool")
    parser.add_argument("--baseline-calls", type=int, default=200, help="calls per tool through the baseline")
    parser.add_argument("--cache", type=Path, default=REPO / "data" / "worlds")
    parser.add_argument("--baseline", choices=("pandas", "polars"), default="pandas", help="scan library")
    args = parser.parse_args()

    folder = ensure_world(args.scale, args.seed, args.cache)
    gc.collect()
    start = time.perf_counter()
    world = World.from_csv_dir(folder)
    load_s = time.perf_counter() - start
    print(f"loaded {world!r} in {load_s:.2f} s (peak RSS {peak_rss_mb():.0f} MiB)")

    tools = ToolRegistry(world)
    calls = workload(world, args.calls, args.seed)
    indexed = {name: time_calls(tools.call, calls[name]) for name in TOOL_NAMES}
    rss = peak_rss_mb()
    every = np.concatenate(list(indexed.values())) * 1e6

    start = time.perf_counter()
    baseline = ScanBaseline(folder, args.baseline)
    print(f"{args.baseline} baseline frames read in {time.perf_counter() - start:.1f} s")
    k = min(args.baseline_calls, args.calls)
    scanned = {name: time_calls(baseline.call, calls[name][:k]) for name in TOOL_NAMES}
    check_baseline(world, baseline, calls, k)

    print(f"\n{'tool':<22}{'median µs':>11}{'p99 µs':>10}{'scan median µs':>17}{'speedup (median)':>18}")
    for name in TOOL_NAMES:
        ours, scan = indexed[name] * 1e6, scanned[name] * 1e6
        ratio = np.median(scan) / np.median(ours)
        print(
            f"{name:<22}{np.median(ours):>11.2f}{np.percentile(ours, 99):>10.2f}"
            f"{np.median(scan):>17.1f}{ratio:>17.{0 if ratio >= 10 else 1}f}×"
        )
    same_calls = sum(float(indexed[n][:k].sum()) for n in TOOL_NAMES)
    speedup = sum(float(scanned[n].sum()) for n in TOOL_NAMES) / same_calls
    print(
        f"\nall tools: {len(every):,} calls, median {np.median(every):.2f} µs, "
        f"p99 {np.percentile(every, 99):.2f} µs; "
        f"{args.baseline} scan baseline {speedup:.0f}× slower on the same {k * len(TOOL_NAMES):,} calls; "
        f"peak RSS {rss:.0f} MiB (with the baseline's frames: {peak_rss_mb():.0f} MiB)"
    )
    print(
        json.dumps(
            {
                "median_us": round(float(np.median(every)), 3),
                "p99_us": round(float(np.percentile(every, 99)), 3),
                "speedup_vs_scan": round(speedup, 1),
                "load_s": round(load_s, 3),
                "peak_rss_mb": round(rss, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
