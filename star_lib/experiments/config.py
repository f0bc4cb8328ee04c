"""The experiment config: every axis of the study, the stages to run, and each stage's own config.

An experiment is one YAML file::

    name: reward-sum
    model: tiny                 # tiny | qwen2.5-1.5b | qwen2.5-3b | qwen2.5-7b
    reward: curriculum          # sum | macro | success | curriculum | milestone
    curriculum_boundaries: [0.3333, 0.6667]
    algorithm: grpo             # grpo | dapo | arpo
    rl_data_size: 1000          # RL prompts
    difficulty: "4:3:3"         # easy | medium | hard | "E:M:H" ratio
    tool_failure_rate: 0.0
    tool_latency_ms: 0.0
    tool_corruption_rate: 0.0
    seed: 0
    protocol: react             # react | compact (the episode protocol every stage speaks)
    stages: [world, synth, teacher, sft, rl, eval]   # default: all that can run (qa-eval needs qa_eval data)
    synth: {n_test: 40}         # nested per-stage config (see star_lib.experiments.stages)

The axes live at the top level; a stage reads the axes it needs (``build_registry().get(name).axes``)
and its own nested section. Unknown keys and values raise :class:`ConfigError` naming the key and what
is allowed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from star_lib.agent.config import PROTOCOLS
from star_lib.io import read_yaml, write_yaml_atomic
from star_lib.rewards import REWARD_NAMES
from star_lib.train.algorithms import ALGORITHMS
from star_lib.train.models import PRESETS

MODEL_PRESETS: tuple[str, ...] = tuple(PRESETS)
"""Model presets (:data:`star_lib.train.models.PRESETS`); the paper trains Qwen2.5-{1.5B,3B,7B}-Instruct."""
STAGE_NAMES: tuple[str, ...] = ("world", "synth", "teacher", "sft", "rl", "eval", "qa-eval")
"""The pipeline, in order (DESIGN.md)."""
DIFFICULTY_PRESETS: dict[str, tuple[int, int, int]] = {
    "easy": (1, 0, 0),
    "medium": (0, 1, 0),
    "hard": (0, 0, 1),
}
"""Single-level difficulty settings as easy:medium:hard weights; any ``"E:M:H"`` ratio is also accepted."""
DEFAULT_DIFFICULTY = "4:3:3"
"""The paper's RL default mixture (spec §7)."""
_RATIO = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*:\s*(\d+)\s*$")
FOLDER_NAME = re.compile(r"(?!\.+$)[A-Za-z0-9._=-]+")
"""A run or grid name: one folder name of letters, digits and ``._=-`` (not ``.`` or ``..``: no way out)."""
NAME_RULE = "use letters, digits and ._=- only (not only dots)"
"""What :data:`FOLDER_NAME` allows, for error messages."""


class ConfigError(ValueError):
    """A config key or value is not allowed; the message names it and what is allowed."""


def _stage_key(stage: str) -> str:
    """YAML/attribute name of a stage's nested section (``qa-eval`` → ``qa_eval``)."""
    return stage.replace("-", "_")


def parse_difficulty(value: Any) -> tuple[int, int, int]:
    """Parse a difficulty setting into easy:medium:hard integer weights.

    >>> parse_difficulty("4:3:3")
    (4, 3, 3)
    >>> parse_difficulty("hard")
    (0, 0, 1)

    Raises:
        ConfigError: naming the allowed forms.

    """
    text = str(value).strip().lower()
    if text in DIFFICULTY_PRESETS:
        return DIFFICULTY_PRESETS[text]
    match = _RATIO.match(text)
    if match:
        weights = tuple(int(g) for g in match.groups())
        if sum(weights) > 0:
            return weights  # type: ignore[return-value]
    raise ConfigError(
        f"difficulty: {value!r} is not allowed; use one of {sorted(DIFFICULTY_PRESETS)} "
        f"or an easy:medium:hard ratio such as '4:3:3' (weights >= 0, not all zero)"
    )


def canonical_difficulty(value: Any) -> str:
    """Return the canonical spelling of a difficulty (``'easy'`` … or ``'E:M:H'``)."""
    weights = parse_difficulty(value)
    for name, preset in DIFFICULTY_PRESETS.items():
        if weights == preset:
            return name
    return ":".join(str(w) for w in weights)


def _check_choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}: {value!r} is not allowed; choose one of {list(allowed)}")


def _check_rate(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ConfigError(f"{key}: {value!r} is not allowed; give a probability in [0, 1] (0.05 = 5 %)")


MAX_RL_DATA_SIZE = 1_000_000
"""Most RL prompts a run may synthesise (the paper's largest arm is 2,000; spec §9)."""
MAX_TOOL_LATENCY_MS = 60_000.0
"""Longest added tool latency, in milliseconds (a minute a call)."""


def check_stages(stages: Any) -> tuple[str, ...]:
    """Return ``stages`` as a tuple after checking it is a non-empty subsequence of :data:`STAGE_NAMES`.

    Raises:
        ConfigError: ``stages: …`` naming the stage that is unknown, repeated or out of pipeline order.

    """
    chosen = tuple(stages) if isinstance(stages, (list, tuple)) else None
    if not chosen:
        raise ConfigError(
            f"stages: {stages!r} is not allowed; give a non-empty list from {list(STAGE_NAMES)}"
        )
    for stage in chosen:
        _check_choice("stages", stage, STAGE_NAMES)
    if len(set(chosen)) != len(chosen) or list(chosen) != sorted(chosen, key=STAGE_NAMES.index):
        raise ConfigError(
            f"stages: {list(chosen)} must be listed once each, in pipeline order {list(STAGE_NAMES)}"
        )
    return chosen


@dataclass(frozen=True)
class ExperimentConfig:
    """One experiment: the axes of the study, the stages to run, and the nested per-stage configs."""

    name: str = "run"
    """Run name (folder name under ``runs/<grid>/``); letters, digits, ``._=-`` only."""
    model: str = "tiny"
    """Model preset, one of :data:`MODEL_PRESETS` (paper: 1.5B / 3B / 7B)."""
    reward: str = "sum"
    """Reward design, one of :data:`star_lib.rewards.REWARD_NAMES` (spec §8)."""
    curriculum_boundaries: tuple[float, float] = (1 / 3, 2 / 3)
    """Training fractions where CURRICULUM switches SUM → MACRO → SUCCESS (spec §8 default 1/3, 2/3)."""
    algorithm: str = "grpo"
    """RL algorithm, one of :data:`star_lib.train.algorithms.ALGORITHMS`."""
    rl_data_size: int = 1000
    """Number of RL prompts synthesised (paper default ~1K, spec §7; data-quantity finding 100…2000)."""
    difficulty: str = DEFAULT_DIFFICULTY
    """RL prompt difficulty: ``easy`` | ``medium`` | ``hard`` | an ``E:M:H`` ratio (paper default 4:3:3)."""
    tool_failure_rate: float = 0.0
    """Probability that a tool call fails with a service error (noise finding: 0, 1, 5, 10 %)."""
    tool_latency_ms: float = 0.0
    """Added latency of every tool call, in milliseconds."""
    tool_corruption_rate: float = 0.0
    """Probability that a tool result is corrupted."""
    seed: int = 0
    """Training/evaluation seed (the world and the data have their own ``data_seed`` in their sections)."""
    protocol: str = "react"
    """Episode protocol every stage speaks — teacher data, SFT, RL rollouts, evaluation: ``react`` (JSON tool
    calls and plan, the paper's) or ``compact`` (short calls and one-line observations, for tiny models)."""
    threads: int = 0
    """CPU threads of torch while the run's stages compute (0: torch's default, one per core). The numbers a
    run produces depend on it (the order of float reductions), so a recipe meant to be reproduced exactly
    names it; it is no stage's cache key, like the CPU itself."""
    stages: tuple[str, ...] | None = None
    """Stages to run, a subsequence of :data:`STAGE_NAMES` in pipeline order. Left out: every stage that can
    run with what the config names — all of them, ``qa-eval`` only when ``qa_eval`` names its
    ``data_dir`` and ``corpus`` (QA sets and passages the kit cannot ship)."""
    world: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``world`` stage."""
    synth: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``synth`` stage."""
    teacher: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``teacher`` stage."""
    sft: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``sft`` stage."""
    rl: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``rl`` stage."""
    eval: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``eval`` stage."""
    qa_eval: dict[str, Any] = field(default_factory=dict)
    """Nested config of the ``qa-eval`` stage."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not FOLDER_NAME.fullmatch(self.name):
            raise ConfigError(f"name: {self.name!r} is not allowed; {NAME_RULE}")
        _check_choice("model", self.model, MODEL_PRESETS)
        _check_choice("reward", self.reward, REWARD_NAMES)
        _check_choice("algorithm", self.algorithm, ALGORITHMS)
        _check_choice("protocol", self.protocol, PROTOCOLS)
        self._check_boundaries()
        if (
            isinstance(self.rl_data_size, bool)
            or not isinstance(self.rl_data_size, int)
            or not 1 <= self.rl_data_size <= MAX_RL_DATA_SIZE
        ):
            raise ConfigError(
                f"rl_data_size: {self.rl_data_size!r} is not allowed; "
                f"give a positive integer up to {MAX_RL_DATA_SIZE:,}"
            )
        object.__setattr__(self, "difficulty", canonical_difficulty(self.difficulty))
        for key in ("tool_failure_rate", "tool_corruption_rate"):
            _check_rate(key, getattr(self, key))
        if (
            isinstance(self.tool_latency_ms, bool)
            or not isinstance(self.tool_latency_ms, (int, float))
            or not 0 <= self.tool_latency_ms <= MAX_TOOL_LATENCY_MS  # NaN fails both comparisons
        ):
            raise ConfigError(
                f"tool_latency_ms: {self.tool_latency_ms!r} is not allowed; give a number >= 0, at most "
                f"{MAX_TOOL_LATENCY_MS:,}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed: {self.seed!r} is not allowed; give an integer >= 0 and below 2**32")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise ConfigError(f"threads: {self.threads!r} is not allowed; give an integer >= 0 (0: per core)")
        for stage in STAGE_NAMES:
            section = getattr(self, _stage_key(stage))
            if not isinstance(section, dict):
                raise ConfigError(
                    f"{_stage_key(stage)}: must be a mapping of that stage's settings, got {section!r}"
                )
        self._check_stages()  # after the sections: the default reads qa_eval

    def _check_boundaries(self) -> None:
        bounds = self.curriculum_boundaries
        ok = (
            isinstance(bounds, (tuple, list))
            and len(bounds) == 2
            and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
            and 0.0 < bounds[0] < bounds[1] < 1.0
        )
        if not ok:
            raise ConfigError(
                f"curriculum_boundaries: {bounds!r} is not allowed; give two increasing training fractions "
                "strictly between 0 and 1, e.g. [0.3333, 0.6667]"
            )
        object.__setattr__(self, "curriculum_boundaries", (float(bounds[0]), float(bounds[1])))

    def _check_stages(self) -> None:
        if self.stages is None:
            qa_data = self.qa_eval.get("data_dir") and self.qa_eval.get("corpus")
            stages = STAGE_NAMES if qa_data else tuple(s for s in STAGE_NAMES if s != "qa-eval")
            object.__setattr__(self, "stages", stages)
        object.__setattr__(self, "stages", check_stages(self.stages))

    # ───────────────────────────── views ─────────────────────────────

    @property
    def difficulty_mix(self) -> dict[str, float]:
        """Fractions of easy / medium / hard RL prompts (sum 1)."""
        weights = parse_difficulty(self.difficulty)
        total = sum(weights)
        return {level: w / total for level, w in zip(("easy", "medium", "hard"), weights, strict=True)}

    def section(self, stage: str) -> dict[str, Any]:
        """Return the nested config section of ``stage`` (``qa-eval`` reads ``qa_eval``)."""
        _check_choice("stage", stage, STAGE_NAMES)
        return dict(getattr(self, _stage_key(stage)))

    def axes(self) -> dict[str, Any]:
        """Return the study axes as a flat dict (the columns of the results table)."""
        return {name: getattr(self, name) for name in AXES}

    def to_dict(self) -> dict[str, Any]:
        """Plain-YAML form; ``from_dict(to_dict())`` round-trips."""
        out = asdict(self)
        out["curriculum_boundaries"] = list(self.curriculum_boundaries)
        out["stages"] = list(self.stages)
        return out

    def fingerprint(self) -> str:
        """Short hash of the whole config (name excluded): equal fingerprints mean the same run."""
        payload = {k: v for k, v in self.to_dict().items() if k != "name"}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> ExperimentConfig:
        """Return a copy with some keys changed (validated like a loaded config)."""
        data = self.to_dict()
        data.update(changes)
        return ExperimentConfig.from_dict(data)

    # ───────────────────────────── loading ─────────────────────────────

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        """Build from a plain mapping.

        Raises:
            ConfigError: an unknown key (naming the allowed keys) or a value that is not allowed.

        """
        if not isinstance(data, dict):
            raise ConfigError(f"an experiment config must be a mapping of keys, got {type(data).__name__}")
        allowed = [f.name for f in fields(cls)]
        data = {("qa_eval" if k == "qa-eval" else k): v for k, v in data.items()}
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ConfigError(f"unknown key(s) {unknown}; allowed keys are {allowed}")
        data = dict(data)
        if "stages" in data and isinstance(data["stages"], list):
            data["stages"] = tuple(data["stages"])
        if "curriculum_boundaries" in data and isinstance(data["curriculum_boundaries"], list):
            data["curriculum_boundaries"] = tuple(data["curriculum_boundaries"])
        for key, value in list(data.items()):
            if key in _STAGE_SECTIONS and value is None:
                data[key] = {}
        return cls(**data)


AXES: tuple[str, ...] = (
    "model",
    "reward",
    "curriculum_boundaries",
    "algorithm",
    "rl_data_size",
    "difficulty",
    "tool_failure_rate",
    "tool_latency_ms",
    "tool_corruption_rate",
    "seed",
    "protocol",
)
"""The study axes (top-level keys a grid may vary)."""
_STAGE_SECTIONS = frozenset(_stage_key(s) for s in STAGE_NAMES)


CONFIGS_DIR = Path(__file__).resolve().parents[2] / "configs"
"""The project's named experiment configs (``configs/<name>.yaml``: ``star run learning-signal``)."""


def config_path(spec: str | Path) -> Path:
    """Return the YAML file ``spec`` names: a path, or the name of a config in :data:`CONFIGS_DIR`.

    Raises:
        FileNotFoundError: Neither a file nor a named config, listing the named ones.

    """
    path = Path(spec)
    if path.is_file():
        return path
    named = CONFIGS_DIR / f"{spec}.yaml"
    if path.suffix not in (".yaml", ".yml") and named.is_file():
        return named
    known = sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml")) if CONFIGS_DIR.is_dir() else []
    raise FileNotFoundError(f"experiment config {spec} not found: give a YAML file or one of {known}")


def read_config(spec: str | Path) -> ExperimentConfig:
    """Load an experiment YAML (a path or a named config) and check its top-level keys and values.

    The stage sections are checked against the stages by
    :func:`star_lib.experiments.stages.load_config`, which every command uses.

    Raises:
        ConfigError: naming the file, the offending key and what is allowed.

    """
    path = config_path(spec)
    data = read_yaml(path)
    if data is None:
        # an empty file is a mistake (a save that failed, the wrong file), not a request for every default
        raise ConfigError(f"{path}: the file is empty; an experiment config names at least a name and model")
    try:
        return ExperimentConfig.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save_config(config: ExperimentConfig, path: str | Path) -> Path:
    """Write ``config`` as YAML atomically."""
    return write_yaml_atomic(path, config.to_dict())
