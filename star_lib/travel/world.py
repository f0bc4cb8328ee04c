"""The TravelPlanner sandbox database: load the official CSVs (or a synthetic world) and answer lookups.

Every lookup is a hash lookup. The small tables (accommodations, restaurants, attractions, distances,
the city set) are indexed by city / city pair as tuples of row dataclasses. Flights stay columnar
(the official table has ≈3.8 M rows, too many Python objects): one numpy structured array sorted by
(origin, destination, date) plus a dict from that key to a row range, so a search builds
:class:`~star_lib.types.Flight` objects only for the rows it returns.

The loader applies the official sandbox's cleaning (TravelPlanner ``tools/*/apis.py``): the flight,
accommodation, restaurant and attraction tables drop every row with a missing value in any column
(pandas ``read_csv(...).dropna()``, with pandas' default missing-value markers); the distance table is
not filtered, but a pair whose duration or distance is missing, or whose duration contains ``day``,
has no valid route, and the first row of a duplicated pair wins.

Example:
    >>> world = World.from_csv_dir("../shared/data/travelplanner/database")  # doctest: +SKIP
    >>> world.flights("St. Petersburg", "Rockford", "2022-03-16")[0].number  # doctest: +SKIP
    'F3573659'

"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from star_lib.types import Accommodation, Attraction, Distance, Flight, Restaurant

__all__ = [
    "FILE_NAMES",
    "FlightRecord",
    "FlightTable",
    "World",
    "WorldLoadError",
    "parse_km",
]


class WorldLoadError(ValueError):
    """A database file is missing a column, is malformed, or holds a value that does not parse."""


# ───────────────────────────── official schema ─────────────────────────────

FLIGHT_COLUMNS: tuple[str, ...] = (
    "Flight Number",
    "Price",
    "DepTime",
    "ArrTime",
    "ActualElapsedTime",
    "FlightDate",
    "OriginCityName",
    "DestCityName",
    "Distance",
)
_FLIGHT_CATEGORICAL: tuple[str, ...] = (
    "DepTime",
    "ArrTime",
    "ActualElapsedTime",
    "FlightDate",
    "OriginCityName",
    "DestCityName",
)
"""Low-cardinality flight columns, parsed as categoricals (few distinct strings, millions of rows)."""
ACCOMMODATION_COLUMNS: tuple[str, ...] = (
    "NAME",
    "room type",
    "price",
    "minimum nights",
    "review rate number",
    "house_rules",
    "maximum occupancy",
    "city",
)
RESTAURANT_COLUMNS: tuple[str, ...] = ("Name", "City", "Cuisines", "Average Cost", "Aggregate Rating")
ATTRACTION_COLUMNS: tuple[str, ...] = ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City")
DISTANCE_COLUMNS: tuple[str, ...] = ("origin", "destination", "cost", "duration", "distance")

COLUMNS: dict[str, tuple[str, ...]] = {
    "flights": FLIGHT_COLUMNS,
    "accommodations": ACCOMMODATION_COLUMNS,
    "restaurants": RESTAURANT_COLUMNS,
    "attractions": ATTRACTION_COLUMNS,
    "distance": DISTANCE_COLUMNS,
}
NUMERIC_COLUMNS: dict[str, tuple[str, ...]] = {
    "flights": ("Price", "Distance"),
    "accommodations": ("price", "minimum nights", "review rate number", "maximum occupancy"),
    "restaurants": ("Average Cost", "Aggregate Rating"),
    "attractions": ("Latitude", "Longitude"),
    "distance": (),
}
INDEXED_TABLES: tuple[str, ...] = ("accommodations", "restaurants")
"""Tables whose official file starts with an unnamed index column (written back the same way)."""

FILE_NAMES: dict[str, tuple[str, str]] = {
    "flights": ("clean_Flights_2022.csv", "flights/clean_Flights_2022.csv"),
    "accommodations": ("clean_accommodations_2022.csv", "accommodations/clean_accommodations_2022.csv"),
    "restaurants": ("clean_restaurant_2022.csv", "restaurants/clean_restaurant_2022.csv"),
    "attractions": ("attractions.csv", "attractions/attractions.csv"),
    "distance": ("distance.csv", "googleDistanceMatrix/distance.csv"),
    "cities": ("citySet_with_states.txt", "background/citySet_with_states.txt"),
}
"""Each table's file: (flat name, path in the official nested ``database/`` layout)."""

PANDAS_NA_VALUES: tuple[str, ...] = (
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)
"""pandas' default missing-value markers (the official loader reads with pandas); empty fields too."""

_KM_RE = re.compile(r"^\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*(km|m)\s*$")


def parse_km(text: str) -> float:
    """Kilometres in an official distance string.

    >>> parse_km("1,433 km")
    1433.0
    >>> parse_km("950 m")
    0.95

    Raises:
        ValueError: when the text is not ``"<number> km"`` or ``"<number> m"``.

    """
    match = _KM_RE.match(text)
    if match is None:
        raise ValueError(f"distance {text!r} is not of the form '1,433 km'")
    value = float(match.group(1).replace(",", ""))
    return value if match.group(2) == "km" else value / 1000.0


# ───────────────────────────── reading files ─────────────────────────────


def _find_file(root: Path, table: str) -> Path:
    """Return the file of ``table`` under ``root``, flat or nested layout."""
    for rel in FILE_NAMES[table]:
        if (root / rel).is_file():
            return root / rel
    flat, nested = FILE_NAMES[table]
    raise FileNotFoundError(f"{root}: no {table} table; expected {root / flat} or {root / nested}")


def _first_ragged_line(path: Path) -> str:
    """' (line N)' for the first CSV record whose field count differs from the header's, else ''."""
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            for record in reader:
                if len(record) != len(header):
                    return f" (line {reader.line_num}: {len(record)} fields, header has {len(header)})"
    except csv.Error as exc:
        return f" ({exc})"
    return ""


def _read_csv(path: Path, table: str, numeric_fast: dict[str, Any] | None = None) -> pl.DataFrame:
    """Read one official CSV with every column as text (plus optional typed columns), checked for columns.

    A leading unnamed index column (``""`` or ``"Unnamed: 0"``) is dropped.
    """
    try:
        frame = pl.read_csv(
            path,
            infer_schema=False,
            schema_overrides=numeric_fast,
            null_values=list(PANDAS_NA_VALUES),
            raise_if_empty=False,
        )
    except pl.exceptions.ComputeError as exc:
        if numeric_fast:
            raise  # the caller retries as text to locate the bad value
        raise WorldLoadError(f"{path}: malformed CSV{_first_ragged_line(path)}: {exc}") from exc
    except (OSError, UnicodeDecodeError, pl.exceptions.PolarsError) as exc:
        raise WorldLoadError(f"{path}: cannot read CSV: {exc}") from exc
    index_cols = [c for c in frame.columns if c == "" or c.startswith("Unnamed:")]
    frame = frame.drop(index_cols)
    missing = [c for c in COLUMNS[table] if c not in frame.columns]
    if missing:
        raise WorldLoadError(f"{path}: missing column(s) {missing}; found {frame.columns}")
    return frame


def _cast_numeric(frame: pl.DataFrame, path: Path, columns: Iterable[str]) -> pl.DataFrame:
    """Cast text columns to Int64 when every value is an integer literal, else Float64.

    Expects a ``_line`` column (1-based file line of each row) for error messages.

    Raises:
        WorldLoadError: naming the path, line, column and value that is not a number.

    """
    for name in columns:
        column = frame[name]
        if column.dtype.is_numeric():
            continue
        as_int = column.cast(pl.Int64, strict=False)
        if as_int.null_count() == column.null_count():
            frame = frame.with_columns(as_int)
            continue
        as_float = column.cast(pl.Float64, strict=False)
        bad = as_float.is_null() & column.is_not_null()
        if bad.any():
            row = int(bad.arg_true()[0])
            raise WorldLoadError(
                f"{path}: line {frame['_line'][row]}: column {name!r} holds {column[row]!r}, not a number"
            )
        frame = frame.with_columns(as_float)
    return frame


def _load_table(root: Path, table: str) -> pl.DataFrame:
    """Read, clean (official dropna) and type one table."""
    path = _find_file(root, table)
    frame = _read_csv(path, table).with_row_index("_line", offset=2)
    if table != "distance":
        frame = frame.drop_nulls()  # official: pd.read_csv(path).dropna() over every column
    frame = _cast_numeric(frame, path, NUMERIC_COLUMNS[table])
    if table == "distance":
        _check_distances(frame, path)
    return frame.select(COLUMNS[table])


def _load_flights(root: Path) -> pl.DataFrame:
    """Read the (large) flights table: typed fast path, text path only to locate a bad value."""
    path = _find_file(root, "flights")
    try:
        typed = {"Price": pl.Int64, "Distance": pl.Float64} | {c: pl.Categorical for c in _FLIGHT_CATEGORICAL}
        frame = _read_csv(path, "flights", typed)  # categorical parsing keeps the peak memory low
    except pl.exceptions.ComputeError:
        frame = _read_csv(path, "flights").with_row_index("_line", offset=2).drop_nulls()
        frame = _cast_numeric(frame, path, NUMERIC_COLUMNS["flights"]).drop("_line")
    else:
        frame = frame.drop_nulls()
    extra = [c for c in frame.columns if c not in FLIGHT_COLUMNS]
    return frame.drop(extra).with_columns(pl.col("Price").round().cast(pl.Int64))


def _check_distances(frame: pl.DataFrame, path: Path) -> None:
    """Raise on a non-null distance string that does not parse as kilometres."""
    text = frame["distance"]
    parsed = text.str.contains(_KM_RE.pattern)
    bad = text.is_not_null() & ~parsed.fill_null(False)
    if bad.any():
        row = int(bad.arg_true()[0])
        line = frame["_line"][row]
        raise WorldLoadError(f"{path}: line {line}: distance {text[row]!r} is not like '1,433 km'")


def _read_city_states(root: Path) -> list[tuple[str, str]]:
    """``city<TAB>state`` lines of ``citySet_with_states.txt``."""
    path = _find_file(root, "cities")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorldLoadError(f"{path}: cannot read city set: {exc}") from exc
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.rstrip("\r").split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise WorldLoadError(f"{path}: line {number}: expected 'city<TAB>state', got {line!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


# ───────────────────────────── flights, columnar ─────────────────────────────

_NUMBER_RE = r"^F[1-9][0-9]{0,17}$"
FlightRecord = tuple[str, int, str, str, str, str, str, str, float]
"""A flight as a plain tuple in the official column order (the fields of :class:`Flight`)."""


def _uniques(*columns: pl.Series) -> tuple[str, ...]:
    """Return the sorted distinct strings of text or categorical columns."""
    return tuple(pl.concat([c.unique().cast(pl.String) for c in columns]).unique().sort().to_list())


class FlightTable:
    """The flights table kept columnar: one structured numpy array sorted by (origin, dest, date).

    Text columns with few distinct values (cities, dates, times, durations) are dictionary codes;
    flight numbers of the official form ``F<digits>`` are stored as integers. A dict maps the
    integer key ``(origin * n_cities + dest) * n_dates + date`` to its run of rows.
    """

    def __init__(self, frame: pl.DataFrame) -> None:
        """Index a clean flights frame (official columns; Price Int64, Distance Float64)."""
        self.cities = _uniques(frame["OriginCityName"], frame["DestCityName"])
        self.dates = _uniques(frame["FlightDate"])
        self.times = _uniques(frame["DepTime"], frame["ArrTime"])
        self.elapsed = _uniques(frame["ActualElapsedTime"])
        self._city_code = {c: i for i, c in enumerate(self.cities)}
        self._date_code = {d: i for i, d in enumerate(self.dates)}
        self.int_numbers = bool(frame.height == 0 or frame["Flight Number"].str.contains(_NUMBER_RE).all())

        n_cities, n_dates = max(1, len(self.cities)), max(1, len(self.dates))
        city_enum, time_enum = pl.Enum(self.cities), pl.Enum(self.times)
        codes = frame.select(
            o=pl.col("OriginCityName").cast(city_enum).to_physical().cast(pl.Int64),
            d=pl.col("DestCityName").cast(city_enum).to_physical().cast(pl.Int64),
            t=pl.col("FlightDate").cast(pl.Enum(self.dates)).to_physical().cast(pl.Int64),
            dep=pl.col("DepTime").cast(time_enum).to_physical(),
            arr=pl.col("ArrTime").cast(time_enum).to_physical(),
            el=pl.col("ActualElapsedTime").cast(pl.Enum(self.elapsed)).to_physical(),
        ).with_columns(key=(pl.col("o") * n_cities + pl.col("d")) * n_dates + pl.col("t"))
        keys = codes["key"].to_numpy()
        order: Any = slice(None)  # already in key order (as to_csv_dir writes it): no copies
        if len(keys) > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
            order = np.argsort(keys, kind="stable")  # keep file order within a (origin, dest, date) run
            keys = keys[order]

        if self.int_numbers:
            numbers = frame["Flight Number"].str.slice(1).cast(pl.Int64).to_numpy()
            number_dtype: Any = np.int64
        else:
            numbers = np.array(frame["Flight Number"].to_list(), dtype=str)
            number_dtype = numbers.dtype
        dtype = np.dtype(
            [
                ("num", number_dtype),
                ("price", np.int64),
                ("dep", np.uint16),
                ("arr", np.uint16),
                ("el", np.uint16),
                ("date", np.uint16),
                ("o", np.uint16),
                ("d", np.uint16),
                ("dist", np.float64),
            ]
        )
        rows = np.empty(frame.height, dtype=dtype)
        rows["num"] = numbers[order]
        rows["price"] = frame["Price"].to_numpy()[order]
        rows["dist"] = frame["Distance"].to_numpy()[order]
        fields = (("dep", "dep"), ("arr", "arr"), ("el", "el"), ("date", "t"), ("o", "o"), ("d", "d"))
        for field, column in fields:
            rows[field] = codes[column].to_numpy()[order]
        self.rows = rows

        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, np.int64)
        self.run_keys = keys[starts]
        self._runs: dict[int, int] = dict(zip(self.run_keys.tolist(), range(len(starts)), strict=True))
        self._bounds: list[int] = starts.tolist() + [len(keys)]
        self._n_cities, self._n_dates = n_cities, n_dates
        self._sorted_numbers: tuple[np.ndarray, np.ndarray] | None = None
        self._routes: dict[tuple[str, str], tuple[str, ...]] | None = None

    def __len__(self) -> int:
        """Return the number of flights."""
        return len(self.rows)

    def _flight(self, row: tuple) -> Flight:
        num, price, dep, arr, el, date, o, d, dist = row
        return Flight(
            number=f"F{num}" if self.int_numbers else num,
            price=price,
            dep_time=self.times[dep],
            arr_time=self.times[arr],
            elapsed=self.elapsed[el],
            date=self.dates[date],
            origin=self.cities[o],
            dest=self.cities[d],
            distance=dist,
        )

    def _run_rows(self, origin: str, dest: str, date: str) -> list[tuple]:
        """Return the raw structured rows of one (origin, dest, date) run; empty when none."""
        o = self._city_code.get(origin)
        d = self._city_code.get(dest)
        t = self._date_code.get(date)
        if o is None or d is None or t is None:
            return []
        run = self._runs.get((o * self._n_cities + d) * self._n_dates + t)
        if run is None:
            return []
        return self.rows[self._bounds[run] : self._bounds[run + 1]].tolist()

    def records(self, origin: str, dest: str, date: str) -> list[FlightRecord]:
        """Return the flights of a route-day as plain tuples in the official column order (file order)."""
        times, elapsed = self.times, self.elapsed
        if self.int_numbers:
            return [
                (f"F{n}", p, times[a], times[b], elapsed[e], date, origin, dest, x)
                for n, p, a, b, e, _, _, _, x in self._run_rows(origin, dest, date)
            ]
        return [
            (n, p, times[a], times[b], elapsed[e], date, origin, dest, x)
            for n, p, a, b, e, _, _, _, x in self._run_rows(origin, dest, date)
        ]

    def search(self, origin: str, dest: str, date: str) -> tuple[Flight, ...]:
        """Return the flights from ``origin`` to ``dest`` on ``date`` (file order); empty when none."""
        return tuple(Flight(*record) for record in self.records(origin, dest, date))

    def by_number(self, number: str) -> Flight | None:
        """Return the first flight with this number (binary search on a lazily sorted copy), or None."""
        if self._sorted_numbers is None:
            order = np.argsort(self.rows["num"], kind="stable")
            self._sorted_numbers = (self.rows["num"][order], order)
        values, order = self._sorted_numbers
        if self.int_numbers:
            if not isinstance(number, str) or re.match(_NUMBER_RE, number) is None:
                return None
            needle: Any = int(number[1:])
        else:
            needle = number
        i = int(np.searchsorted(values, needle))
        if i >= len(values) or values[i] != needle:
            return None
        return self._flight(self.rows[int(order[i])].tolist())

    def routes(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(origin, dest) → sorted dates with at least one flight (cached)."""
        if self._routes is None:
            per_pair, dates = np.divmod(self.run_keys, self._n_dates)
            origins, dests = np.divmod(per_pair, self._n_cities)
            routes: dict[tuple[str, str], list[str]] = {}
            for o, d, t in zip(origins.tolist(), dests.tolist(), dates.tolist(), strict=True):
                routes.setdefault((self.cities[o], self.cities[d]), []).append(self.dates[t])
            self._routes = {pair: tuple(ds) for pair, ds in routes.items()}
        return self._routes

    def to_frame(self) -> pl.DataFrame:
        """Return the table in the official schema, rows sorted by (origin, dest, date)."""
        rows = self.rows
        if self.int_numbers:
            numbers = "F" + pl.Series(rows["num"]).cast(pl.String)
        else:
            numbers = pl.Series(rows["num"].tolist(), dtype=pl.String)
        times = pl.Series(self.times, dtype=pl.String)
        cities = pl.Series(self.cities, dtype=pl.String)
        return pl.DataFrame(
            {
                "Flight Number": numbers,
                "Price": rows["price"],
                "DepTime": times.gather(rows["dep"]),
                "ArrTime": times.gather(rows["arr"]),
                "ActualElapsedTime": pl.Series(self.elapsed, dtype=pl.String).gather(rows["el"]),
                "FlightDate": pl.Series(self.dates, dtype=pl.String).gather(rows["date"]),
                "OriginCityName": cities.gather(rows["o"]),
                "DestCityName": cities.gather(rows["d"]),
                "Distance": rows["dist"],
            }
        )


# ───────────────────────────── the world ─────────────────────────────


def _group(items: Iterable[Any], key: str) -> dict[str, tuple[Any, ...]]:
    """Group row dataclasses by one attribute, keeping table order."""
    groups: dict[str, list[Any]] = {}
    for item in items:
        groups.setdefault(getattr(item, key), []).append(item)
    return {k: tuple(v) for k, v in groups.items()}


class World:
    """The sandbox database with hash-indexed lookups; immutable once built.

    Build it with :meth:`from_csv_dir` (official CSVs) or :meth:`synthetic` (seeded generator).
    """

    def __init__(
        self,
        *,
        flights: pl.DataFrame,
        accommodations: pl.DataFrame,
        restaurants: pl.DataFrame,
        attractions: pl.DataFrame,
        distances: pl.DataFrame,
        city_states: Sequence[tuple[str, str]],
        source: str = "",
    ) -> None:
        """Index clean tables (official columns and dtypes, official cleaning already applied).

        Args:
            flights: the flights table; kept columnar, not as objects.
            accommodations: the accommodations table.
            restaurants: the restaurants table.
            attractions: the attractions table.
            distances: the distance table (``cost`` empty); duplicated pairs keep their first row.
            city_states: ``(city, state)`` pairs of ``citySet_with_states.txt``, in file order.
            source: where the world came from (a folder or ``synthetic:<scale>:<seed>``).

        """
        self.source = source
        self._flights = FlightTable(flights)
        distances = distances.unique(subset=["origin", "destination"], keep="first", maintain_order=True)
        self._frames = {
            "accommodations": accommodations,
            "restaurants": restaurants,
            "attractions": attractions,
            "distance": distances,
        }
        self._accommodations = _group(
            (
                Accommodation(str(n), float(p), str(rt), str(hr), float(mn), int(mo), float(rr), str(c))
                for n, rt, p, mn, rr, hr, mo, c in accommodations.select(ACCOMMODATION_COLUMNS).iter_rows()
            ),
            "city",
        )
        self._restaurants = _group(
            (
                Restaurant(str(n), str(c), str(cu), float(ac), float(r))
                for n, c, cu, ac, r in restaurants.select(RESTAURANT_COLUMNS).iter_rows()
            ),
            "city",
        )
        self._attractions = _group(
            (
                Attraction(str(n), float(la), float(lo), str(a), str(p), str(w), str(c))
                for n, la, lo, a, p, w, c in attractions.select(ATTRACTION_COLUMNS).iter_rows()
            ),
            "city",
        )
        self._distances: dict[tuple[str, str], Distance | None] = {}
        pairs = distances.select("origin", "destination", "duration", "distance")
        for o, d, duration, text in pairs.iter_rows():
            if duration is None or text is None:
                self._distances[(o, d)] = None  # official: "No valid information."
            else:
                self._distances[(o, d)] = Distance(o, d, duration, text, parse_km(text))
        self._city_states = tuple(city_states)
        self._state_of = {}
        cities_in: dict[str, list[str]] = {}
        for city, state in self._city_states:
            self._state_of.setdefault(city, state)
            cities_in.setdefault(state, []).append(city)
        self._cities_in = {s: tuple(cs) for s, cs in cities_in.items()}
        self._known = self._known_cities()

    def _known_cities(self) -> frozenset[str]:
        names = set(self._state_of) | set(self._flights.cities)
        names |= set(self._accommodations) | set(self._restaurants) | set(self._attractions)
        names |= {c for pair in self._distances for c in pair}
        return frozenset(names)

    # ── constructors ──

    @classmethod
    def from_csv_dir(cls, path: str | Path) -> World:
        """Load a database folder, flat (official file names side by side) or in the official nested layout.

        Raises:
            FileNotFoundError: when a table is missing (naming both places looked at).
            WorldLoadError: when a file is malformed (naming the path, and the line where possible).

        """
        root = Path(path)
        if not root.is_dir():
            raise FileNotFoundError(f"database folder not found: {root}")
        return cls(
            flights=_load_flights(root),
            accommodations=_load_table(root, "accommodations"),
            restaurants=_load_table(root, "restaurants"),
            attractions=_load_table(root, "attractions"),
            distances=_load_table(root, "distance"),
            city_states=_read_city_states(root),
            source=str(root),
        )

    @classmethod
    def synthetic(cls, seed: int = 0, scale: str = "tiny") -> World:
        """Generate a seeded synthetic world in the official schema (``tiny`` | ``small`` | ``full``)."""
        from star_lib.travel.synthetic import generate_tables

        tables = generate_tables(seed=seed, scale=scale)
        return cls(**tables, source=f"synthetic:{scale}:{seed}")

    @classmethod
    def load(cls, spec: str | Path) -> World:
        """Load a folder path, or generate ``synthetic:<scale>:<seed>`` (e.g. ``synthetic:tiny:0``)."""
        text = str(spec)
        if text.startswith("synthetic:"):
            parts = text.split(":")
            if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
                raise ValueError(f"world spec {text!r}: expected 'synthetic:<tiny|small|full>:<seed>'")
            return cls.synthetic(seed=int(parts[2]), scale=parts[1])
        return cls.from_csv_dir(text)

    # ── writing ──

    def to_csv_dir(self, path: str | Path) -> None:
        """Write the database flat with the official file names (and index columns) into ``path``."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        frames = {"flights": self._flights.to_frame(), **self._frames}
        for table, frame in frames.items():
            target = root / FILE_NAMES[table][0]
            frame = frame.select(COLUMNS[table])
            with target.open("w", encoding="utf-8", newline="") as handle:
                if table in INDEXED_TABLES:
                    handle.write("," + ",".join(_csv_field(c) for c in frame.columns) + "\n")
                    frame = frame.with_row_index("")
                    frame.write_csv(handle, include_header=False)
                else:
                    frame.write_csv(handle)
        (root / "citySet_with_states.txt").write_text("".join(f"{c}\t{s}\n" for c, s in self._city_states))
        (root / "citySet.txt").write_text("".join(f"{c}\n" for c, _ in self._city_states))
        (root / "stateSet.txt").write_text("".join(f"{s}\n" for s in self.states))

    # ── lookups ──

    def flights(self, origin: str, dest: str, date: str) -> tuple[Flight, ...]:
        """Flights from ``origin`` to ``dest`` on ``date`` (``YYYY-MM-DD``), in table order."""
        return self._flights.search(origin, dest, date)

    def flight_records(self, origin: str, dest: str, date: str) -> list[FlightRecord]:
        """Return the same flights as :meth:`flights`, as plain tuples (cheaper: no dataclass per row)."""
        return self._flights.records(origin, dest, date)

    def flight(self, number: str) -> Flight | None:
        """Return the flight with this number, or None."""
        return self._flights.by_number(number)

    def accommodations(self, city: str) -> tuple[Accommodation, ...]:
        """Accommodations of ``city`` (exact name), in table order."""
        return self._accommodations.get(city, ())

    def restaurants(self, city: str) -> tuple[Restaurant, ...]:
        """Restaurants of ``city`` (exact name), in table order."""
        return self._restaurants.get(city, ())

    def attractions(self, city: str) -> tuple[Attraction, ...]:
        """Attractions of ``city`` (exact name), in table order."""
        return self._attractions.get(city, ())

    def distance(self, origin: str, dest: str) -> Distance | None:
        """Return the distance row of a city pair; None when absent or without duration/distance."""
        return self._distances.get((origin, dest))

    def cities_in(self, state: str) -> tuple[str, ...]:
        """Cities of ``state`` in city-set order; empty for an unknown state."""
        return self._cities_in.get(state, ())

    def state_of(self, city: str) -> str | None:
        """Return the state of ``city`` in the city set, or None."""
        return self._state_of.get(city)

    def knows_city(self, city: str) -> bool:
        """Whether ``city`` appears in the city set or in any table (exact spelling)."""
        return city in self._known

    @property
    def known_cities(self) -> frozenset[str]:
        """Every city name of the city set and of any table."""
        return self._known

    @property
    def cities(self) -> tuple[str, ...]:
        """Cities of the city set, in file order."""
        return tuple(c for c, _ in self._city_states)

    @property
    def states(self) -> tuple[str, ...]:
        """States of the city set, in order of first appearance."""
        return tuple(self._cities_in)

    @property
    def dates(self) -> tuple[str, ...]:
        """Sorted dates with at least one flight."""
        return self._flights.dates

    def flight_routes(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(origin, dest) → sorted dates with at least one flight."""
        return self._flights.routes()

    def summary(self) -> dict[str, Any]:
        """Row counts, flight date range, numbers of cities/states and routes."""
        valid = sum(1 for d in self._distances.values() if d is not None and d.valid)
        dates = self._flights.dates
        return {
            "source": self.source,
            "flights": len(self._flights),
            "accommodations": self._frames["accommodations"].height,
            "restaurants": self._frames["restaurants"].height,
            "attractions": self._frames["attractions"].height,
            "distances": len(self._distances),
            "valid_distances": valid,
            "cities": len(self._city_states),
            "states": len(self._cities_in),
            "flight_routes": int(np.unique(self._flights.run_keys // self._flights._n_dates).size),
            "date_range": [dates[0], dates[-1]] if dates else None,
        }

    def __repr__(self) -> str:
        """Short description with the row counts."""
        s = self.summary()
        return (
            f"World({s['source'] or '?'}: {s['cities']} cities, {s['flights']} flights, "
            f"{s['accommodations']} accommodations, {s['restaurants']} restaurants, "
            f"{s['attractions']} attractions)"
        )


def _csv_field(text: str) -> str:
    """Quote a header field the way CSV writers do when needed."""
    return f'"{text}"' if any(ch in text for ch in ',"\n') else text
