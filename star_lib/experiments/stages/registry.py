"""The stage registry: stage name → the function that runs it, its config, its inputs and the axes it reads.

A stage function has the signature ``run(config, inputs, out_dir) -> dict | None``: ``config`` is the stage's
resolved config (see :meth:`Stage.resolve_config`), ``inputs`` maps input names to artifact paths of earlier
stages, and the function writes its outputs into ``out_dir`` (it may return extra facts for ``stage.json``,
such as ``{"gpus": 8}``). Conventional output files the runner gathers into the run folder:
``metrics.parquet`` (``step``, ``metric``, ``value``), ``rollouts.parquet``, ``eval.parquet``, ``qa.parquet``.

A stage's config has one of two shapes:

- the stage's own dataclass (``config_type``), for the stages whose settings the experiments layer owns:
  its fields are the section's own keys, the experiment axes it reads (fields named like an axis, filled
  from the top level) and ``options``, the section's fields of the stage package's run config;
- :class:`RunSection`, for a stage that only runs its package's run config (``sft``, ``rl``): the axes it
  reads (``Stage.reads``) and ``options``.

Either way the section may set any field of the package's run config (:class:`RunConfigSpec`) except those
the stage sets itself, which its spec names by calling the stage's own field mapping once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from star_lib.experiments.coerce import coerce_fields
from star_lib.experiments.config import AXES, STAGE_NAMES, ConfigError, ExperimentConfig
from star_lib.travel.checks import VERDICTS_VERSION

StageFn = Callable[[Any, Mapping[str, Path], Path], "dict[str, Any] | None"]
"""``run(config, inputs, out_dir)``."""
InputSpec = Callable[[tuple[str, ...], Any], "dict[str, tuple[str, str]]"]
"""Given the experiment's stage list and the stage's resolved config, the inputs ``{name: (stage, artifact
path inside its output)}``: an input the config does not read is left out, so it is not part of the key."""


@dataclass(frozen=True)
class RunSection:
    """The resolved config of a stage without settings of its own: the axes it reads, its run fields."""

    axes: dict[str, Any]
    """Experiment axis → value, for the axes the stage reads (``Stage.reads``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Fields of the stage package's run config the section sets (coerced to their types)."""


@dataclass(frozen=True)
class RunConfigSpec:
    """The stage package's run config, and which of its fields the stage sets itself."""

    type: Callable[[], type]
    """Returns the run config dataclass (``RLRunConfig`` …); imported when a section is checked."""
    stage_fields: Callable[[], Mapping[str, Any]]
    """Calls the stage's own field mapping (axes and paths → fields) with defaults: its keys are the fields
    the section may not set."""

    def open_fields(self) -> list[str]:
        """Fields of the run config a section may set, in declaration order."""
        taken = set(self.stage_fields())
        return [f.name for f in fields(self.type()) if f.name not in taken]

    def check(self, options: Mapping[str, Any]) -> None:
        """Build the run config from ``options`` (required fields as placeholders) so it checks their values.

        Raises:
            TypeError, ValueError: the run config refuses a value.

        """
        required = {
            f.name: "-"
            for f in fields(self.type())
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        self.type()(**{**required, **options})


@dataclass(frozen=True)
class Stage:
    """One pipeline stage as the runner sees it."""

    name: str
    """Stage name (one of ``STAGE_NAMES``)."""
    run: StageFn
    """Writes the stage's outputs; see the module docstring."""
    config_type: type = RunSection
    """The stage's own config dataclass (section keys + the axes it reads + ``options``), or
    :class:`RunSection` when the stage has no settings of its own."""
    inputs: InputSpec = lambda stages, config: {}
    """Inputs it reads from earlier stages."""
    reads: tuple[str, ...] = ()
    """The experiment axes a :class:`RunSection` stage reads (a ``config_type`` names its own as fields)."""
    run_config: RunConfigSpec | None = None
    """The stage package's run config, whose fields the section may set (None: the section sets only the
    ``config_type``'s own fields)."""
    version: str = "1"
    """Bumped when the stage's code changes its outputs (part of the content key)."""
    scores_plans: bool = False
    """Its outputs depend on the evaluator's verdicts (rewards, scores, verified plans): the checks'
    :data:`~star_lib.travel.checks.VERDICTS_VERSION` joins :attr:`cache_version`."""
    uses_gpu: bool = False
    """Counts towards GPU-hours when run on GPUs."""
    distributed: bool = False
    """Runs on every node of a multi-node job (torchrun/accelerate), not only on rank 0."""
    key_facts: Callable[[Any], Mapping[str, Any]] | None = None
    """Facts outside the resolved config that the output depends on (a model preset's architecture), added
    to the content key: changing them must not reuse an output built without them."""

    @property
    def cache_version(self) -> str:
        """The code version in the content key: :attr:`version`, plus the checks' when it scores plans."""
        return f"{self.version}+verdicts{VERDICTS_VERSION}" if self.scores_plans else self.version

    @property
    def axes(self) -> tuple[str, ...]:
        """The experiment axes this stage reads."""
        if self.config_type is RunSection:
            return self.reads
        return tuple(f.name for f in fields(self.config_type) if f.name in AXES)

    def _own_fields(self) -> list[str]:
        """Section keys the stage's own config holds (not axes, not ``options``)."""
        if self.config_type is RunSection:
            return []
        return [f.name for f in fields(self.config_type) if f.name not in AXES and f.name != "options"]

    def resolve_config(self, experiment: ExperimentConfig) -> Any:
        """Return the typed stage config: the experiment's nested section plus the axes this stage reads.

        Section values are first coerced to the annotated field types (of the stage config, and of the run
        config for the keys passed through to it) by :func:`.coerce.coerce_fields`.

        Raises:
            ConfigError: a key of the section is unknown, sets an axis, or has a value the stage refuses.

        """
        section = experiment.section(self.name)
        section_key = self.name.replace("-", "_")
        shadowed = sorted(set(section) & set(self.axes))
        if shadowed:
            raise ConfigError(
                f"{section_key}.{shadowed[0]}: set it at the top level (it is an experiment axis)"
            )
        own = self._own_fields()
        passthrough = self.run_config.open_fields() if self.run_config is not None else []
        unknown = sorted(set(section) - set(own) - set(passthrough))
        if unknown:
            raise ConfigError(
                f"{section_key}: unknown key(s) {unknown}; allowed keys are {own + passthrough}"
            )
        # YAML scalars as the fields' types ('1e-6' → 1e-06, "3" → 3); `ten` for a number is refused by key
        values = coerce_fields(
            self.config_type, {k: v for k, v in section.items() if k in own}, f"{section_key}."
        )
        options = {k: v for k, v in section.items() if k in passthrough and k not in own}
        if options and self.run_config is not None:
            options = coerce_fields(self.run_config.type(), options, f"{section_key}.")
        axes = {axis: getattr(experiment, axis) for axis in self.axes}
        try:
            if options and self.run_config is not None:
                self.run_config.check(options)
            if self.config_type is RunSection:
                return RunSection(axes, options)
            if "options" in {f.name for f in fields(self.config_type)}:
                values["options"] = options
            return self.config_type(**values, **axes)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{section_key}: {exc}") from None

    def config_dict(self, config: Any) -> dict[str, Any]:
        """JSON-able form of a resolved config (part of the content key).

        A field declared with ``metadata={"key": "when-set"}`` is left out while it holds its default, so an
        option added that way keeps the keys of every run that does not use it. A :class:`RunSection` reads
        as its axes beside ``options``.
        """
        if isinstance(config, RunSection):
            values = {**config.axes, "options": dict(config.options)}
        else:
            values = dataclasses.asdict(config)
            for f in fields(config):
                if f.metadata.get("key") == "when-set" and values.get(f.name) == f.default:
                    values.pop(f.name)
        if self.key_facts is not None:
            values.update(self.key_facts(config))
        return values


@dataclass
class Registry:
    """Stage name → :class:`Stage`; tests may build their own."""

    stages: dict[str, Stage] = field(default_factory=dict)

    def add(self, stage: Stage) -> Stage:
        """Register (or replace) a stage."""
        if stage.name not in STAGE_NAMES:
            raise ValueError(f"stage name {stage.name!r} is not one of {list(STAGE_NAMES)}")
        self.stages[stage.name] = stage
        return stage

    def get(self, name: str) -> Stage:
        """Return the stage called ``name``.

        Raises:
            ConfigError: when no stage of that name is registered.

        """
        if name not in self.stages:
            raise ConfigError(f"stage {name!r} is not registered; registered stages: {list(self.stages)}")
        return self.stages[name]

    def validate(self, experiment: ExperimentConfig) -> None:
        """Check every nested stage section of ``experiment`` whose stage is registered.

        A section is checked whether or not its stage is in ``stages:``: a typo in the settings of a stage
        the config does not run yet would otherwise pass until the day it runs.

        Raises:
            ConfigError: naming the section key that is unknown or has a value the stage refuses.

        """
        for name, stage in self.stages.items():
            if name in experiment.stages or experiment.section(name):
                stage.resolve_config(experiment)

    def check(self, experiment: ExperimentConfig) -> dict[str, Any]:
        """Resolve every requested stage's config.

        Returns:
            Stage name → resolved config, in pipeline order.

        Raises:
            ConfigError: a stage that is not registered, or a bad section value.

        """
        return {name: self.get(name).resolve_config(experiment) for name in experiment.stages}
