"""The compact protocol: turns, observations, the plan mapping (round trip through the strict evaluator)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from star_lib.agent import FinalAnswer, FormatError, RolloutConfig, TravelEnv, run_episodes
from star_lib.agent.compact import (
    CompactExpert,
    CompactPlanError,
    CompactTools,
    compact_rollout_config,
    encode_plan,
    expand_plan,
    expert_note,
    parse_turn,
    user_prompt,
)
from star_lib.synth import SynthConfig, synthesize
from star_lib.travel.evaluate import evaluate_plan
from star_lib.travel.faults import FaultConfig
from star_lib.travel.tools import ToolRegistry
from star_lib.travel.world import World
from star_lib.types import ToolCall


@pytest.fixture(scope="module")
def world() -> World:
    return World.synthetic(seed=11, scale="tiny")


@pytest.fixture(scope="module")
def records(world: World) -> list:
    """Easy 3/5/7-day and medium records with reference plans in one tiny world."""
    easy = synthesize(world, SynthConfig(n=12, mix="easy", seed=3, splits=(1.0, 0.0, 0.0)))
    medium = synthesize(world, SynthConfig(n=6, mix="medium", seed=4, splits=(1.0, 0.0, 0.0)))
    return [r for result in (easy, medium) for split in result.splits.values() for r in split]


def test_compact_round_trip_reproduces_reference_plans(world: World, records: list) -> None:
    assert {r.days for r in records} >= {3, 5, 7}
    for record in records:
        text = encode_plan(record, record.reference_plan)
        assert len(text) < len(str([d.to_dict() for d in record.reference_plan])) / 2
        plan = expand_plan(text, record, world)
        assert plan == record.reference_plan
        assert evaluate_plan(record, plan, world, "strict").final_pass


def test_compact_expert_notes_say_what_the_plan_takes() -> None:
    from star_lib.agent.compact import _Step

    hotel = _Step(ToolCall("SearchAccommodation", {"city": "X"}), ("B",))
    assert expert_note(hotel, "A min3\nB min1\nC min1") == "A min3;B min1"
    food = _Step(ToolCall("SearchRestaurant", {"city": "X"}), ("P", "Q"))
    assert expert_note(food, "P\nQ\nR") == "P;Q"


def test_compact_expert_trajectories_pass_strict_evaluation(world: World, records: list) -> None:
    episodes = run_episodes(
        CompactExpert(), records, world, compact_rollout_config(reward="sum", max_turns=30)
    )
    assert [ep.reward for ep in episodes] == [1.0] * len(records)
    for ep in episodes:
        assert ep.messages[0]["content"] == "plan"
        assert ep.messages[1]["content"] == user_prompt(ep.query)
        assert ep.valid_tool_calls == ep.tool_calls > 0
        assert ep.plan == ep.query.reference_plan


def test_compact_expert_retries_through_injected_failures(world: World, records: list) -> None:
    faults = FaultConfig(failure_rate=0.3, seed=5)
    cfg = compact_rollout_config(reward="sum", max_turns=60)
    episodes = run_episodes(CompactExpert(), records[:6], world, cfg, faults)
    assert sum(sum(ep.faults.values()) for ep in episodes) > 0
    assert all(ep.reward == 1.0 for ep in episodes)


def test_compact_parse_turn_accepts_calls_and_answers_and_rejects_the_rest() -> None:
    call = parse_turn("<think>best F1</think><tool_call>SearchFlight|A b|C|2022-03-02</tool_call>")
    assert call == ToolCall("SearchFlight", {"departure": "A b", "destination": "C", "date": "2022-03-02"})
    answer = parse_turn("<think></think><answer>A>B|F1|-|-|-|-|-</answer>")
    assert isinstance(answer, FinalAnswer) and answer.text == "A>B|F1|-|-|-|-|-"
    assert parse_turn("<think>x</think><tool_call>Nope|1|2</tool_call>") == ToolCall(
        "Nope", {"arg0": "1", "arg1": "2"}
    )
    for bad in (
        "SearchCity|X",
        "<think>a</think>",
        "<think>a</think><answer> </answer>",
        "<think>a</think><tool_call>SearchCity|X</tool_call><answer>x</answer>",
        "<think>a</think><think>b</think><answer>x</answer>",
        "<think>a</think>junk<answer>x</answer>",
        None,
    ):
        assert isinstance(parse_turn(bad), FormatError), bad


def test_compact_tools_list_cheapest_first_and_keep_errors_as_data(world: World) -> None:
    tools = CompactTools(ToolRegistry(world))
    city = next(c for c in world.cities if len(world.accommodations(c)) > 1)
    hotels = tools.call("SearchAccommodation", {"city": city}).text.split("\n")
    rows = {h.name: h for h in world.accommodations(city)}
    names = [line.rsplit(" ", 1)[0] for line in hotels]
    assert set(names) == set(rows) and [rows[n].price for n in names] == sorted(
        h.price for h in rows.values()
    )
    assert all(
        line.endswith(f" min{int(rows[n].minimum_nights)}") for line, n in zip(hotels, names, strict=True)
    )
    food = tools.call("SearchRestaurant", {"city": city}).text.split("\n")
    cost = {r.name: r.average_cost for r in world.restaurants(city)}
    assert set(food) == set(cost) and [cost[x] for x in food] == sorted(cost.values())
    date = next(iter(world.flight_routes().items()))
    (a, b), dates = date
    flights = tools.call("SearchFlight", {"departure": a, "destination": b, "date": dates[0]}).text.split(
        "\n"
    )
    price = {f.number: f.price for f in world.flights(a, b, dates[0])}
    assert set(flights) == set(price) and [price[f] for f in flights] == sorted(price.values())
    missing = tools.call("SearchAccommodation", {"city": "Atlantis"})
    assert (
        not missing.ok and missing.error == "bad_arguments" and missing.text.startswith("error unknown city")
    )
    unknown = tools.call("Teleport", {})
    assert unknown.error == "unknown_tool"


def test_compact_expand_plan_maps_flights_by_the_days_cities(world: World, records: list) -> None:
    record = next(r for r in records if r.days == 3 and "Flight" in r.reference_plan[0].transportation)
    lines = encode_plan(record, record.reference_plan).split("\n")
    number = lines[0].split("|")[1]
    swapped = "\n".join([lines[0], lines[1], lines[2].replace(lines[2].split("|")[1], number)])
    plan = expand_plan(swapped, record, world)
    assert "Departure Time" not in plan[2].transportation  # the outbound flight does not fly home
    report = evaluate_plan(record, plan, world, "strict")
    assert not report.commonsense["is_valid_information_in_sandbox"].passed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A>B|F1|-|-|-|-", "has 6 fields"),
        ("A>B|plane|-|-|-|-|-", "transport must be"),
        ("A>B>C|-|-|-|-|-|-", "the city must be"),
        ("A>B||-|-|-|-|-", "is empty"),
    ],
)
def test_compact_expand_plan_rejects_malformed_plans(records: list, text: str, message: str) -> None:
    with pytest.raises(CompactPlanError, match=message):
        expand_plan(text, records[0], None)


def test_compact_plan_with_too_many_days_is_rejected(records: list) -> None:
    record = next(r for r in records if r.days == 3)
    with pytest.raises(CompactPlanError, match="has 4 days"):
        expand_plan("\n".join(["A|-|-|-|-|-|-"] * 4), record, None)


def test_compact_protocol_needs_no_tool_schemas_and_env_uses_it(world: World, records: list) -> None:
    with pytest.raises(ValueError, match="protocol must be one of"):
        RolloutConfig(protocol="telepathy")
    # the protocol name alone decides the opening: no schemas, the one-word system message, its own ask
    bare = TravelEnv(world, RolloutConfig(protocol="compact"))
    assert bare.reset(options={"query": records[0]})[0][0] == {"role": "system", "content": "plan"}
    assert bare.episode.tool_schemas == [] and bare.request_final_answer()[0]["content"] == "answer now"
    env = TravelEnv(world, compact_rollout_config())
    messages, _ = env.reset(options={"query": records[0]})
    assert messages[1]["content"].startswith(f"{records[0].org}>{records[0].dest}|")
    assert env.episode.tool_schemas == [] and env.episode.protocol == "compact"
    obs, *_ = env.step("no tags at all")
    assert obs[0]["content"].startswith("format error")
    react = TravelEnv(world, RolloutConfig())
    messages, _ = react.reset(options={"query": records[0]})
    assert "travel planner" in messages[0]["content"]  # the default protocol is untouched


def test_compact_user_prompt_lists_constraints(records: list) -> None:
    record = next(r for r in records if r.level == "medium")
    text = user_prompt(record)
    wants = {k for k, v in record.local_constraint.to_dict().items() if v is not None}
    assert wants and all(f"{k}=" in text for k in wants)
    assert user_prompt(replace(record, budget=123)).split("|")[3] == "123"


# ───────────────────── medium and hard tasks: what the lines carry, and the easy pin ─────────────────────

EASY_PIN = {
    "synthetic tasks": "f77dff00567b22c0ee1e55693aa6103519e38d14de2f0cb2c6935d7e84314afa",
    "synthetic": "53e918f9b1ba4883618ab5c2ce8a53477d4a9455ed86fde9be167efc2efb35e6",
    "faults": "cce114c72fa54ff02589d77e3621b7ca2d1f44770188d75a23d1a6c846756f29",
    "real tasks": "90e7462bbcc559d7e12ecaeb7282c8758e24aff9f014b086a4025408bfdfbf98",
    "real": "727606b2ef0b9dcc8979f305972b1f31d396f899f574970d14fa6b115dae6a29",
}
"""SHA-256 of the compact expert's easy trajectories (:func:`_digest`), computed on the protocol before the
medium/hard rendering existed. The ``… tasks`` digests pin the tasks themselves: when only they change (the
synthesiser or the data moved), recompute the trajectory digests on a protocol that is known unchanged."""


def _digest(items: list) -> str:
    """SHA-256 of episodes' messages (role and content of each, episode by episode) or of tasks' reprs."""
    import hashlib

    h = hashlib.sha256()
    for item in items:
        parts = (
            [f"{m['role']}\x00{m['content']}" for m in item.messages]
            if hasattr(item, "messages")
            else [repr(item)]
        )
        for part in parts:
            h.update(f"{part}\x01".encode())
        h.update(b"\x02")
    return h.hexdigest()


def _train_records(tp_dir) -> list:
    import json

    from star_lib.travel.plan import parse_plan
    from star_lib.types import QueryRecord

    rows = [json.loads(line) for line in (tp_dir / "train.jsonl").read_text().splitlines()]
    return [
        replace(QueryRecord.from_dict(r), idx=i, reference_plan=parse_plan(r["annotated_plan"]))
        for i, r in enumerate(rows)
    ]


@pytest.fixture(scope="module")
def real_train(real_db_dir, tp_dir) -> tuple:
    """The real database and the 45 real train queries with their gold plans."""
    return World.from_csv_dir(real_db_dir), _train_records(tp_dir)


def test_compact_easy_trajectories_are_byte_identical_to_before_the_constraint_rendering(real_train) -> None:
    from star_lib.synth.per_world import synthesize_per_world, world_seeds
    from star_lib.travel.worldset import WorldSet

    worlds = WorldSet("tiny")
    tasks = synthesize_per_world(
        worlds, world_seeds(0, "train", 12), per_world=2, mix="easy", options={"days_choices": [3, 5, 7]}
    )
    world, records = real_train
    easy = [r for r in records if r.level == "easy"]
    got = {"synthetic tasks": _digest(tasks), "real tasks": _digest(easy)}
    assert {k: got[k] for k in got} == {k: EASY_PIN[k] for k in got}, "the pinned tasks changed: see EASY_PIN"
    cfg = compact_rollout_config(reward="sum", max_turns=30)
    got["synthetic"] = _digest(run_episodes(CompactExpert(), tasks, worlds, cfg))
    faults = FaultConfig(failure_rate=0.3, corruption_rate=0.2, seed=5)
    noisy = run_episodes(
        CompactExpert(), tasks[:8], worlds, compact_rollout_config(reward="sum", max_turns=60), faults
    )
    assert sum(sum(ep.faults.values()) for ep in noisy) > 10  # the pin covers retries and garbled results
    got["faults"] = _digest(noisy)
    got["real"] = _digest(run_episodes(CompactExpert(), easy, world, cfg))
    assert got == EASY_PIN


def _lines(world: World, tool: str, args: dict, query=None) -> list[str]:
    return CompactTools(ToolRegistry(world), query).call(tool, args).text.split("\n")


def test_compact_lines_carry_a_constraints_attribute_only_when_the_task_has_it(world: World, records) -> None:
    from star_lib.types import LocalConstraint

    easy = next(r for r in records if r.level == "easy")
    city = max(world.cities, key=lambda c: len(world.accommodations(c)))
    hotels = {h.name: h for h in world.accommodations(city)}
    food = {r.name: r for r in world.restaurants(city)}
    assert len(hotels) > 2 and len(food) > 2
    plain_hotels = _lines(world, "SearchAccommodation", {"city": city})
    plain_food = _lines(world, "SearchRestaurant", {"city": city})
    # no constraint, one traveller (every easy task), or only a transportation constraint: nothing added
    no_flight = replace(easy, local_constraint=LocalConstraint(transportation="no flight"))
    for query in (None, easy, no_flight):
        assert _lines(world, "SearchAccommodation", {"city": city}, query) == plain_hotels
        assert _lines(world, "SearchRestaurant", {"city": city}, query) == plain_food
    assert all(len(line.split(" min")[-1].split()) == 1 for line in plain_hotels)

    room = replace(easy, local_constraint=LocalConstraint(room_type="not shared room"))
    words = {"Entire home/apt": "entire", "Private room": "private", "Shared room": "shared"}
    lines = _lines(world, "SearchAccommodation", {"city": city}, room)
    assert [line.rsplit(" ", 1)[0] for line in lines] == plain_hotels  # same order, one word more
    assert all(
        line.endswith(" " + words[hotels[n.rsplit(" min", 1)[0]].room_type])
        for line, n in zip(lines, plain_hotels, strict=True)
    )

    rule = replace(
        easy, local_constraint=LocalConstraint(house_rule="children under 10", room_type="entire room")
    )
    lines = _lines(world, "SearchAccommodation", {"city": city}, rule)
    for line, plain in zip(lines, plain_hotels, strict=True):
        row = hotels[plain.rsplit(" min", 1)[0]]
        flag = "no-children" if "No children under 10" in str(row.house_rules) else "children-ok"
        assert line == f"{plain} {words[row.room_type]} {flag}"
    assert {line.split()[-1] for line in lines} == {"no-children", "children-ok"}  # the world has both

    wanted = ("Mexican", "Chinese", "Italian")
    cuisine = replace(easy, local_constraint=LocalConstraint(cuisine=wanted))
    lines = _lines(world, "SearchRestaurant", {"city": city}, cuisine)
    assert [line.split(" +")[0] for line in lines] == plain_food
    for line, name in zip(lines, plain_food, strict=True):
        assert line == name + "".join(f" +{c}" for c in wanted if c in food[name].cuisines)
    assert any(" +" in line for line in lines) and not all(" +" in line for line in lines)


def test_compact_hotels_are_ordered_by_what_the_group_pays(world: World, records) -> None:
    import math

    easy = next(r for r in records if r.level == "easy")
    city = max(world.cities, key=lambda c: len(world.accommodations(c)))
    hotels = {h.name: h for h in world.accommodations(city)}
    for people in (1, 3, 7):
        lines = _lines(world, "SearchAccommodation", {"city": city}, replace(easy, people_number=people))
        paid = [
            (lambda h: h.price * math.ceil(people / h.maximum_occupancy))(hotels[line.rsplit(" min", 1)[0]])
            for line in lines
        ]
        assert paid == sorted(paid)
    orders = {
        people: _lines(world, "SearchAccommodation", {"city": city}, replace(easy, people_number=people))
        for people in (1, 7)
    }
    assert orders[1] != orders[7]  # the group order really differs from the nightly-price order here


@pytest.fixture(scope="module")
def hard_tasks() -> tuple:
    """Medium and hard tasks of 3, 5 and 7 days, each in its own tiny per-query world."""
    from star_lib.synth.per_world import synthesize_per_world, world_seeds
    from star_lib.travel.worldset import WorldSet

    worlds = WorldSet("tiny")
    options = {"days_choices": [3, 5, 7]}
    tasks = [
        t
        for level in ("medium", "hard")
        for t in synthesize_per_world(worlds, world_seeds(1, "eval", 15), 1, mix=level, options=options)
    ]
    return worlds, tasks


def _notes_after(ep, tool: str) -> list[str]:
    """The ``<think>`` note written right after each result of ``tool``."""
    msgs = ep.messages
    return [
        msgs[i + 2]["content"].split("<think>", 1)[1].split("</think>", 1)[0]
        for i, m in enumerate(msgs)
        if m["role"] == "assistant" and f"<tool_call>{tool}|" in m["content"] and i + 2 < len(msgs)
    ]


def _fits(line: str, wants, nights: int) -> bool:
    """Whether a rendered hotel line fits the task (minimum nights, room type, house rule)."""
    words = line.split(" min")[-1].split()
    ok = int(words[0]) <= nights
    if wants.room_type is not None:
        room = words[1]
        ok &= {"shared room": room == "shared", "not shared room": room != "shared"}.get(
            wants.room_type, room == wants.room_type.split()[0]
        )
    if wants.house_rule is not None:
        ok &= words[-1].endswith("-ok")
    return ok


def test_compact_expert_passes_medium_and_hard_tasks_and_its_notes_pick_by_attribute(hard_tasks) -> None:
    from star_lib.agent.compact import _hotel_name
    from star_lib.agent.expert import split_item

    worlds, tasks = hard_tasks
    assert {t.level for t in tasks} == {"medium", "hard"} and {t.days for t in tasks} == {3, 5, 7}
    cfg = compact_rollout_config(reward="sum", max_turns=30)
    episodes = run_episodes(CompactExpert(), tasks, worlds, cfg)
    assert [ep.reward for ep in episodes] == [1.0] * len(tasks)
    cuisine_tasks = 0
    for ep in episodes:
        wants, plan = ep.query.local_constraint, ep.query.reference_plan
        assert ep.plan == plan and ep.valid_tool_calls == ep.tool_calls and ep.format_errors == 0
        nights: dict[str, int] = {}
        for day in plan:
            stay = split_item(day.accommodation)
            if stay is not None:
                nights[stay[0]] = nights.get(stay[0], 0) + 1
        for note in _notes_after(ep, "SearchAccommodation"):
            *skipped, chosen = note.split(";")
            n = nights[_hotel_name(chosen)]
            assert _fits(chosen, wants, n) and not any(_fits(line, wants, n) for line in skipped), note
            if wants.room_type is not None or wants.house_rule is not None:
                assert chosen.split(" min")[-1].count(" ") >= 1  # the chosen line shows the attribute
        if wants.cuisine:
            cuisine_tasks += 1
            tags = {tag for note in _notes_after(ep, "SearchRestaurant") for tag in note.split(" +")[1:]}
            assert {t.split(";")[0] for t in tags} >= set(wants.cuisine), ep.messages
        calls = [m["content"] for m in ep.messages if m["role"] == "assistant"]
        if wants.transportation == "no flight":
            assert not any("SearchFlight|" in c for c in calls)
        if wants.transportation == "no self-driving":
            assert not any(c.endswith("|driving</tool_call>") for c in calls)
    assert cuisine_tasks > 3


def test_compact_expert_passes_the_real_train_queries_whose_gold_plan_passes(real_train) -> None:
    world, records = real_train
    cfg = compact_rollout_config(reward="sum", max_turns=40, max_context_tokens=1_000_000)
    episodes = run_episodes(CompactExpert(), records, world, cfg)
    gold = [evaluate_plan(r, r.reference_plan, world, "strict").final_pass for r in records]
    assert sum(gold) >= 44 and {r.level for r in records} == {"easy", "medium", "hard"}
    assert [ep.report.final_pass for ep in episodes] == gold
    # real names hold ", " and " | " (Peaceful, beautiful home away; San Luis Valley Museum | Alamosa)
    answers = [ep.answer_text for ep in episodes]
    assert any(" | " in a for a in answers) and any(", beautiful" in a for a in answers)


def test_compact_malformed_model_output_is_a_format_or_plan_error_never_a_crash(hard_tasks) -> None:
    import random

    from star_lib.agent.protocol import get_protocol

    worlds, tasks = hard_tasks
    task = next(t for t in tasks if t.level == "hard" and t.days == 7)
    world = worlds.for_query(task)
    pieces = [
        "<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>", "|", " | ", ">", ";",
        ", ", "-", "\n", "F123", "drive", "taxi", "SearchAccommodation", "SearchRestaurant", "SearchFlight",
        task.org, task.dest, "min2", "no-pets", "+Mexican", "entire", "", " ", "\x00", "é",
    ]  # fmt: skip
    rng = random.Random(0)
    protocol = get_protocol("compact")
    answers = 0
    for _ in range(400):
        wrap = rng.random() < 0.5  # half are answers whose plan text is garbage (no tags inside)
        text = "".join(rng.choice(pieces[6:] if wrap else pieces) for _ in range(rng.randint(0, 14)))
        if wrap:
            text = f"<think>{rng.choice(pieces[6:])}</think><answer>{text}</answer>"
        turn = protocol.parse_turn(text)
        assert isinstance(turn, (ToolCall, FinalAnswer, FormatError))
        if isinstance(turn, FinalAnswer):
            answers += 1
            plan, error = protocol.parse_plan(turn.text, task, world)
            assert (plan is None) != (error is None) and (error is None or isinstance(error, str))
        env = TravelEnv(world, compact_rollout_config(max_turns=3))
        env.reset(options={"query": task})
        env.step(text)
        ep = env.episode
        if isinstance(turn, FormatError):
            assert ep.format_errors == 1 and ep.format_error_reasons == [turn.reason]
        if isinstance(turn, FinalAnswer):
            assert env.done and (ep.plan is None) != (ep.plan_error is None) and ep.report is not None
    assert answers > 100
    # the tools render a constrained task's lines even for garbage arguments
    tools = CompactTools(ToolRegistry(world), task)
    for name in ("SearchAccommodation", "SearchRestaurant", "SearchFlight", "Nope"):
        for args in ({}, {"city": "|"}, {"city": task.dest, "x": 1}, "junk", None):
            assert tools.call(name, args).text


def test_compact_expand_plan_keeps_real_names_that_hold_a_comma_or_a_spaced_bar(records: list) -> None:
    record = next(r for r in records if r.days == 3)
    a, b = record.org, record.dest
    text = "\n".join(
        [
            f"{a}>{b}|drive|-|San Luis Valley Museum | Alamosa;Zoo|-|Cafe, {a}|Peaceful, beautiful home away",
            f"{b}|-|Deli|Park|Grill|Diner|Peaceful, beautiful home away",
            f"{b}>{a}|drive|Bakery, {b}|-|-|-|-",
        ]
    )
    plan = expand_plan(text, record, None)
    assert plan[0].attraction == f"San Luis Valley Museum | Alamosa, {b};Zoo, {b};"
    assert plan[0].dinner == f"Cafe, {a}"  # ends in one of the day's cities: kept
    assert plan[0].accommodation == plan[1].accommodation == f"Peaceful, beautiful home away, {b}"
    assert plan[2].breakfast == f"Bakery, {b}"
    with pytest.raises(CompactPlanError, match="has 8 fields"):  # a bar without spaces still separates
        expand_plan(f"{a}>{b}|drive|-|Museum|Alamosa|-|-|-", record, None)


def test_compact_env_renders_each_episode_for_its_own_task(world: World, records: list) -> None:
    from star_lib.types import LocalConstraint

    easy = next(r for r in records if r.level == "easy")
    room = replace(easy, local_constraint=LocalConstraint(room_type="entire room"))
    city = max(world.cities, key=lambda c: len(world.accommodations(c)))
    env = TravelEnv(world, compact_rollout_config(), faults=FaultConfig(seed=3))
    seen = []
    for query in (easy, room, easy):
        env.reset(options={"query": query})
        obs, *_ = env.step(f"<think></think><tool_call>SearchAccommodation|{city}</tool_call>")
        seen.append(obs[0]["content"])
        assert (
            env.base_tools.query is query and env.tools.inner is env.base_tools
        )  # faults wrap the task's tools
    assert seen[0] == seen[2] != seen[1] and all(
        line.endswith(("entire", "private", "shared")) for line in seen[1].split("\n")
    )
