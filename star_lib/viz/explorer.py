"""The trajectory explorer: pick a run and an episode, step through its turns, read the plan and its verdicts.

:class:`TrajectoryExplorer` reads ``rollouts.parquet`` files (one row per episode: ``star_lib.agent``'s
``episode_row`` columns, plus ``messages`` — the conversation as JSON — where the stage stored it) or
in-memory episodes, and shows:

- the episode header (query, termination, tool calls, faults, reward);
- the turns one at a time — the model's ``<think>``, its tool call or answer, the observation it got back,
  with injected service failures, tool errors and format errors marked — and a strip of all turns; a turn
  the parser refused shows the raw text the model wrote beside the parser's error (once);
- the final plan as a day-by-day table whose cells are coloured by the verdicts of the checks that read
  them (a failed check whose reason names a day colours only that day);
- every constraint verdict (commonsense and hard), coloured, with the evaluator's reason when stored.

A failure filter narrows the episode list to one failure type (no plan, turn limit, format errors, tool
faults, or a single failed check), and a termination filter to the episodes that ended one way (answer,
turn limit, context limit, malformed); a stage filter picks the rows of one stage of a run's rollouts (a
grid run opens on its ``eval`` episodes, which carry transcripts, not the teacher's rows). The turn slider
counts turns from 1, as its label does. All state lives in the widgets' values and every view is an HTML
string computed from them (:meth:`TrajectoryExplorer.html`), so tests drive it without a browser and static
reports show a snapshot (the ``text/html`` part of its display bundle).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from star_lib.types import COMMONSENSE_KEYS, HARD_KEYS, PLAN_KEYS

if TYPE_CHECKING:
    import polars as pl

PASS, FAIL, NA = "#d4edda", "#f8d7da", "#eeeeee"
"""Cell colours: verdict passed, failed, not applicable."""
CHECK_COLUMNS: dict[str, tuple[str, ...]] = {
    "is_reasonable_visiting_city": ("current_city",),
    "is_valid_restaurants": ("breakfast", "lunch", "dinner"),
    "is_valid_attractions": ("attraction",),
    "is_valid_accommodation": ("accommodation",),
    "is_valid_transportation": ("transportation",),
    "is_valid_information_in_current_city": (
        "current_city",
        "transportation",
        "breakfast",
        "attraction",
        "lunch",
        "dinner",
        "accommodation",
    ),
    "is_valid_information_in_sandbox": (
        "transportation",
        "breakfast",
        "attraction",
        "lunch",
        "dinner",
        "accommodation",
    ),
    "is_not_absent": ("transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation"),
    "valid_cost": ("transportation", "breakfast", "lunch", "dinner", "accommodation"),
    "valid_room_rule": ("accommodation",),
    "valid_cuisine": ("breakfast", "lunch", "dinner"),
    "valid_room_type": ("accommodation",),
    "valid_transportation": ("transportation",),
}
"""Plan columns each check reads (spec §5): a failed check colours these cells red."""
FAILURE_FILTERS: tuple[str, ...] = (
    "all",
    "passed",
    "failed",
    "no plan",
    "turn limit",
    "context limit",
    "malformed",
    "format errors",
    "tool faults",
    *(f"cs/{k}" for k in COMMONSENSE_KEYS),
    *(f"hard/{k}" for k in HARD_KEYS),
)
"""Episode filters: everything, final pass / fail, a termination or error kind, or one failed check."""
TERMINATION_FILTERS: tuple[str, ...] = ("any", "answer", "turn_limit", "context_limit", "malformed")
"""Termination filter: every episode, or those that ended one way (``star_lib.types.Termination`` values)."""
ALL_STAGES = "all"
"""Stage filter value: rows of every stage."""
PREFERRED_STAGE = "eval"
"""The stage a run opens on when its rollouts have one: evaluation episodes, with their transcripts."""
_INJECTED_FAILURE = re.compile(
    r"^Error: (.+ (service temporarily unavailable|request timed out|rate limit exceeded"
    r"|internal server error)|connection to the .+ service was reset)",
    re.S,
)
"""The fault injector's service errors (``star_lib.travel.faults``); the compact protocol keeps their first
clause, so the pattern does not need the trailing "Please retry."."""
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_DAY = re.compile(r"\bday (\d+)\b", re.I)


# ───────────────────────────── transcript ─────────────────────────────


@dataclass(frozen=True)
class Turn:
    """One assistant turn and what came back."""

    index: int
    """Turn number (0-based)."""
    think: str
    """The ``<think>`` text (empty when absent)."""
    kind: str
    """``tool_call`` | ``answer`` | ``format_error``."""
    action: str
    """The call as ``Name {arguments}``, the answer text, or the format error's reason."""
    content: str
    """The raw assistant text."""
    observation: str | None
    """What the environment returned (None after the answer)."""
    observation_kind: str | None
    """``ok`` | ``injected failure`` | ``tool error`` | ``format error`` | ``prompt`` | None."""


def _observation_kind(role: str, text: str) -> str:
    if role == "user":
        return "prompt"
    if text.lower().startswith("format error:"):
        return "format error"
    if _INJECTED_FAILURE.match(text.strip()):
        return "injected failure"
    if text.lower().startswith("error"):
        return "tool error"
    return "ok"


def parse_transcript(messages: Sequence[Mapping[str, Any]], protocol: str | None = None) -> list[Turn]:
    """Split a conversation into turns with the parser of the episode's protocol.

    Args:
        messages: The stored conversation.
        protocol: The episode's protocol (the ``protocol`` column of its rollouts row); None for a row
            without one: the protocol whose system message opens the conversation, else ``react``.

    """
    from star_lib.agent.protocol import FinalAnswer, FormatError, detect_protocol, get_protocol

    msgs = list(messages)
    parser = get_protocol(protocol or detect_protocol(msgs))
    turns: list[Turn] = []
    for i, message in enumerate(msgs):
        if message.get("role") != "assistant":
            continue
        text = str(message.get("content") or "")
        parsed = parser.parse_turn(text)
        think_match = _THINK.search(text)
        think = think_match.group(1).strip() if think_match else ""
        if isinstance(parsed, FormatError):
            kind, action = "format_error", parsed.reason
        elif isinstance(parsed, FinalAnswer):
            kind, action = "answer", parsed.text
        else:
            kind, action = "tool_call", f"{parsed.name} {json.dumps(parsed.arguments, ensure_ascii=False)}"
        following = msgs[i + 1] if i + 1 < len(msgs) and msgs[i + 1].get("role") != "assistant" else None
        obs = str(following.get("content") or "") if following else None
        obs_kind = _observation_kind(str(following.get("role")), obs or "") if following else None
        turns.append(Turn(len(turns), think, kind, action, text, obs, obs_kind))
    return turns


# ───────────────────────────── verdicts and plan ─────────────────────────────


@dataclass(frozen=True)
class Verdict:
    """One constraint check of an episode."""

    check: str
    """Check name (``is_valid_restaurants``, ``valid_cost`` …)."""
    group: str
    """``commonsense`` | ``hard``."""
    passed: bool | None
    """True / False, None when not applicable (or skipped)."""
    reason: str | None = None
    """The evaluator's reason for a failure, when stored."""

    @property
    def word(self) -> str:
        """``pass`` | ``fail`` | ``n/a``."""
        return "n/a" if self.passed is None else ("pass" if self.passed else "fail")

    @property
    def days(self) -> tuple[int, ...]:
        """Days (1-based) the reason names; empty when it names none (the whole plan)."""
        return tuple(int(d) for d in _DAY.findall(self.reason or ""))


def episode_verdicts(row: Mapping[str, Any]) -> list[Verdict]:
    """Return the episode's verdicts: from its ``report`` JSON (with reasons), else ``cs/*``, ``hard/*``."""
    report = row.get("report")
    if isinstance(report, str) and report:
        data = json.loads(report)
        out = [
            Verdict(k, "commonsense", v.get("passed"), v.get("reason"))
            for k, v in (data.get("commonsense") or {}).items()
        ]
        out += [
            Verdict(k, "hard", v.get("passed"), v.get("reason")) for k, v in (data.get("hard") or {}).items()
        ]
        return out
    out = [Verdict(k, "commonsense", row.get(f"cs/{k}")) for k in COMMONSENSE_KEYS if f"cs/{k}" in row]
    out += [Verdict(k, "hard", row.get(f"hard/{k}")) for k in HARD_KEYS if f"hard/{k}" in row]
    return out


def report_verdicts(report: Any) -> list[Verdict]:
    """Return the verdicts of an :class:`~star_lib.types.EvaluationReport` (with reasons)."""
    from dataclasses import asdict

    return episode_verdicts({"report": json.dumps(asdict(report), default=str)})


def verdict_table(verdicts: Sequence[Verdict]) -> pl.DataFrame:
    """Return verdicts as a table: ``group``, ``check``, ``verdict`` (pass / fail / n/a), ``reason``."""
    import polars as pl

    rows = [{"group": v.group, "check": v.check, "verdict": v.word, "reason": v.reason} for v in verdicts]
    schema = {"group": pl.String, "check": pl.String, "verdict": pl.String, "reason": pl.String}
    return pl.DataFrame(rows, schema=schema)


def check_pass_rates(episodes: Mapping[str, Sequence[Any]]) -> pl.DataFrame:
    """Return, per policy and check, the share of episodes where the check applied and passed.

    A check that was not applicable (or skipped: hard checks need a complete, in-sandbox plan) does not
    count; ``final_pass`` counts every episode.
    """
    import polars as pl

    frames = []
    for name, eps in episodes.items():
        table = episodes_table(eps)
        checks = [c for c in table.columns if c.startswith(("cs/", "hard/"))] + ["final_pass"]
        rows = [{"policy": name, "check": c, "pass rate": table[c].cast(pl.Float64).mean()} for c in checks]
        frames.append(
            pl.DataFrame(rows, schema={"policy": pl.String, "check": pl.String, "pass rate": pl.Float64})
        )
    return pl.concat(frames).drop_nulls("pass rate") if frames else pl.DataFrame()


def plan_days(plan: Any) -> list[dict[str, Any]]:
    """Return the plan's days as dicts (official keys) from its JSON text; [] when there is no plan."""
    if plan is None or plan == "":
        return []
    days = json.loads(plan) if isinstance(plan, str) else plan
    return [dict(d) for d in days] if isinstance(days, list) else []


def cell_verdicts(verdicts: Sequence[Verdict], day: int, column: str) -> list[Verdict]:
    """Return the verdicts that read plan cell (``day`` 1-based, ``column``)."""
    out = []
    for v in verdicts:
        if column not in CHECK_COLUMNS.get(v.check, ()):
            continue
        if v.passed is False and v.days and day not in v.days:
            continue  # the failure is on another day
        out.append(v)
    return out


def failure_types(row: Mapping[str, Any]) -> set[str]:
    """Every :data:`FAILURE_FILTERS` entry that matches the episode (``all`` always does)."""
    types = {"all", "passed" if row.get("final_pass") else "failed"}
    if row.get("plan") in (None, ""):
        types.add("no plan")
    termination = row.get("termination")
    if termination in ("turn_limit", "context_limit"):
        types.add(termination.replace("_", " "))
    if row.get("malformed"):
        types.add("malformed")
    if (row.get("format_errors") or 0) > 0:
        types.add("format errors")
    faults = row.get("faults")
    if faults and sum(json.loads(faults).values() if isinstance(faults, str) else faults.values()) > 0:
        types.add("tool faults")
    for v in episode_verdicts(row):
        if v.passed is False:
            types.add(f"{'cs' if v.group == 'commonsense' else 'hard'}/{v.check}")
    return types


# ───────────────────────────── HTML views ─────────────────────────────

_TABLE = 'style="border-collapse:collapse;font-size:12px;margin:4px 0"'
_TD = "padding:3px 6px;border:1px solid #ccc;vertical-align:top"


def _esc(text: Any) -> str:
    return html.escape("" if text is None else str(text))


def render_header(row: Mapping[str, Any], label: str = "") -> str:
    """Episode summary: route, level, termination, counts, faults, outcome."""
    outcome = "final pass" if row.get("final_pass") else "failed"
    colour = PASS if row.get("final_pass") else FAIL
    facts = [
        ("route", f"{row.get('org')} → {row.get('dest')}, {row.get('days')} days, {row.get('level')}"),
        ("termination", row.get("termination")),
        ("turns", row.get("turns")),
        ("tool calls", f"{row.get('tool_calls')} ({row.get('valid_tool_calls')} valid)"),
        ("format errors", row.get("format_errors")),
        ("faults", row.get("faults")),
        ("reward", row.get("run_reward", row.get("reward"))),
        ("stage", row.get("stage")),
    ]
    cells = "".join(
        f'<td style="{_TD}"><b>{_esc(k)}</b><br>{_esc(v)}</td>' for k, v in facts if v is not None
    )
    return (
        f'<div class="star-episode"><div style="background:{colour};padding:4px 8px;font-weight:bold">'
        f"{_esc(label)} — {outcome}</div><table {_TABLE}><tr>{cells}</tr></table></div>"
    )


_KIND_COLOURS = {
    "ok": PASS,
    "injected failure": "#ffd8a8",
    "tool error": FAIL,
    "format error": FAIL,
    "prompt": "#e7f0ff",
    None: "#e7f0ff",
}


def render_turn(turns: Sequence[Turn], current: int) -> str:
    """Render a strip of all turns (current outlined) and the current turn in full."""
    if not turns:
        return (
            '<div class="star-turn"><i>No transcript stored for this episode (its rollouts file has no '
            "<code>messages</code> column); the plan and verdicts below are complete.</i></div>"
        )
    current = max(0, min(current, len(turns) - 1))
    chips = []
    for t in turns:
        colour = _KIND_COLOURS.get(t.observation_kind, "#e7f0ff") if t.kind != "format_error" else FAIL
        border = "2px solid #000" if t.index == current else "1px solid #aaa"
        tip = _esc((t.content if t.kind == "format_error" else t.action)[:80])  # what the model wrote
        chips.append(
            f'<span title="{tip}" style="display:inline-block;min-width:18px;text-align:center;'
            f'margin:1px;padding:1px 3px;background:{colour};border:{border};font-size:11px">'
            f"{t.index + 1}</span>"
        )
    t = turns[current]
    obs_kind = t.observation_kind or ""
    mark = f' <b style="color:#b35900">[{_esc(obs_kind)}]</b>' if obs_kind not in ("ok", "", "prompt") else ""
    echo = t.kind == "format_error" and obs_kind == "format error"  # the parser's error sent back
    obs = (
        ""
        if t.observation is None or echo
        else f'<div style="background:{_KIND_COLOURS.get(t.observation_kind, NA)};padding:4px;margin:4px 0">'
        f'<b>observation</b>{mark}<pre style="white-space:pre-wrap;margin:2px 0">{_esc(t.observation)}</pre>'
        "</div>"
    )
    if t.kind == "format_error":
        body = render_malformed(t)
    else:
        body = (
            f'<div style="color:#555;font-style:italic;margin:2px 0">think: {_esc(t.think) or "–"}</div>'
            f'<pre style="white-space:pre-wrap;background:#f6f6f6;padding:4px;margin:2px 0">'
            f"{_esc(t.action)}</pre>"
        )
    return (
        f'<div class="star-turn"><div>{"".join(chips)}</div>'
        f'<div style="margin-top:6px"><b>turn {t.index + 1} of {len(turns)}</b> · {_esc(t.kind)}</div>'
        f"{body}{obs}</div>"
    )


def render_malformed(turn: Turn) -> str:
    """Render a turn the parser refused: the raw text the model wrote beside the parser's error."""
    raw = turn.content if turn.content.strip() else "(empty reply)"
    return (
        '<div class="star-malformed" style="display:flex;gap:8px;align-items:flex-start;margin:2px 0">'
        '<div style="flex:3;min-width:0"><b>what the model wrote</b>'
        '<pre class="star-raw" style="white-space:pre-wrap;background:#f6f6f6;padding:4px;margin:2px 0">'
        f"{_esc(raw)}</pre></div>"
        f'<div style="flex:2;min-width:0;background:{FAIL};padding:4px"><b>parser error</b>'
        f'<pre class="star-parse-error" style="white-space:pre-wrap;margin:2px 0">{_esc(turn.action)}</pre>'
        "</div></div>"
    )


def render_plan(row: Mapping[str, Any], verdicts: Sequence[Verdict]) -> str:
    """Render the plan day by day, each cell coloured by the checks that read it (hover: their verdicts)."""
    days = plan_days(row.get("plan"))
    if not days:
        reason = row.get("plan_error") or "no plan was delivered"
        return f'<div class="star-plan"><i>No plan: {_esc(reason)}</i></div>'
    head = "".join(f'<th style="{_TD};background:#f0f0f0">{_esc(k)}</th>' for k in PLAN_KEYS)
    rows = []
    for number, day in enumerate(days, start=1):
        cells = []
        for key in PLAN_KEYS:
            related = cell_verdicts(verdicts, number, key)
            states = {v.passed for v in related}
            colour = FAIL if False in states else (PASS if True in states else NA)
            tip = "; ".join(f"{v.check}: {v.word}" + (f" ({v.reason})" if v.reason else "") for v in related)
            cells.append(
                f'<td style="{_TD};background:{colour}" title="{_esc(tip)}">{_esc(day.get(key, ""))}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="star-plan"><table {_TABLE}><tr>{head}</tr>{"".join(rows)}</table></div>'


def render_verdicts(verdicts: Sequence[Verdict]) -> str:
    """Every constraint verdict, coloured (pass / fail / n/a), with its reason."""
    if not verdicts:
        return '<div class="star-verdicts"><i>No verdicts stored for this episode.</i></div>'
    rows = []
    for v in verdicts:
        colour = {"pass": PASS, "fail": FAIL}.get(v.word, NA)
        rows.append(
            f'<tr><td style="{_TD}">{_esc(v.group)}</td><td style="{_TD}">{_esc(v.check)}</td>'
            f'<td style="{_TD};background:{colour}" class="verdict-{v.word}">{v.word}</td>'
            f'<td style="{_TD}">{_esc(v.reason or "")}</td></tr>'
        )
    head = "".join(
        f'<th style="{_TD};background:#f0f0f0">{h}</th>' for h in ("group", "check", "verdict", "reason")
    )
    return f'<div class="star-verdicts"><table {_TABLE}><tr>{head}</tr>{"".join(rows)}</table></div>'


# ───────────────────────────── sources ─────────────────────────────


def rollout_files(root: str | Path) -> dict[str, Path]:
    """``grid/run`` → ``rollouts.parquet`` of every run under a runs folder that has one."""
    root = Path(root)
    found = {}
    for path in sorted(root.glob("*/*/rollouts.parquet")):
        if not path.parent.parent.name.startswith(("_", ".")):
            found[f"{path.parent.parent.name}/{path.parent.name}"] = path
    return found


def episodes_table(episodes: Sequence[Any]) -> pl.DataFrame:
    """Convert in-memory episodes (``star_lib.agent``) to a rollouts table with ``messages``, ``report``."""
    from dataclasses import asdict

    import polars as pl

    from star_lib.agent.rollout import episodes_frame

    return episodes_frame(list(episodes)).with_columns(
        pl.Series(
            "messages", [json.dumps(ep.messages, ensure_ascii=False) for ep in episodes], dtype=pl.String
        ),
        pl.Series(
            "report",
            [None if ep.report is None else json.dumps(asdict(ep.report), default=str) for ep in episodes],
            dtype=pl.String,
        ),
    )


# ───────────────────────────── the widget ─────────────────────────────


class TrajectoryExplorer:
    """ipywidgets explorer over one or more rollouts tables (see the module docstring).

    Args:
        sources: Run label → rollouts table or ``rollouts.parquet`` path; or a runs folder (every run with a
            rollouts file); or a single table / path.

    Example:
        >>> explorer = TrajectoryExplorer("runs")          # doctest: +SKIP
        >>> explorer.failure.value = "tool faults"         # doctest: +SKIP
        >>> explorer                                        # doctest: +SKIP

    """

    def __init__(self, sources: Mapping[str, Any] | str | Path | pl.DataFrame) -> None:
        import ipywidgets as w

        self.sources = self._normalise(sources)
        if not self.sources:
            raise ValueError(
                "no rollouts to explore: give a runs folder with */*/rollouts.parquet, a parquet "
                "path, or a mapping of run name → rollouts table"
            )
        self._frames: dict[str, pl.DataFrame] = {}
        self._transcripts: dict[tuple[str, int], list[Turn]] = {}
        self._busy = False
        first = next(iter(self.sources))
        self.run = w.Dropdown(
            options=list(self.sources), value=first, description="run", layout=w.Layout(width="520px")
        )
        self.failure = w.Dropdown(options=list(FAILURE_FILTERS), value="all", description="filter")
        self.termination = w.Dropdown(
            options=list(TERMINATION_FILTERS), value="any", description="termination"
        )
        self.stage = w.Dropdown(options=[ALL_STAGES], value=ALL_STAGES, description="stage")
        self.episode = w.Dropdown(options=[], description="episode", layout=w.Layout(width="520px"))
        self.turn = w.IntSlider(value=1, min=1, max=1, description="turn")  # turn numbers, as labelled
        self.prev_button = w.Button(description="◀ prev", layout=w.Layout(width="80px"))
        self.next_button = w.Button(description="next ▶", layout=w.Layout(width="80px"))
        self.header_view = w.HTML()
        self.turn_view = w.HTML()
        self.plan_view = w.HTML()
        self.verdict_view = w.HTML()
        self.count = w.HTML()
        self.prev_button.on_click(lambda _: self.step(-1))
        self.next_button.on_click(lambda _: self.step(+1))
        self.run.observe(lambda _: self._refresh_stages(), names="value")
        self.stage.observe(lambda _: None if self._busy else self._refresh_episodes(), names="value")
        self.failure.observe(lambda _: self._refresh_episodes(), names="value")
        self.termination.observe(lambda _: self._refresh_episodes(), names="value")
        self.episode.observe(lambda _: None if self._busy else self._show_episode(), names="value")
        self.turn.observe(lambda _: self._show_turn(), names="value")
        self.widget = w.VBox(
            [
                w.HBox([self.run, self.stage, self.failure, self.termination]),
                w.HBox([self.episode, self.count]),
                self.header_view,
                w.HBox([self.prev_button, self.turn, self.next_button]),
                self.turn_view,
                w.HTML("<b>plan</b> (cells coloured by the checks that read them; hover for verdicts)"),
                self.plan_view,
                w.HTML("<b>constraint verdicts</b>"),
                self.verdict_view,
            ]
        )
        self._refresh_stages()

    # ── construction ──

    @staticmethod
    def _normalise(sources: Any) -> dict[str, Any]:
        import polars as pl

        if isinstance(sources, pl.DataFrame):
            return {"episodes": sources}
        if isinstance(sources, (str, Path)):
            path = Path(sources)
            if path.is_file():
                return {path.parent.name or path.name: path}
            if path.is_dir():
                return dict(rollout_files(path))
            raise FileNotFoundError(f"{path} is neither a rollouts.parquet file nor a runs folder")
        return dict(sources)

    @classmethod
    def from_results(cls, root: str | Path) -> TrajectoryExplorer:
        """Every run under a runs folder that has a ``rollouts.parquet``."""
        return cls(Path(root))

    @classmethod
    def from_episodes(cls, episodes: Mapping[str, Sequence[Any]]) -> TrajectoryExplorer:
        """In-memory episodes, e.g. ``{"expert": run_episodes(...)}`` (transcripts and reasons included)."""
        return cls({name: episodes_table(eps) for name, eps in episodes.items()})

    # ── data ──

    def frame(self, run: str | None = None) -> pl.DataFrame:
        """Return the rollouts table of a run (read once)."""
        import polars as pl

        run = run or self.run.value
        if run not in self._frames:
            source = self.sources[run]
            self._frames[run] = source if isinstance(source, pl.DataFrame) else pl.read_parquet(source)
        return self._frames[run]

    def row(self, index: int | None = None) -> dict[str, Any]:
        """Return the selected episode's row (or row ``index`` of the current run)."""
        index = self.episode.value if index is None else index
        return self.frame().row(int(index), named=True) if index is not None else {}

    def episode_indices(self) -> list[int]:
        """Rows of the current run that pass the stage, failure and termination filters."""
        wanted, ending, stage = self.failure.value, self.termination.value, self.stage.value
        return [
            i
            for i, row in enumerate(self.frame().iter_rows(named=True))
            if wanted in failure_types(row)
            and ending in ("any", row.get("termination"))
            and stage in (ALL_STAGES, row.get("stage"))
        ]

    def stages(self, run: str | None = None) -> list[str]:
        """Return the stages of a run's rows (``stage`` column, in order of appearance); [] without one."""
        frame = self.frame(run)
        if "stage" not in frame.columns:
            return []
        return [str(s) for s in frame["stage"].drop_nulls().unique(maintain_order=True).to_list()]

    def transcript(self, index: int | None = None) -> list[Turn]:
        """Return the selected episode's turns ([] when the run stored no messages)."""
        index = self.episode.value if index is None else index
        key = (self.run.value, int(index) if index is not None else -1)
        if key not in self._transcripts:
            row = self.row(index) if index is not None else {}
            raw = row.get("messages")
            self._transcripts[key] = parse_transcript(json.loads(raw), row.get("protocol")) if raw else []
        return self._transcripts[key]

    def _label(self, index: int, row: Mapping[str, Any]) -> str:
        outcome = "pass" if row.get("final_pass") else "fail"
        stage = f" · {row['stage']}" if row.get("stage") else ""
        return (
            f"#{index} {row.get('org')}→{row.get('dest')} {row.get('days')}d {row.get('level')} · "
            f"{row.get('termination')} · {outcome}{stage}"
        )

    # ── updates ──

    def _refresh_stages(self) -> None:
        """Offer the new run's stages; keep the chosen stage, else open on ``eval``."""
        stages = self.stages()
        old = self.stage.value
        target = (
            old
            if old != ALL_STAGES and old in stages
            else (PREFERRED_STAGE if PREFERRED_STAGE in stages else ALL_STAGES)
        )
        self._busy = True
        try:
            self.stage.options = [ALL_STAGES, *stages]
            self.stage.value = target
        finally:
            self._busy = False
        self._refresh_episodes()

    def _refresh_episodes(self) -> None:
        indices = self.episode_indices()
        frame = self.frame()
        options = [(self._label(i, frame.row(i, named=True)), i) for i in indices]
        self.count.value = f"<span style='padding:0 8px'>{len(indices)} of {frame.height} episodes</span>"
        old = self.episode.value
        self._busy = True  # one render after both changes, not one per change
        try:
            self.episode.options = options
            target = old if old in indices else (indices[0] if indices else None)
            if self.episode.value != target:
                self.episode.value = target
        finally:
            self._busy = False
        self._show_episode()

    def _show_episode(self) -> None:
        index = self.episode.value
        if index is None:
            self.header_view.value = "<i>No episode matches this filter.</i>"
            self.turn_view.value = self.plan_view.value = self.verdict_view.value = ""
            self.turn.value, self.turn.max = 1, 1
            return
        row = self.row()
        verdicts = episode_verdicts(row)
        self.header_view.value = render_header(row, f"{self.run.value} #{index}")
        self.plan_view.value = render_plan(row, verdicts)
        self.verdict_view.value = render_verdicts(verdicts)
        turns = self.transcript()
        if self.turn.value != 1:
            self.turn.value = 1  # observer re-renders the turn
            self.turn.max = max(1, len(turns))
        else:
            self.turn.max = max(1, len(turns))
            self._show_turn()

    def _show_turn(self) -> None:
        self.turn_view.value = (
            render_turn(self.transcript(), self.turn.value - 1) if self.episode.value is not None else ""
        )

    def step(self, delta: int) -> None:
        """Move ``delta`` turns forward (negative: back), staying inside the episode."""
        self.turn.value = max(self.turn.min, min(self.turn.max, self.turn.value + delta))

    def select(
        self,
        run: str | None = None,
        failure: str | None = None,
        episode: int | None = None,
        turn: int | None = None,
        termination: str | None = None,
        stage: str | None = None,
    ) -> TrajectoryExplorer:
        """Set any of the widgets' values (as a user would: run, filters, episode, turn); returns self.

        ``turn`` is the turn number the label shows (1 = the first turn); ``stage`` one of the run's stages
        or ``all``.
        """
        if run is not None:
            self.run.value = run
        if stage is not None:
            if stage not in self.stage.options:
                raise ValueError(f"stage {stage!r} is not one of this run's {list(self.stage.options)}")
            self.stage.value = stage
        if failure is not None:
            self.failure.value = failure
        if termination is not None:
            if termination not in TERMINATION_FILTERS:
                raise ValueError(f"termination {termination!r} is not one of {list(TERMINATION_FILTERS)}")
            self.termination.value = termination
        if episode is not None:
            self.episode.value = episode
        if turn is not None:
            self.turn.value = turn
        return self

    # ── output ──

    def html(self) -> str:
        """Render the current state as one self-contained HTML fragment (what a static report shows)."""
        return (
            f'<div class="star-explorer"><div><b>run</b> {_esc(self.run.value)} · <b>stage</b> '
            f"{_esc(self.stage.value)} · <b>filter</b> "
            f"{_esc(self.failure.value)} · <b>termination</b> {_esc(self.termination.value)} · "
            f"{self.count.value}</div>{self.header_view.value}"
            f"{self.turn_view.value}<div><b>plan</b></div>{self.plan_view.value}"
            f"<div><b>constraint verdicts</b></div>{self.verdict_view.value}</div>"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """Live widget in JupyterLab; the HTML snapshot where widgets cannot run (nbconvert, GitHub)."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/html"] = self.html()
        return bundle
