"""The six tools: observations on the real tables, error sentences, schemas, and a 10k-call fuzz."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from star_lib.travel.faults import FaultConfig, FaultInjector
from star_lib.travel.tools import TOOL_NAMES, ToolRegistry
from star_lib.travel.world import World
from star_lib.types import Observation, Tools


@pytest.fixture(scope="module")
def real_tools(real_db_dir: Path) -> ToolRegistry:
    return ToolRegistry(World.from_csv_dir(real_db_dir))


@pytest.fixture(scope="module")
def tiny_tools() -> ToolRegistry:
    return ToolRegistry(World.synthetic(seed=3, scale="tiny"))


@pytest.fixture(scope="module")
def reference(tp_dir: Path) -> dict[str, object]:
    path = tp_dir / "reference" / "train_ref_info.jsonl"
    return {
        k: v for line in path.read_text().splitlines() if line.strip() for k, v in json.loads(line).items()
    }


def test_tools_search_flight_lists_f3573659(real_tools: ToolRegistry) -> None:
    args = {"departure": "St. Petersburg", "destination": "Rockford", "date": "2022-03-16"}
    obs = real_tools.call("SearchFlight", args)
    assert obs.ok and obs.error is None
    row = next(line for line in obs.text.splitlines() if line.startswith("F3573659"))
    assert [f.strip() for f in row.split("|")] == [
        "F3573659",
        "474",
        "15:40",
        "17:04",
        "2 hours 24 minutes",
        "1049",
    ]


def test_tools_city_observations_match_reference(
    real_tools: ToolRegistry, reference: dict[str, object]
) -> None:
    checked = 0
    for key, rows in reference.items():
        for prefix, tool, name_key in (
            ("Accommodations in ", "SearchAccommodation", "NAME"),
            ("Restaurants in ", "SearchRestaurant", "Name"),
            ("Attractions in ", "SearchAttraction", "Name"),
        ):
            if not key.startswith(prefix):
                continue
            obs = real_tools.call(tool, {"city": key[len(prefix) :]})
            n_fields = obs.text.splitlines()[1].count(" | ")  # names may hold " | "; split from the right
            names = [line.rsplit(" | ", n_fields)[0] for line in obs.text.splitlines()[2:]]
            expected = [re.sub(r"\r\n|[\r\n\t]", " ", r[name_key]) for r in rows]  # rows stay one line
            assert obs.ok and names == expected, key
            checked += 1
    assert checked >= 60


def test_tools_observation_fields_are_complete(
    real_tools: ToolRegistry, reference: dict[str, object]
) -> None:
    hotel = reference["Accommodations in Rockford"][0]
    line = real_tools.call("SearchAccommodation", {"city": "Rockford"}).text.splitlines()[2]
    assert line.split(" | ") == [
        hotel["NAME"],
        str(int(hotel["price"])),
        hotel["room type"],
        hotel["house_rules"],
        str(int(hotel["minimum nights"])),
        str(hotel["maximum occupancy"]),
        str(int(hotel["review rate number"])),
    ]
    food = reference["Restaurants in Rockford"][0]
    line = real_tools.call("SearchRestaurant", {"city": "Rockford"}).text.splitlines()[2]
    assert line.split(" | ") == [
        food["Name"],
        food["Cuisines"],
        str(food["Average Cost"]),
        str(food["Aggregate Rating"]),
    ]


def test_tools_distance_matches_reference_strings(
    real_tools: ToolRegistry, reference: dict[str, object]
) -> None:
    seen = {"valid": 0, "invalid": 0}
    for key, text in reference.items():
        match = re.fullmatch(r"(Self-driving|Taxi) from (.+) to (.+)", key)
        if not match:
            continue
        mode = "taxi" if match.group(1) == "Taxi" else "driving"
        obs = real_tools.call(
            "GoogleDistanceMatrix", {"departure": match.group(2), "destination": match.group(3), "mode": mode}
        )
        if "no valid information" in text.lower():
            seen["invalid"] += 1
            assert not obs.ok and obs.error == "no_result" and "no valid information" in obs.text
        else:
            seen["valid"] += 1
            assert obs.ok and obs.text == text, key  # same numbers, same wording
    assert seen["valid"] > 10 and seen["invalid"] > 2


def test_tools_self_driving_mode_alias(real_tools: ToolRegistry) -> None:
    base = {"departure": "Kansas City", "destination": "Pensacola"}
    driving = real_tools.call("GoogleDistanceMatrix", {**base, "mode": "driving"})
    alias = real_tools.call("GoogleDistanceMatrix", {**base, "mode": "self-driving"})
    assert driving == alias and driving.text.endswith("cost: 71")
    bad = real_tools.call("GoogleDistanceMatrix", {**base, "mode": "walking"})
    assert not bad.ok and bad.error == "bad_arguments" and "'driving' or 'taxi'" in bad.text


def _flight(departure: str, destination: str, date: str) -> dict[str, str]:
    return {"departure": departure, "destination": destination, "date": date}


@pytest.mark.parametrize(
    ("name", "arguments", "error", "needle"),
    [
        ("SearchHotel", {"city": "Rockford"}, "unknown_tool", "Available tools: SearchFlight"),
        (None, {"city": "Rockford"}, "unknown_tool", "unknown tool None"),
        ("SearchCity", ["Illinois"], "bad_arguments", "needs a JSON object"),
        ("SearchCity", None, "bad_arguments", "got NoneType"),
        ("SearchCity", "not json", "bad_arguments", "needs a JSON object"),
        ("SearchCity", {}, "bad_arguments", "missing argument(s) state"),
        ("SearchCity", {"state": "Illinois", "year": 2022}, "bad_arguments", "unexpected argument(s) 'year'"),
        ("SearchCity", {"state": ["Illinois"]}, "bad_arguments", "must be a string, got list"),
        ("SearchCity", {"state": "illinois"}, "bad_arguments", "Did you mean 'Illinois'?"),
        ("SearchAccommodation", {"city": "rockford"}, "bad_arguments", "Did you mean 'Rockford'?"),
        ("SearchAccommodation", {"city": "Atlantis"}, "bad_arguments", "unknown city 'Atlantis'"),
        ("SearchFlight", _flight("Rockford", "X", "2022-03-16"), "bad_arguments", "for destination"),
        ("SearchFlight", _flight("Rockford", "Houston", "16/03/2022"), "bad_arguments", "YYYY-MM-DD"),
        ("SearchFlight", _flight("Rockford", "Houston", "2022-02-30"), "bad_arguments", "invalid date"),
        ("SearchFlight", _flight("Rockford", "Houston", "2023-01-01"), "no_result", "Please rethink"),
    ],
)  # fmt: skip
def test_tools_errors_are_sentences(real_tools: ToolRegistry, name, arguments, error, needle) -> None:
    obs = real_tools.call(name, arguments)
    assert isinstance(obs, Observation) and not obs.ok and obs.error == error
    assert needle in obs.text and obs.text.endswith((".", "?"))


def test_tools_accept_json_string_arguments(real_tools: ToolRegistry) -> None:
    assert real_tools.call("SearchCity", '{"state": "Illinois"}') == real_tools.call(
        "SearchCity", {"state": "Illinois"}
    )


def test_tools_city_names_matched_exactly(real_tools: ToolRegistry) -> None:
    assert real_tools.call("SearchRestaurant", {"city": "St. Petersburg"}).ok
    assert not real_tools.call("SearchRestaurant", {"city": "St Petersburg"}).ok
    assert not real_tools.call("SearchRestaurant", {"city": " St. Petersburg"}).ok


def test_tools_no_result_asks_to_rethink(tiny_tools: ToolRegistry) -> None:
    world = tiny_tools.world
    pairs = [(a, b) for a in world.cities for b in world.cities if a != b]
    missing = next((a, b, d) for a, b in pairs for d in world.dates if not world.flights(a, b, d))
    obs = tiny_tools.call(
        "SearchFlight", dict(zip(("departure", "destination", "date"), missing, strict=True))
    )
    assert (
        not obs.ok and obs.error == "no_result" and "There is no flight" in obs.text and "rethink" in obs.text
    )


def test_tools_schemas_are_openai_functions(tiny_tools: ToolRegistry) -> None:
    schemas = tiny_tools.schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOL_NAMES)
    for schema in schemas:
        assert schema["type"] == "function"
        fn = schema["function"]
        assert fn["description"] and fn["parameters"]["type"] == "object"
        assert set(fn["parameters"]["required"]) == set(fn["parameters"]["properties"])
        for prop in fn["parameters"]["properties"].values():
            assert prop["type"] == "string" and prop["description"]
    flight = schemas[0]["function"]["parameters"]["required"]
    assert flight == ["departure", "destination", "date"]
    schemas[0]["function"]["name"] = "mutated"
    assert tiny_tools.schemas()[0]["function"]["name"] == "SearchFlight"
    assert isinstance(tiny_tools, Tools)


def test_tools_every_city_tool_answers_in_tiny_world(tiny_tools: ToolRegistry) -> None:
    world = tiny_tools.world
    for city in world.cities:
        for tool in ("SearchAccommodation", "SearchRestaurant", "SearchAttraction"):
            obs = tiny_tools.call(tool, {"city": city})
            assert obs.ok and city in obs.text.splitlines()[0]
    for state in world.states:
        obs = tiny_tools.call("SearchCity", {"state": state})
        assert obs.ok and all(c in obs.text for c in world.cities_in(state))
    (origin, dest), dates = next(iter(world.flight_routes().items()))
    obs = tiny_tools.call("SearchFlight", {"departure": origin, "destination": dest, "date": dates[0]})
    assert obs.ok and len(obs.text.splitlines()) == 2 + len(world.flights(origin, dest, dates[0]))


def test_tools_prerendered_and_lazy_observations_agree(tiny_tools: ToolRegistry) -> None:
    lazy = ToolRegistry(tiny_tools.world, prerender=False)
    for city in sorted(tiny_tools.world.known_cities):
        for tool in ("SearchAccommodation", "SearchRestaurant", "SearchAttraction"):
            assert lazy.call(tool, {"city": city}) == tiny_tools.call(tool, {"city": city})
    for state in tiny_tools.world.states:
        assert lazy.call("SearchCity", {"state": state}) == tiny_tools.call("SearchCity", {"state": state})


# ── fuzz: 200 examples × 50 calls = 10,000 random calls, no exception may escape ──

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
_ARG_KEYS = st.sampled_from(["departure", "destination", "date", "mode", "city", "state", "extra"]) | st.text(
    max_size=6
)
_ARG_VALUES = (
    st.sampled_from(
        ["Rockford", "St. Petersburg", "Texas", "taxi", "driving", "2022-03-16", "2022-13-40", ""]
    )
    | st.text(max_size=20)
    | _JSON
)
_CALL = st.tuples(
    st.sampled_from(TOOL_NAMES) | st.text(max_size=20) | _JSON,
    st.dictionaries(_ARG_KEYS, _ARG_VALUES, max_size=4) | _JSON | st.text(max_size=30),
)
_FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.fixture(scope="module")
def fuzz_targets(real_tools: ToolRegistry) -> list[Tools]:
    return [real_tools, FaultInjector(real_tools, FaultConfig(failure_rate=0.2, corruption_rate=0.2, seed=1))]


@_FUZZ
@given(calls=st.lists(_CALL, min_size=50, max_size=50))
def test_tools_fuzz_never_raises(fuzz_targets: list[Tools], calls) -> None:
    for target in fuzz_targets:
        for name, arguments in calls:
            obs = target.call(name, arguments)
            assert isinstance(obs, Observation) and isinstance(obs.text, str) and obs.text
            assert obs.ok == (obs.error is None)
