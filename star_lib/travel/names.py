"""The project's own name pools for synthetic worlds (invented, plausible names; no official list copied).

Two kinds of pools:

- **Fixed tiny pools** (``TINY_*``): every ``tiny`` world draws *all* its names — states, cities,
  hotels, restaurants, attractions, streets — from these fixed lists; seeds only choose different
  subsets. A tokenizer trained once on :func:`tiny_vocabulary` therefore covers every tiny world.
- **Compositional spaces** for ``small`` and ``full`` worlds, which need thousands of distinct names:
  deterministic lists built from word lists (:func:`city_space`, :func:`hotel_space`, …).

Everything here is a pure function of the module's constants: no randomness, no I/O.
"""

from __future__ import annotations

import functools

__all__ = [
    "CUISINES_COMMON",
    "CUISINES_CONSTRAINT",
    "HOUSE_RULE_NAMES",
    "ROOM_TYPE_NAMES",
    "TINY_ATTRACTIONS",
    "TINY_CITIES",
    "TINY_HOTELS",
    "TINY_RESTAURANTS",
    "TINY_STATES",
    "TINY_STREETS",
    "attraction_space",
    "city_space",
    "hotel_space",
    "restaurant_space",
    "state_abbreviation",
    "state_space",
    "street_space",
    "tiny_vocabulary",
]

# ───────────────────────────── official vocabularies (schema values) ─────────────────────────────

ROOM_TYPE_NAMES: tuple[str, ...] = ("Entire home/apt", "Private room", "Shared room")
HOUSE_RULE_NAMES: tuple[str, ...] = ("parties", "smoking", "children under 10", "pets", "visitors")
"""Rules as they appear after ``No `` in ``house_rules`` (``"No parties & No smoking"``)."""
CUISINES_CONSTRAINT: tuple[str, ...] = (
    "Chinese",
    "American",
    "Italian",
    "Mexican",
    "Indian",
    "Mediterranean",
    "French",
)
"""The cuisines a query may ask for."""
CUISINES_COMMON: tuple[str, ...] = (
    "Tea",
    "BBQ",
    "Seafood",
    "Cafe",
    "Desserts",
    "Pizza",
    "Fast Food",
    "Bakery",
)
"""The other cuisines of the official table (served more often than the constraint cuisines)."""

# ───────────────────────────── fixed tiny pools ─────────────────────────────

TINY_STATES: tuple[str, ...] = (
    "Arvenna",
    "Beltmoor",
    "Calderon",
    "Dunmarrow",
    "Eastmere",
    "Glenhollow",
    "Harrowvale",
    "Kestrel Plains",
    "Lorendale",
    "New Tamsin",
)

TINY_CITIES: tuple[str, ...] = (
    "Ashbury",
    "Brackenford",
    "Corvale",
    "Dunhollow",
    "Elmstead",
    "Farrowby",
    "Glimmerton",
    "Hollis Creek",
    "Ivywick",
    "Juniper Bluff",
    "Kettleby Hills",
    "Larkmoor",
    "Millbrook Harbor",
    "Northwade",
    "Oakhurst Landing",
    "Pellmont",
    "Quarry Glen",
    "Rosewick",
    "St. Aldric",
    "Port Wren",
    "Fort Callow",
    "Mount Ives",
    "Silverpine",
    "Thornbury Springs",
    "Umberfield",
    "Valewood",
    "Westcombe",
    "Yarrowgate",
    "Zephyr Point",
    "Amberly Cross",
    "Birchmouth",
    "Coldwater Bend",
    "Driftwood Bay",
    "Emberton",
    "Foxglove",
    "Granite Ridge",
    "Hawthorne Vale",
    "Ironwick",
    "Lanternfield",
    "Marigold",
)

_TINY_HOTEL_ADJ = ("Cozy", "Sunny", "Quiet", "Bright", "Charming", "Spacious", "Rustic", "Modern", "Elegant")
_TINY_HOTEL_NOUN = (
    "Garden Loft",
    "Harbor Studio",
    "Corner Suite",
    "Lakeside Cabin",
    "Downtown Flat",
    "Hillside Cottage",
    "Park View Room",
    "Riverside Bungalow",
)
TINY_HOTELS: tuple[str, ...] = tuple(f"{a} {n}" for a in _TINY_HOTEL_ADJ for n in _TINY_HOTEL_NOUN)

_TINY_RESTAURANT_ADJ = (
    "Golden",
    "Blue",
    "Little",
    "Green",
    "Red",
    "Silver",
    "Old",
    "Happy",
    "Wild",
    "Copper",
)
_TINY_RESTAURANT_NOUN = ("Lantern", "Fig", "Spoon", "Oak", "Kettle", "Harbor", "Olive", "Pepper", "Bistro")
TINY_RESTAURANTS: tuple[str, ...] = tuple(
    f"{a} {n}" for a in _TINY_RESTAURANT_ADJ for n in _TINY_RESTAURANT_NOUN
)

_TINY_ATTRACTION_ADJ = (
    "Old Mill",
    "Riverside",
    "Hilltop",
    "Lakeshore",
    "Heritage",
    "Liberty",
    "Pioneer",
    "Sunset",
    "Maple",
)
_TINY_ATTRACTION_NOUN = (
    "Museum",
    "Park",
    "Gardens",
    "Observatory",
    "Aquarium",
    "Gallery",
    "Lighthouse",
    "Market",
)
TINY_ATTRACTIONS: tuple[str, ...] = tuple(
    f"{a} {n}" for a in _TINY_ATTRACTION_ADJ for n in _TINY_ATTRACTION_NOUN
)

TINY_STREETS: tuple[str, ...] = (
    "Main St",
    "Oak Ave",
    "Mill Rd",
    "Harbor Blvd",
    "Church St",
    "Park Ave",
    "River Rd",
    "Elm St",
    "Lake Dr",
    "Hill St",
    "Market St",
    "Station Rd",
)


def tiny_vocabulary() -> tuple[str, ...]:
    """Return every name string a tiny world can contain (for training a tokenizer once).

    Numbers (prices, times, dates, phone digits) are not listed: they are digits and punctuation.
    """
    states = TINY_STATES + tuple(state_abbreviation(s) for s in TINY_STATES)
    return (
        states
        + TINY_CITIES
        + TINY_HOTELS
        + TINY_RESTAURANTS
        + TINY_ATTRACTIONS
        + TINY_STREETS
        + ROOM_TYPE_NAMES
        + tuple(f"No {r}" for r in HOUSE_RULE_NAMES)
        + CUISINES_CONSTRAINT
        + CUISINES_COMMON
    )


def state_abbreviation(state: str) -> str:
    """Two capital letters for addresses: initials of a two-word name, else the first two letters.

    >>> state_abbreviation("Kestrel Plains"), state_abbreviation("Arvenna")
    ('KP', 'AR')
    """
    words = state.split()
    if len(words) >= 2:
        return (words[0][0] + words[1][0]).upper()
    return state[:2].upper()


# ───────────────────────────── compositional spaces (small / full) ─────────────────────────────

_CITY_ROOTS = (
    "Ash", "Alder", "Amber", "Bay", "Beacon", "Bell", "Birch", "Black", "Bramble", "Briar", "Brook",
    "Cedar", "Clay", "Clear", "Cliff", "Cold", "Copper", "Crane", "Crow", "Dale", "Deer", "Drift",
    "Dun", "Eagle", "East", "Elder", "Elm", "Ember", "Fair", "Falcon", "Fern", "Fox", "Glen",
    "Gold", "Granite", "Green", "Grey", "Hale", "Harrow", "Hart", "Hazel", "Heath", "High",
    "Holly", "Iron", "Ivy", "Juniper", "Kings", "Lark", "Linden", "Lynn", "Maple", "Marsh",
    "Meadow", "Mill", "Moss", "North", "Oak", "Orchard", "Pine", "Quarry", "Raven", "Red",
    "Ridge", "River", "Rock", "Rose", "Rush", "Salt", "Sandy", "Shadow", "Silver", "South",
    "Spring", "Stone", "Sun", "Swan", "Thorn", "Timber", "Wal", "West", "White", "Willow", "Wolf",
    "Wren", "Yarrow",
)  # fmt: skip
_CITY_SUFFIXES = (
    "ford", "ton", "ville", "field", "wood", "bury", "port", "haven", "dale", "brook", "wick",
    "mont", "stead", "worth", "by", "more",
)  # fmt: skip
_CITY_PREFIXES = ("Port", "St.", "Fort", "Mount", "Lake", "New")
_CITY_TAILS = ("Falls", "Springs", "Harbor", "Heights", "Crossing", "Bend", "Junction", "Point")


@functools.cache
def city_space() -> tuple[str, ...]:
    """Return thousands of distinct invented city names (``Ashford``, ``Port Wren``, ``Elm Falls``…)."""
    names = [f"{r}{s}" for r in _CITY_ROOTS for s in _CITY_SUFFIXES]
    names += [f"{p} {r}{s}" for p in _CITY_PREFIXES for r in _CITY_ROOTS[::3] for s in _CITY_SUFFIXES[:4]]
    names += [f"{r} {t}" for r in _CITY_ROOTS for t in _CITY_TAILS]
    return tuple(dict.fromkeys(names))


_STATE_ROOTS = (
    "Arvenna", "Beltmoor", "Calderon", "Dunmarrow", "Eastmere", "Glenhollow", "Harrowvale", "Lorendale",
    "Tamsin", "Ardwyn", "Brisca", "Corwen", "Delmaris", "Elandor", "Farrowmark", "Galvany", "Hestia",
    "Isterra", "Jorvale", "Karrow", "Lunessa", "Merrivale", "Norvanna", "Ostrava", "Pellandra",
    "Quenmoor", "Rivanna", "Selwyn", "Taravel", "Umbria Vale", "Varrow", "Westoria", "Yelland", "Zarenna",
    "Aldmoor", "Brenlow", "Caskadia", "Dovermark", "Everhall", "Fenmark", "Gresham", "Hollandia",
    "Ivernia", "Kelmar", "Larrowind", "Mistral", "Nerissa", "Orlanda", "Prescott Vale", "Redmarch",
)  # fmt: skip
_STATE_PREFIXES = ("New", "North", "South", "West", "East")


@functools.cache
def state_space() -> tuple[str, ...]:
    """Return invented state names: the roots first, then prefixed forms (``New Tamsin``…)."""
    names = list(_STATE_ROOTS) + [f"{p} {r}" for p in _STATE_PREFIXES for r in _STATE_ROOTS if " " not in r]
    return tuple(dict.fromkeys(names))


_HOTEL_ADJ = (
    "Cozy", "Sunny", "Quiet", "Bright", "Charming", "Spacious", "Rustic", "Modern", "Elegant", "Stylish",
    "Airy", "Serene", "Lovely", "Classic", "Peaceful", "Sunlit", "Hidden", "Urban", "Luxury", "Simple",
    "Renovated", "Historic", "Colorful", "Private", "Bohemian", "Tranquil", "Central", "Chic", "Warm",
    "Grand",
)  # fmt: skip
_HOTEL_NOUN = (
    "Garden", "Harbor", "Corner", "Lakeside", "Downtown", "Hillside", "Park View", "Riverside", "Skyline",
    "Courtyard", "Brick", "Rooftop", "Orchard", "Seaside", "Meadow", "Uptown", "Old Town", "Forest",
    "Canal", "Gallery", "Sunrise", "Maple", "Willow", "Bayfront", "Village",
)  # fmt: skip
_HOTEL_KIND = (
    "Loft", "Studio", "Suite", "Cabin", "Flat", "Cottage", "Room", "Bungalow", "Apartment", "Guesthouse",
    "Townhouse", "Retreat", "Hideaway", "Nook", "Bedroom", "Duplex", "Penthouse", "Chalet",
)  # fmt: skip


@functools.cache
def hotel_space() -> tuple[str, ...]:
    """Return ≈13.5k distinct listing titles (``Cozy Garden Loft``…)."""
    return tuple(f"{a} {n} {k}" for a in _HOTEL_ADJ for n in _HOTEL_NOUN for k in _HOTEL_KIND)


_REST_ADJ = (
    "Golden", "Blue", "Little", "Green", "Red", "Silver", "Old", "Happy", "Wild", "Copper", "Rusty",
    "Lucky", "Smoky", "Salty", "Crimson", "Velvet", "Hungry", "Jolly", "Crispy", "Urban", "Sweet",
    "Spicy", "Twin", "Humble", "Royal", "Tiny", "Bright", "Open", "Honest", "Sunny",
)  # fmt: skip
_REST_NOUN = (
    "Lantern", "Fig", "Spoon", "Oak", "Kettle", "Harbor", "Olive", "Pepper", "Fork", "Ladle", "Basil",
    "Anchor", "Barrel", "Lemon", "Saffron", "Walnut", "Hearth", "Garden", "Mango", "Sparrow", "Pine",
    "Plum", "Clover", "Ginger", "Acorn", "Bell", "Cedar", "Dragon", "Thistle", "Rooster",
)  # fmt: skip
_REST_KIND = (
    "",
    "Bistro",
    "Kitchen",
    "Cafe",
    "Grill",
    "Diner",
    "Tavern",
    "Eatery",
    "House",
    "Bar & Grill",
    "Canteen",
)


@functools.cache
def restaurant_space() -> tuple[str, ...]:
    """Return ≈9.9k distinct restaurant names (``Golden Lantern``, ``Blue Fig Kitchen``…)."""
    return tuple(f"{a} {n} {k}".strip() for a in _REST_ADJ for n in _REST_NOUN for k in _REST_KIND)


_ATTR_ADJ = (
    "Old Mill", "Riverside", "Hilltop", "Lakeshore", "Heritage", "Liberty", "Pioneer", "Sunset", "Maple",
    "Founders", "Memorial", "Harbor", "Union", "Centennial", "Veterans", "Lighthouse Point", "Cedar Grove",
    "Eagle Rock", "Willow Creek", "Granite Peak", "Prairie", "Railway", "Botanical", "Science", "Children's",
    "Maritime", "Natural History", "Folk Art", "Aviation", "Frontier", "Crystal Cave", "Silver Lake",
    "Canyon", "Bluebird", "Copper Hill", "Riverwalk", "Old Town", "Harvest", "Lantern", "Sandstone",
)  # fmt: skip
_ATTR_KIND = (
    "Museum", "Park", "Gardens", "Observatory", "Aquarium", "Gallery", "Lighthouse", "Market", "Zoo",
    "Theater", "Bridge", "Plaza", "Trail", "Arboretum", "Historic Site", "Nature Preserve", "Monument",
    "Fountain", "Pier", "Conservatory", "Library", "Cathedral", "Boardwalk", "Heritage Center",
    "Art Center", "Overlook", "Falls", "Stadium", "Farm", "Springs", "Village", "Lookout",
    "Mansion", "Sculpture Park", "Tower", "Dunes", "Caverns", "Wharf", "Promenade", "Amphitheater",
    "Playhouse", "Wildlife Refuge", "Beach", "Canal", "Pavilion", "Old Fort", "Greenhouse", "Depot",
    "Carousel", "Memorial Hall",
)  # fmt: skip


@functools.cache
def attraction_space() -> tuple[str, ...]:
    """Return 2,000 distinct attraction names (``Riverside Park``…); unique within a city, not across."""
    return tuple(f"{a} {k}" for a in _ATTR_ADJ for k in _ATTR_KIND)


_STREET_NAMES = (
    "Main", "Oak", "Mill", "Harbor", "Church", "Park", "River", "Elm", "Lake", "Hill", "Market",
    "Station", "Maple", "Cedar", "Pine", "Walnut", "Washington", "Franklin", "Union", "Bridge",
    "Spring", "Chestnut", "Highland", "Sunset", "Meadow", "Forest", "Ridge", "Grove", "Willow", "Center",
)  # fmt: skip
_STREET_SUFFIXES = ("St", "Ave", "Rd", "Blvd", "Dr", "Ln", "Way", "Pkwy")


@functools.cache
def street_space() -> tuple[str, ...]:
    """Return street names for addresses (``Main St``, ``Oak Ave``…)."""
    return tuple(f"{n} {s}" for n in _STREET_NAMES for s in _STREET_SUFFIXES)
