"""Back-translation: structured record → natural-language ``query``.

Two realisers share one checker (:func:`missing_mentions`), which lists what a text fails to mention
(origin, destination, dates, group size, budget, each constraint):

* :func:`realise_query` — templates with real paraphrase variety (openings, number words or digits,
  five date formats, several phrasings per constraint, shuffled clause order), deterministic per seed;
* :class:`LLMRealiser` — any OpenAI-compatible chat endpoint, 3-shot, temperature 0.7 (spec §7), retries
  with exponential backoff; an answer is used only when the checker finds nothing missing, otherwise the
  template text is used and the fallback counted.

:func:`probe_endpoint` sends one one-token request to tell a dead endpoint (connection refused, timeout,
HTTP 401/403/404) from a live one before any work; :func:`describe_error` says in a few words why a request
failed, with the key masked. ``star synth`` and ``star qa-eval`` raise :class:`EndpointError` (exit 2).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from star_lib.types import QueryRecord

log = logging.getLogger(__name__)

NUMBER_WORDS: dict[int, str] = {
    1: "one",
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
}

# ───────────────────────────── dates ─────────────────────────────


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _date_range(first: str, last: str, style: int) -> str:
    a, b = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    if style == 0:
        return f"from {a:%B} {_ordinal(a.day)} to {b:%B} {_ordinal(b.day)}, {b.year}"
    if style == 1:
        return f"from {a.isoformat()} to {b.isoformat()}"
    if style == 2:
        return f"from {a.day} {a:%B} {a.year} to {b.day} {b:%B} {b.year}"
    if style == 3:
        return f"between {a:%m/%d/%Y} and {b:%m/%d/%Y}"
    return f"from {a:%A}, {a:%B} {a.day}, {a.year} to {b:%A}, {b:%B} {b.day}, {b.year}"


DATE_STYLES = 5


def _date_patterns(date: str) -> list[str]:
    """Regexes that recognise ``date`` in any of the realisers' formats (and a few common others)."""
    d = dt.date.fromisoformat(date)
    month, short = d.strftime("%B"), d.strftime("%b")
    day = rf"0?{d.day}(?:st|nd|rd|th)?"
    return [
        re.escape(d.isoformat()),
        rf"(?<!\d)0?{d.month}/0?{d.day}/{d.year}",
        rf"(?:{month}|{short}\.?)\s+{day}(?!\d)",
        rf"(?<!\d){day}\s+(?:of\s+)?(?:{month}|{short}\.?)",
    ]


# ───────────────────────────── the checker ─────────────────────────────


def _has(pattern: str, text: str) -> bool:
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


def _number(n: int) -> str:
    word = NUMBER_WORDS.get(n)
    digits = rf"(?<![\d,.$]){n}(?![\d,])"
    return rf"(?:{digits}|\b{word}\b)" if word else digits


PEOPLE_NOUNS = r"(?:people|persons?|travell?ers|adults|friends|guests|individuals|members|colleagues|of us)"


def _people_pattern(people: int) -> str:
    """Match a group size in context (``4 people``, ``group of four``, ``4-person``; ``solo`` for one)."""
    n = _number(people)
    pattern = rf"{n}\s+(?:[a-z]+\s+)?{PEOPLE_NOUNS}|\b(?:group|party|family|team) of {n}|{n}-person"
    if people == 1:
        pattern += r"|\b(?:single|solo|alone|myself|just me|individual)\b"
    return pattern


CONSTRAINT_PATTERNS: dict[str, dict[str, str]] = {
    "house rule": {
        "parties": r"part(?:y|ies)",
        "smoking": r"smok",
        "children under 10": r"child|kid",
        "pets": r"\bpets?\b",
        "visitors": r"visitor|guest",
    },
    "room type": {
        "shared room": r"shared",
        "not shared room": r"(?:\bnot?\b|n't|non-?|un)[\w\s/-]{0,24}shared",
        "private room": r"private",
        "entire room": r"entire|whole",
    },
    "transportation": {
        "no flight": r"\bfl(?:y|ying|ight|ights)\b|plane|\bair",
        "no self-driving": r"driv",
    },
}


def missing_mentions(record: QueryRecord, text: str) -> list[str]:
    """List what ``text`` fails to mention of ``record`` (empty list: it mentions everything).

    Checked: origin, destination, first and last date (ISO, ``03/16/2022``, ``March 16th``,
    ``16 March``), people (digits or words; ``alone``/``solo``/``single`` for one), budget (with or
    without thousands separators), and a keyword for each requested constraint and each cuisine.

    >>> from star_lib.types import LocalConstraint
    >>> r = QueryRecord("Austin", "Denver", 3, 1, ("2022-03-01", "2022-03-02", "2022-03-03"), 2,
    ...                 LocalConstraint(house_rule="pets"), 1500)
    >>> missing_mentions(r, "Austin to Denver, March 1st to March 3rd, two people, $1,500, with pets")
    []
    >>> missing_mentions(r, "Austin to Denver, March 1st to March 3rd, $1,500")
    ['people', 'house rule']
    """
    missing = []
    for name, value in (("origin", record.org), ("destination", record.dest)):
        if value.lower() not in text.lower():
            missing.append(name)
    for name, date in (("start date", record.date[0]), ("end date", record.date[-1])):
        if not any(_has(p, text) for p in _date_patterns(date)):
            missing.append(name)
    if not _has(_people_pattern(record.people_number), text):
        missing.append("people")
    budget = int(record.budget)
    if not _has(rf"(?<![\d,.])(?:{budget:,}|{budget})(?!\d|[,.]\d)", text):
        missing.append("budget")
    lc = record.local_constraint
    for name, value in (
        ("house rule", lc.house_rule),
        ("room type", lc.room_type),
        ("transportation", lc.transportation),
    ):
        if value is None:
            continue
        pattern = CONSTRAINT_PATTERNS[name].get(value, re.escape(value))
        if not _has(pattern, text):
            missing.append(name)
    for cuisine in lc.cuisine or ():
        if not _has(rf"\b{re.escape(cuisine)}\b", text):
            missing.append(f"cuisine {cuisine}")
    return missing


# ───────────────────────────── templates ─────────────────────────────

HOUSE_RULE_PHRASES: dict[str, tuple[str, ...]] = {
    "parties": (
        "the accommodation must allow parties",
        "{we} would like to be able to throw a party where {we} stay",
        "please pick a place that is fine with parties",
    ),
    "smoking": (
        "smoking must be permitted at the accommodation",
        "{we} need a place where smoking is allowed",
        "the lodging should not forbid smoking",
    ),
    "children under 10": (
        "{we} are travelling with children under 10, so the accommodation must welcome them",
        "the place {we} stay must allow children under 10",
        "please choose lodging that accepts kids under ten",
    ),
    "pets": (
        "{we} are bringing pets, so the accommodation has to allow them",
        "the lodging must be pet-friendly",
        "{we} need somewhere that accepts pets",
    ),
    "visitors": (
        "the accommodation should allow visitors",
        "{we} would like to have guests over where {we} stay",
        "please make sure visitors are permitted at the lodging",
    ),
}
ROOM_TYPE_PHRASES: dict[str, tuple[str, ...]] = {
    "shared room": (
        "a shared room is what {we} want",
        "{we} prefer to stay in a shared room",
        "book shared rooms",
    ),
    "not shared room": (
        "{we} do not want a shared room",
        "no shared rooms, please",
        "the room must not be shared",
    ),
    "private room": (
        "{we} would like private rooms",
        "a private room is a must",
        "please book a private room",
    ),
    "entire room": (
        "{we} want an entire home or apartment",
        "{we} would prefer to have the entire place to {ourselves}",
        "please book an entire room",
    ),
}
TRANSPORT_PHRASES: dict[str, tuple[str, ...]] = {
    "no flight": (
        "{we} would rather not fly",
        "please avoid flights",
        "no flights, please",
        "{we} cannot take a plane",
    ),
    "no self-driving": (
        "{we} would prefer not to drive {ourselves}",
        "self-driving is not an option for {us}",
        "{we} will not be driving",
        "please do not plan any self-driving",
    ),
}
CUISINE_PHRASES: tuple[str, ...] = (
    "{we} would like to try {list} cuisine",
    "{our} meals should include {list} food",
    "{we} are keen on {list} restaurants",
    "please include {list} dishes along the way",
)
OPENINGS: tuple[str, ...] = (
    "Please help {us} plan a trip from {org} to {dest}",
    "{We} want to travel from {org} to {dest}",
    "Could you put together an itinerary from {org} to {dest}",
    "I am looking for a travel plan departing from {org} and heading to {dest}",
    "Can you design a journey that starts in {org} and goes to {dest}",
    "Plan a trip for {us}: {org} to {dest}",
)
DURATIONS: tuple[str, ...] = (
    "spanning {days} days",
    "for {days} days",
    "lasting {days} days",
    "over {days} days",
)


def _num(n: int, rng: random.Random) -> str:
    return NUMBER_WORDS[n] if n in NUMBER_WORDS and rng.random() < 0.5 else str(n)


def _money(amount: int, rng: random.Random) -> str:
    style = rng.randrange(3)
    if style == 0:
        return f"${amount:,}"
    if style == 1:
        return f"${amount}"
    return f"{amount:,} dollars"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _pronouns(people: int) -> dict[str, str]:
    if people == 1:
        return {"we": "I", "We": "I", "us": "me", "our": "my", "ourselves": "myself"}
    return {"we": "we", "We": "We", "us": "us", "our": "our", "ourselves": "ourselves"}


def _people_phrase(people: int, rng: random.Random) -> str:
    if people == 1:
        return rng.choice(("for a single person", "for just me", "for one person", "travelling solo"))
    n = _num(people, rng)
    return rng.choice(
        (f"for a group of {n}", f"for {n} people", f"for {n} travellers", f"for our party of {n}")
    )


def _budget_phrase(budget: int, we: dict[str, str], rng: random.Random) -> str:
    money = _money(budget, rng)
    options = (
        f"the budget is {money}",
        f"{we['our']} total budget is {money}",
        f"{we['we']} can spend at most {money}",
        f"the whole trip should cost no more than {money}",
    )
    return rng.choice(options)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def realise_query(record: QueryRecord, rng: random.Random) -> str:
    """Template back-translation of ``record`` with paraphrase variety, deterministic for a seeded ``rng``.

    Every text mentions origin, destination, both end dates, group size, budget and each constraint
    (so :func:`missing_mentions` returns ``[]`` for it).
    """
    we = _pronouns(record.people_number)
    opening = rng.choice(OPENINGS).format(org=record.org, dest=record.dest, **we)
    days = _num(record.days, rng)
    parts = [
        opening,
        rng.choice(DURATIONS).format(days=days),
        _date_range(record.date[0], record.date[-1], rng.randrange(DATE_STYLES)),
    ]
    if record.visiting_city_number > 1:
        n = _num(record.visiting_city_number, rng)
        parts.append(
            rng.choice(
                (f"visiting {n} cities", f"covering {n} different cities", f"with stops in {n} cities")
            )
        )
    first = " ".join(parts[:1]) + " " + ", ".join(parts[1:])
    sentences = [first + ", " + _people_phrase(record.people_number, rng) + "."]
    sentences.append(_cap(_budget_phrase(int(record.budget), we, rng)) + ".")
    sentences += [_cap(c) + "." for c in _constraint_clauses(record, we, rng)]
    return " ".join(sentences)


def _constraint_clauses(record: QueryRecord, we: dict[str, str], rng: random.Random) -> list[str]:
    lc = record.local_constraint
    clauses = []
    if lc.house_rule:
        clauses.append(rng.choice(HOUSE_RULE_PHRASES[lc.house_rule]).format(**we))
    if lc.cuisine:
        clauses.append(rng.choice(CUISINE_PHRASES).format(list=_join(list(lc.cuisine)), **we))
    if lc.room_type:
        clauses.append(rng.choice(ROOM_TYPE_PHRASES[lc.room_type]).format(**we))
    if lc.transportation:
        clauses.append(rng.choice(TRANSPORT_PHRASES[lc.transportation]).format(**we))
    rng.shuffle(clauses)
    return clauses


# ───────────────────────────── the LLM realiser ─────────────────────────────

ENV_BASE_URL = "STAR_LLM_BASE_URL"
ENV_MODEL = "STAR_LLM_MODEL"
ENV_API_KEY = "STAR_LLM_API_KEY"

SYSTEM_PROMPT = (
    "You rewrite structured travel requests as one natural, fluent request a traveller would type. "
    "Mention the origin, the destination, the exact start and end dates, the number of people, the budget in "
    "dollars and every listed preference. Do not invent anything else. Reply with the request only."
)
FEW_SHOT: tuple[tuple[dict[str, Any], str], ...] = (
    (
        {
            "org": "St. Petersburg",
            "dest": "Rockford",
            "days": 3,
            "visiting_city_number": 1,
            "date": ["2022-03-16", "2022-03-17", "2022-03-18"],
            "people_number": 1,
            "local_constraint": {
                "house rule": None,
                "cuisine": None,
                "room type": None,
                "transportation": None,
            },
            "budget": 1700,
        },
        "Please help me plan a trip from St. Petersburg to Rockford spanning 3 days from March 16th to March "
        "18th, 2022. The travel should be planned for a single person with a budget of $1,700.",
    ),
    (
        {
            "org": "Nashville",
            "dest": "Pennsylvania",
            "days": 5,
            "visiting_city_number": 2,
            "date": ["2022-03-12", "2022-03-13", "2022-03-14", "2022-03-15", "2022-03-16"],
            "people_number": 6,
            "local_constraint": {
                "house rule": None,
                "cuisine": None,
                "room type": "entire room",
                "transportation": None,
            },
            "budget": 15100,
        },
        "Can you create a 5-day itinerary for a group of 6, departing from Nashville and visiting 2 cities "
        "in Pennsylvania from March 12th to March 16th, 2022? Our budget is $15,100 and we would like "
        "entire rooms.",
    ),
    (
        {
            "org": "Seattle",
            "dest": "Texas",
            "days": 7,
            "visiting_city_number": 3,
            "date": [
                "2022-03-10",
                "2022-03-11",
                "2022-03-12",
                "2022-03-13",
                "2022-03-14",
                "2022-03-15",
                "2022-03-16",
            ],
            "people_number": 4,
            "local_constraint": {
                "house rule": "parties",
                "cuisine": ["Mexican", "Chinese"],
                "room type": None,
                "transportation": "no self-driving",
            },
            "budget": 11000,
        },
        "We are four friends in Seattle planning a week in Texas, visiting 3 cities from March 10th to March "
        "16th, 2022, on a $11,000 budget. We want to throw a party at our lodging, try Mexican and Chinese "
        "food, and we will not be self-driving.",
    ),
)


@dataclass
class LLMConfig:
    """Where the back-translation LLM lives and how hard to try (operational knobs; env vars fill gaps)."""

    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. ``http://localhost:8000/v1``; defaults to ``$STAR_LLM_BASE_URL``."""
    model: str | None = None
    """Model name the endpoint serves; defaults to ``$STAR_LLM_MODEL``."""
    api_key: str | None = field(default=None, repr=False)
    """Key for the endpoint; defaults to ``$STAR_LLM_API_KEY`` (``EMPTY`` if unset). Never logged."""
    temperature: float = 0.7
    """Sampling temperature (§7: 0.7)."""
    max_tokens: int = 300
    """Longest answer to accept."""
    max_attempts: int = 3
    """Requests per record before falling back to the template (errors and rejected answers both count)."""
    backoff_s: float = 1.0
    """First wait after a failed request; doubles each retry."""
    timeout_s: float = 60.0
    """Per-request timeout."""

    def __post_init__(self) -> None:
        """Fill endpoint fields from the environment and validate them."""
        self.base_url = self.base_url or os.environ.get(ENV_BASE_URL)
        self.model = self.model or os.environ.get(ENV_MODEL)
        self.api_key = self.api_key or os.environ.get(ENV_API_KEY) or "EMPTY"
        if not self.base_url:
            raise ValueError(f"LLM realiser needs an endpoint: set {ENV_BASE_URL} or LLMConfig.base_url")
        if not self.model:
            raise ValueError(f"LLM realiser needs a model name: set {ENV_MODEL} or LLMConfig.model")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature={self.temperature}: use a value in [0, 2]")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts={self.max_attempts}: must be >= 1")
        if self.backoff_s < 0 or self.timeout_s <= 0:
            raise ValueError("backoff_s must be >= 0 and timeout_s > 0")


def record_payload(record: QueryRecord) -> dict[str, Any]:
    """Return the structured fields an LLM sees (no query text, no plan)."""
    data = record.to_dict()
    return {
        k: data[k]
        for k in (
            "org",
            "dest",
            "days",
            "visiting_city_number",
            "date",
            "people_number",
            "local_constraint",
            "budget",
        )
    }


def build_messages(record: QueryRecord) -> list[dict[str, str]]:
    """System prompt, three worked examples, then the record (spec §7: 3-shot)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for payload, answer in FEW_SHOT:
        messages.append({"role": "user", "content": json.dumps(payload)})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": json.dumps(record_payload(record))})
    return messages


class EndpointError(ValueError):
    """An OpenAI-compatible endpoint that cannot serve: unreachable, timing out, refusing the key, no model.

    A ``ValueError``, so the command line prints it as one line and exits 2.
    """


PROBE_FATAL_STATUS: tuple[int, ...] = (401, 403, 404)
"""HTTP statuses that a probe takes as final (bad key, no such route or model); 429 and 5xx may pass."""


def describe_error(exc: BaseException, secret: str | None = None) -> str:
    """Say in a few words why a request failed: ``connection refused``, ``timed out``, ``HTTP 401: …``.

    ``secret`` (an API key) is masked wherever the text would show it.

    >>> describe_error(ConnectionRefusedError(111, "Connection refused"))
    'connection refused'
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        text = f"HTTP {status}: {' '.join(str(getattr(exc, 'message', exc)).split())[:160]}"
    else:
        text = _root_cause(exc)
    if secret and secret != "EMPTY":
        text = text.replace(secret, "***")
    return text


def _root_cause(exc: BaseException) -> str:
    """Return the innermost OS reason of a transport error (``connection refused``), else the error's text."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    reason = None
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, TimeoutError) or "Timeout" in type(cause).__name__:
            return "timed out"
        if isinstance(cause, OSError) and cause.strerror:
            reason = cause.strerror.lower()
        cause = cause.__cause__ or cause.__context__
    return reason or " ".join(str(exc).split())[:160] or type(exc).__name__


def probe_endpoint(
    base_url: str | None, model: str, api_key: str | None, timeout_s: float = 30.0
) -> str | None:
    """Send one one-token chat request; return why the endpoint cannot serve ``model``, or None.

    Connection failures, timeouts and HTTP 401/403/404 (:data:`PROBE_FATAL_STATUS`) are final; any other
    answer, an error status included, returns None and is left to the per-request retries.
    """
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout_s, max_retries=0)
    try:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "ping"}], max_tokens=1, temperature=0.0
        )
    except openai.APIStatusError as exc:
        return describe_error(exc, api_key) if exc.status_code in PROBE_FATAL_STATUS else None
    except openai.OpenAIError as exc:  # connection refused, no such host, timeout
        return describe_error(exc, api_key)
    return None


class LLMRealiser:
    """Back-translation through an OpenAI-compatible endpoint, with a checked template fallback.

    ``counts`` tracks ``requests``, ``errors``, ``rejected`` (answers the checker refused), ``accepted``
    and ``fallback`` (records that got the template text); ``last_error`` says why the latest request failed.
    """

    def __init__(self, config: LLMConfig | None = None, client: Any = None, sleep: Any = time.sleep) -> None:
        self.config = config or LLMConfig()
        if client is None:
            from openai import OpenAI

            client = OpenAI(
                base_url=self.config.base_url,
                api_key=self.config.api_key,
                timeout=self.config.timeout_s,
                max_retries=0,
            )
        self.client = client
        self._sleep = sleep
        self.counts: dict[str, int] = {
            "requests": 0,
            "errors": 0,
            "rejected": 0,
            "accepted": 0,
            "fallback": 0,
        }
        self.last_error: str | None = None
        """Why the latest failed request failed (:func:`describe_error`, key masked)."""

    def __repr__(self) -> str:
        return f"LLMRealiser(base_url={self.config.base_url!r}, model={self.config.model!r})"

    def _ask(self, record: QueryRecord) -> str | None:
        """One request; None on a transport/API error (logged without the key)."""
        import openai

        self.counts["requests"] += 1
        try:
            response = self.client.chat.completions.create(
                model=self.config.model,
                messages=build_messages(record),
                temperature=self.config.temperature,
                max_tokens=self.config.max_tokens,
            )
        except openai.OpenAIError as exc:
            self.counts["errors"] += 1
            self.last_error = describe_error(exc, self.config.api_key)
            log.warning("LLM realiser request to %s failed: %s", self.config.base_url, self.last_error)
            return None
        choices = getattr(response, "choices", None) or []
        content = choices[0].message.content if choices and choices[0].message else None
        return (content or "").strip()

    def realise(self, record: QueryRecord, rng: random.Random) -> str:
        """Return the LLM's text when the checker accepts it, else the template text (a counted fallback)."""
        wait = self.config.backoff_s
        for attempt in range(self.config.max_attempts):
            text = self._ask(record)
            if text is None:
                if attempt + 1 < self.config.max_attempts:
                    self._sleep(wait)
                    wait *= 2
                continue
            if text and not missing_mentions(record, text):
                self.counts["accepted"] += 1
                return text
            self.counts["rejected"] += 1
        self.counts["fallback"] += 1
        return realise_query(record, rng)
