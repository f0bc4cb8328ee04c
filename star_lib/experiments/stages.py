"""The stage registry: stage name → the function that runs it, its config type, its inputs and axes.

A stage function has the signature ``run(config, inputs, out_dir) -> dict | None``: ``config`` is the stage's
resolved config dataclass (its nested YAML section plus the experiment axes it reads), ``inputs`` maps input
names to artifact paths of earlier stages, and the function writes its outputs into ``out_dir`` (it may return
extra facts for ``stage.json``, such as ``{"gpus": 8}``). Conventional output files the runner gathers into
the run folder: ``metrics.parquet`` (``step``, ``metric``, ``value``), ``rollouts.parquet``, ``eval.parquet``,
``qa.parquet``.

Each stage is wired to the real ``star_lib`` function in :mod:`star_lib.experiments.pipeline`, whose
``build_registry()`` returns the registry every command uses.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from star_lib.experiments.coerce import coerce_fields
from star_lib.experiments.config import AXES, STAGE_NAMES, ConfigError, ExperimentConfig

StageFn = Callable[[Any, Mapping[str, Path], Path], "dict[str, Any] | None"]
"""``run(config, inputs, out_dir)``."""
InputSpec = Callable[[tuple[str, ...]], "dict[str, tuple[str, str]]"]
"""Given the experiment's stage list, the inputs ``{name: (stage, artifact path inside its output)}``."""


@dataclass(frozen=True)
class Stage:
    """One pipeline stage as the runner sees it."""

    name: str
    """Stage name (one of ``STAGE_NAMES``)."""
    run: StageFn
    """Writes the stage's outputs; see the module docstring."""
    config_type: type
    """Dataclass of the resolved stage config (nested section fields + the axes the stage reads)."""
    inputs: InputSpec = lambda stages: {}
    """Inputs it reads from earlier stages."""
    requires: tuple[str, ...] = ()
    """Modules (``module`` or ``module:attribute``) that must exist in this checkout for the stage to run."""
    version: str = "1"
    """Bumped when the stage's code changes its outputs (part of the content key)."""
    uses_gpu: bool = False
    """Counts towards GPU-hours when run on GPUs."""
    distributed: bool = False
    """Runs on every node of a multi-node job (torchrun/accelerate), not only on rank 0."""
    options_type: Callable[[], type] | None = None
    """The stage package's own config dataclass (lazy): section keys that are its fields go to ``options``."""
    options_fixed: tuple[str, ...] = ()
    """Fields of ``options_type`` the stage sets itself (paths, axes); the section may not set them."""
    options_required: Mapping[str, Any] = field(default_factory=dict)
    """Placeholders for required ``options_type`` fields, used only to validate the section at load time."""
    key_facts: Callable[[Any], Mapping[str, Any]] | None = None
    """Facts outside the resolved config that the output depends on (a model preset's architecture), added
    to the content key: changing them must not reuse an output built without them."""

    @property
    def axes(self) -> tuple[str, ...]:
        """The experiment axes this stage reads (its config fields named like an axis)."""
        return tuple(f.name for f in fields(self.config_type) if f.name in AXES)

    def resolve_config(self, experiment: ExperimentConfig) -> Any:
        """Return the typed stage config: the experiment's nested section plus the axes this stage reads.

        Section values are first coerced to the annotated field types (of the stage config, and of the stage
        package's config for the keys passed through to it) by :func:`.coerce.coerce_fields`.

        Raises:
            ConfigError: a key of the section is unknown, sets an axis, or has a value the stage refuses.

        """
        section = experiment.section(self.name)
        section_key = self.name.replace("-", "_")
        own = [f.name for f in fields(self.config_type) if f.name not in AXES and f.name != "options"]
        shadowed = sorted(set(section) & set(self.axes))
        if shadowed:
            raise ConfigError(
                f"{section_key}.{shadowed[0]}: set it at the top level (it is an experiment axis)"
            )
        passthrough = self._passthrough_fields()
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
        if options and self.options_type is not None:
            options = coerce_fields(self.options_type(), options, f"{section_key}.")
        values.update({axis: getattr(experiment, axis) for axis in self.axes})
        if "options" in {f.name for f in fields(self.config_type)}:
            values["options"] = options
        try:
            if options and self.options_type is not None:
                self.options_type()(**{**self.options_required, **options})  # validates the values
            return self.config_type(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{section_key}: {exc}") from None

    def _passthrough_fields(self) -> list[str]:
        """Section keys forwarded to the stage package's own config (``options_type``)."""
        if self.options_type is None or unavailable_reason(self) is not None:
            return []
        return [f.name for f in fields(self.options_type()) if f.name not in self.options_fixed]

    def config_dict(self, config: Any) -> dict[str, Any]:
        """JSON-able form of a resolved config (part of the content key).

        A field declared with ``metadata={"key": "when-set"}`` is left out while it holds its default, so an
        option added that way keeps the keys of every run that does not use it.
        """
        values = dataclasses.asdict(config)
        for f in fields(config):
            if f.metadata.get("key") == "when-set" and values.get(f.name) == f.default:
                values.pop(f.name)
        if self.key_facts is not None:
            values.update(self.key_facts(config))
        return values


def unavailable_reason(stage: Stage) -> str | None:
    """Why ``stage`` cannot run in this checkout (a missing module or attribute), or None."""
    for requirement in stage.requires:
        module, _, attribute = requirement.partition(":")
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"stage {stage.name!r} needs {module}, which is not in this checkout yet"
        if attribute and not hasattr(importlib.import_module(module), attribute):
            return f"stage {stage.name!r} needs {module}.{attribute}, which is not in this checkout yet"
    return None


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
        """Check every nested stage section of ``experiment`` whose stage exists in this checkout.

        Raises:
            ConfigError: naming the section key that is unknown or has a value the stage refuses.

        """
        for name in experiment.stages:
            stage = self.stages.get(name)
            if stage is not None and unavailable_reason(stage) is None:
                stage.resolve_config(experiment)

    def check(self, experiment: ExperimentConfig) -> dict[str, Any]:
        """Resolve every requested stage's config and check that it can run here.

        Returns:
            Stage name → resolved config, in pipeline order.

        Raises:
            ConfigError: a bad section value, or stages that are not available in this checkout.

        """
        missing = [r for name in experiment.stages if (r := unavailable_reason(self.get(name)))]
        if missing:
            raise ConfigError(
                "; ".join(missing) + f" — drop those from `stages` (now {list(experiment.stages)})"
            )
        return {name: self.get(name).resolve_config(experiment) for name in experiment.stages}
