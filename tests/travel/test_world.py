"""World on the real TravelPlanner tables: loading, official cleaning, lookups vs the reference info."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from star_lib.travel.world import FILE_NAMES, World, WorldLoadError, parse_km
from star_lib.types import Flight


@pytest.fixture(scope="module")
def world(real_db_dir: Path) -> World:
    return World.from_csv_dir(real_db_dir)


@pytest.fixture(scope="module")
def reference(tp_dir: Path) -> list[dict]:
    path = tp_dir / "reference" / "train_ref_info.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _reference_items(reference: list[dict], prefix: str) -> dict[str, object]:
    return {k: v for row in reference for k, v in row.items() if k.startswith(prefix)}


def test_world_loads_real_tables_with_official_dropna(world: World, real_db_dir: Path) -> None:
    summary = world.summary()
    raw = {
        t: pl.read_csv(real_db_dir / FILE_NAMES[t][0], infer_schema=False)
        for t in FILE_NAMES
        if t != "cities"
    }
    assert summary["flights"] == raw["flights"].drop_nulls().height
    # official: pd.read_csv(...).dropna() — accommodations with empty house rules disappear
    assert (
        summary["accommodations"] == raw["accommodations"].drop_nulls().height < raw["accommodations"].height
    )
    assert summary["restaurants"] == raw["restaurants"].drop_nulls().height
    assert summary["attractions"] == raw["attractions"].drop_nulls().height
    assert summary["distances"] == raw["distance"].select("origin", "destination").unique().height
    city_lines = (real_db_dir / "citySet_with_states.txt").read_text().strip().splitlines()
    assert summary["cities"] == len(city_lines)
    assert summary["date_range"][0] <= "2022-03-16" <= summary["date_range"][1]


def test_world_flight_f3573659_on_st_petersburg_rockford(world: World) -> None:
    flights = world.flights("St. Petersburg", "Rockford", "2022-03-16")
    assert "F3573659" in [f.number for f in flights]
    flight = world.flight("F3573659")
    assert flight is not None and (flight.origin, flight.dest, flight.date) == (
        "St. Petersburg",
        "Rockford",
        "2022-03-16",
    )
    assert world.flight("F0000000") is None and world.flight("not a number") is None
    assert "2022-03-16" in world.flight_routes()[("St. Petersburg", "Rockford")]


def test_world_flight_records_are_the_flights_as_tuples(world: World) -> None:
    for (origin, dest), dates in list(world.flight_routes().items())[:50]:
        flights = world.flights(origin, dest, dates[-1])
        assert tuple(Flight(*r) for r in world.flight_records(origin, dest, dates[-1])) == flights
    assert world.flight_records("Rockford", "Nowhere", "2022-03-16") == []


def test_world_flights_match_reference_info(world: World, reference: list[dict]) -> None:
    items = _reference_items(reference, "Flight from ")
    assert len(items) > 20
    for key, value in items.items():
        origin, dest, date = re.fullmatch(r"Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})", key).groups()
        expected = {r["Flight Number"]: r for r in value} if isinstance(value, list) else {}
        ours = {
            f.number: f for f in world.flights(origin, dest, date)
        }  # the shared slice is not in file order
        assert sorted(ours) == sorted(expected), key
        for number, row in expected.items():
            f = ours[number]
            assert (f.price, f.dep_time, f.arr_time, f.elapsed, f.distance) == (
                row["Price"],
                row["DepTime"],
                row["ArrTime"],
                row["ActualElapsedTime"],
                row["Distance"],
            )


@pytest.mark.parametrize(
    ("prefix", "lookup", "field", "ref_field"),
    [
        ("Accommodations in ", World.accommodations, "name", "NAME"),
        ("Restaurants in ", World.restaurants, "name", "Name"),
        ("Attractions in ", World.attractions, "name", "Name"),
    ],
)
def test_world_city_tables_match_reference_info(world, reference, prefix, lookup, field, ref_field) -> None:
    items = _reference_items(reference, prefix)
    assert len(items) >= 20  # many cities, Rockford among them
    assert f"{prefix}Rockford" in items
    for key, rows in items.items():
        city = key[len(prefix) :]
        assert [getattr(r, field) for r in lookup(world, city)] == [r[ref_field] for r in rows], key


def test_world_accommodation_fields_match_reference(world: World, reference: list[dict]) -> None:
    rows = _reference_items(reference, "Accommodations in ")["Accommodations in Rockford"]
    ours = world.accommodations("Rockford")
    for acc, row in zip(ours, rows, strict=True):
        assert acc.price == row["price"] and acc.room_type == row["room type"]
        assert acc.house_rules == row["house_rules"] and acc.minimum_nights == row["minimum nights"]
        assert (
            acc.maximum_occupancy == row["maximum occupancy"] and acc.review_rate == row["review rate number"]
        )


def test_world_distances_match_reference_numbers(world: World, reference: list[dict]) -> None:
    items = {**_reference_items(reference, "Self-driving from "), **_reference_items(reference, "Taxi from ")}
    valid = invalid = 0
    for key, text in items.items():
        mode, origin, dest = re.fullmatch(r"(Self-driving|Taxi) from (.+) to (.+)", key).groups()
        row = world.distance(origin, dest)
        if "no valid information" in text.lower():
            invalid += 1
            assert row is None or not row.valid, key
            continue
        valid += 1
        duration, distance, cost = re.search(r"duration: (.+), distance: (.+), cost: (\d+)", text).groups()
        assert (row.duration, row.distance) == (duration, distance), key
        assert row.cost("taxi" if mode == "Taxi" else "driving") == int(cost), key
    assert valid > 10 and invalid > 2


def test_world_distance_day_route_is_invalid(world: World) -> None:
    day = world.distance("Hartford", "Denver")
    assert day is not None and not day.valid and day.cost("driving") is None
    assert world.distance("St. Petersburg", "Rockford") is None  # empty duration/distance in the table
    assert world.distance("Nowhere", "Rockford") is None


def test_world_cities_and_states(world: World) -> None:
    assert world.state_of("Rockford") == "Illinois"
    assert "Rockford" in world.cities_in("Illinois")
    assert world.cities_in("Atlantis") == () and world.state_of("Atlantis") is None
    assert len(world.states) == len(set(world.states))
    assert all(world.state_of(c) for c in world.cities)


def test_world_parse_km_forms() -> None:
    assert parse_km("1,433 km") == 1433.0
    assert parse_km("317 km") == 317.0
    assert parse_km("12.5 km") == 12.5
    with pytest.raises(ValueError, match="1,433 km"):
        parse_km("far away")


def _nested_copy(src: Path, dst: Path) -> None:
    for flat, nested in FILE_NAMES.values():
        target = dst / nested
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(src / flat)


def test_world_loads_official_nested_layout(world: World, real_db_dir: Path, tmp_path: Path) -> None:
    _nested_copy(real_db_dir, tmp_path)
    nested = World.from_csv_dir(tmp_path)
    assert {k: v for k, v in nested.summary().items() if k != "source"} == {
        k: v for k, v in world.summary().items() if k != "source"
    }
    assert nested.flights("St. Petersburg", "Rockford", "2022-03-16") == world.flights(
        "St. Petersburg", "Rockford", "2022-03-16"
    )


def test_world_round_trips_real_tables(world: World, tmp_path: Path) -> None:
    world.to_csv_dir(tmp_path)
    again = World.from_csv_dir(tmp_path)
    for city in ("Rockford", "St. Petersburg", "Houston"):
        assert again.accommodations(city) == world.accommodations(city)
        assert again.restaurants(city) == world.restaurants(city)
        assert again.attractions(city) == world.attractions(city)
    assert again.distance("Kansas City", "Pensacola") == world.distance("Kansas City", "Pensacola")
    assert again.flight_routes() == world.flight_routes()


# ── malformed inputs ──


def _tiny_dir(tmp_path: Path) -> Path:
    root = tmp_path / "db"
    World.synthetic(seed=0, scale="tiny").to_csv_dir(root)
    return root


def _rewrite_line(path: Path, line_no: int, edit) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line_no - 1] = edit(lines[line_no - 1])
    path.write_text("".join(lines))


def test_world_bad_number_names_path_and_line(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    path = root / "clean_accommodations_2022.csv"
    header = path.read_text().splitlines()[0].split(",")
    price_at = header.index("price")

    def corrupt(line: str) -> str:
        fields = next(iter(__import__("csv").reader([line])))
        fields[price_at] = "cheap"
        return ",".join(f'"{f}"' for f in fields) + "\n"

    _rewrite_line(path, 4, corrupt)
    with pytest.raises(WorldLoadError, match=r"clean_accommodations_2022\.csv: line 4: column 'price'"):
        World.from_csv_dir(root)


def test_world_bad_flight_price_names_line(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    path = root / "clean_Flights_2022.csv"
    _rewrite_line(path, 3, lambda line: line.replace(",", ",??", 1))
    with pytest.raises(WorldLoadError, match=r"clean_Flights_2022\.csv: line 3: column 'Price'"):
        World.from_csv_dir(root)


def test_world_ragged_csv_names_path_and_line(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    path = root / "attractions.csv"
    _rewrite_line(path, 5, lambda line: line.rstrip("\n") + ",extra,fields\n")
    with pytest.raises(WorldLoadError, match=r"attractions\.csv: malformed CSV \(line 5"):
        World.from_csv_dir(root)


def test_world_bad_distance_names_line(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    path = root / "distance.csv"
    _rewrite_line(path, 2, lambda line: line.rsplit(",", 1)[0] + ",very far\n")
    with pytest.raises(WorldLoadError, match=r"distance\.csv: line 2: distance 'very far'"):
        World.from_csv_dir(root)


def test_world_missing_column_and_file(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    path = root / "clean_restaurant_2022.csv"
    path.write_text(path.read_text().replace("Cuisines", "Food", 1))
    with pytest.raises(
        WorldLoadError, match=r"clean_restaurant_2022\.csv: missing column\(s\) \['Cuisines'\]"
    ):
        World.from_csv_dir(root)
    path.write_text(path.read_text().replace("Food", "Cuisines", 1))
    (root / "distance.csv").unlink()
    with pytest.raises(FileNotFoundError, match="googleDistanceMatrix/distance.csv"):
        World.from_csv_dir(root)
    with pytest.raises(FileNotFoundError, match="not found"):
        World.from_csv_dir(tmp_path / "nowhere")


def test_world_bad_city_set_line(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    path = root / "citySet_with_states.txt"
    path.write_text(path.read_text() + "Lonely City without a state\n")
    with pytest.raises(
        WorldLoadError, match=r"citySet_with_states\.txt: line \d+: expected 'city<TAB>state'"
    ):
        World.from_csv_dir(root)


def test_world_tolerates_unnamed_index_column(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    base = World.from_csv_dir(root)
    path = root / "clean_restaurant_2022.csv"
    path.write_text("Unnamed: 0" + path.read_text())
    attractions = root / "attractions.csv"
    lines = attractions.read_text().splitlines()
    attractions.write_text(
        "\n".join(["," + lines[0]] + [f"{i},{line}" for i, line in enumerate(lines[1:])]) + "\n"
    )
    again = World.from_csv_dir(root)
    city = base.cities[0]
    assert again.restaurants(city) == base.restaurants(city)
    assert again.attractions(city) == base.attractions(city)


def test_world_load_spec_strings(tmp_path: Path) -> None:
    root = _tiny_dir(tmp_path)
    assert World.load(root).summary()["flights"] == World.load("synthetic:tiny:0").summary()["flights"]
    with pytest.raises(ValueError, match="synthetic:<tiny|small|full>:<seed>"):
        World.load("synthetic:tiny")
    shutil.rmtree(root)
