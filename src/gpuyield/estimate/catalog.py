"""Catalogs shipped with gpuyield: accelerators and models, each number with its source and status.

The data lives in ``gpuyield/data/catalog/*.toml`` (read with ``importlib.resources``); this module
turns it into typed records and looks them up by id or alias. An unknown id is an ``UnknownIdError``
that lists the closest ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from functools import cache
from typing import Any, TypeVar

from gpuyield import tomlfile
from gpuyield.errors import FieldError, InputError, ParseError, UnknownIdError
from gpuyield.estimate.numbers import Range, parse_range


class SourceStatus(StrEnum):
    """How far a catalog number has been checked (facts.md marks P / S / C)."""

    # Read in the primary source (vendor page, model card, paper).
    PRIMARY = "primary"
    # From a source quoting the primary one; to confirm before relying on it.
    SECONDARY = "secondary"
    # Commonly assumed or from a single unverified quote.
    UNCONFIRMED = "unconfirmed"


class Precision(StrEnum):
    """Number format whose dense peak throughput an estimate divides by."""

    BF16 = "bf16"
    FP8 = "fp8"


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldSource:
    """Source of one field when it differs from its entry's."""

    #: Where the number comes from.
    source: str
    #: How far it has been checked.
    status: SourceStatus


@dataclass(frozen=True, kw_only=True, slots=True)
class Accelerator:
    """One accelerator chip (or one GPU of a multi-GPU package)."""

    #: Short slug (``h100-sxm``).
    id: str
    #: Full name.
    name: str
    #: Dense BF16 peak, TFLOP/s per chip.
    peak_tflops_bf16: float
    #: Dense FP8 peak, TFLOP/s per chip; None when the chip has no FP8.
    peak_tflops_fp8: float | None
    #: HBM capacity per chip, GB (1e9 bytes).
    hbm_gb: float
    #: HBM bandwidth per chip, TB/s (1e12 bytes per second).
    hbm_bandwidth_tbps: float
    #: Where the numbers come from.
    source: str
    #: How far they have been checked.
    status: SourceStatus
    #: Chip family (``ampere``, ``hopper``, ``tpu``); runs on the same family set the effective
    #: MFU range of an estimate.
    generation: str = ""
    #: Dense INT8 peak, TOP/s, where the vendor gives one (TPUs).
    peak_tops_int8: float | None = None
    #: Other ids that find this entry.
    aliases: tuple[str, ...] = ()
    #: Caveats about the numbers.
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The entry as ``gpuyield estimate accelerators --json`` prints it: every field."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Accelerator:
        """An ``[[accelerator]]`` table of the catalog file (keys already checked)."""
        values = {**data, "status": SourceStatus(data["status"])}
        values["aliases"] = tuple(data.get("aliases", ()))
        values.setdefault("peak_tflops_fp8", None)
        return Accelerator(**values)

    def __post_init__(self) -> None:
        for name in ("peak_tflops_bf16", "hbm_gb", "hbm_bandwidth_tbps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"accelerator.{name} must be > 0 for {self.id}")
        if self.peak_tflops_fp8 is not None and self.peak_tflops_fp8 <= 0:
            raise ValueError(f"accelerator.peak_tflops_fp8 must be > 0 for {self.id}")

    def peak_tflops(self, precision: Precision | str) -> float:
        """Dense peak TFLOP/s in ``precision``; an error if the chip lacks that format."""
        precision = parse_precision(precision)
        if precision is Precision.BF16:
            return self.peak_tflops_bf16
        if self.peak_tflops_fp8 is None:
            raise InputError(
                f"{self.id} has no FP8 peak in the catalog",
                hint="use estimate.precision=bf16 for this accelerator",
            )
        return self.peak_tflops_fp8


@dataclass(frozen=True, kw_only=True, slots=True)
class Model:
    """A model with published size, data and (usually) training compute."""

    #: Short slug (``llama-3.1-405b``).
    id: str
    #: Full name.
    name: str
    #: Parameters used per token (equal to total for a dense model).
    active_params: Range
    #: All parameters (MoE models: far more than active).
    total_params: Range
    #: Training tokens; None when no token count applies (vision adapters).
    tokens: Range | None
    #: GPU-hours the authors report, on ``accelerator``; None when unpublished.
    reported_gpu_hours: Range | None
    #: Catalog id of the accelerator it trained on.
    accelerator: str
    #: Number format of training.
    precision: Precision
    #: Where the numbers come from.
    source: str
    #: How far they have been checked.
    status: SourceStatus
    #: GPUs of the main training run, where published.
    num_gpus: Range | None = None
    #: Achieved TFLOP/s per GPU, where published.
    achieved_tflops_per_gpu: Range | None = None
    #: False for announced but unreleased models.
    released: bool = True
    #: Year the run (or its report) was published; groups runs by era.
    year: int | None = None
    #: Address of the source, for a reader to check.
    url: str = ""
    #: What the source states, in its words where short.
    states: str = ""
    #: Wall days of the run, where a source gives GPUs x days instead of GPU-hours.
    reported_days: Range | None = None
    #: Training-step MFU the authors report, where given.
    reported_mfu: Range | None = None
    #: False keeps the run out of ``estimate validate`` (a duplicate figure; notes say why).
    validate: bool = True
    #: Sources of single fields that differ from ``source``.
    field_sources: Mapping[str, FieldSource] = field(default_factory=dict)
    #: Caveats.
    notes: str = ""

    def __post_init__(self) -> None:
        if self.active_params.low <= 0:
            raise ValueError(f"model.active_params must be > 0 for {self.id}")
        if self.active_params.high > self.total_params.high:
            raise ValueError(f"model.active_params exceeds model.total_params for {self.id}")
        if self.reported_days is not None and self.num_gpus is None:
            raise ValueError(f"model.reported_days needs model.num_gpus for {self.id}")
        for name in self.field_sources:
            if name not in _MODEL_FIELDS:
                raise ValueError(f"model.field_sources names unknown field {name!r} for {self.id}")

    def to_dict(self) -> dict[str, Any]:
        """The entry as ``gpuyield estimate models --json`` prints it: every field, ranges as
        numbers (or low/central/high), per-field sources with their status."""
        data: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Range):
                value = value.to_dict()
            elif item.name == "field_sources":
                value = {k: {"source": v.source, "status": str(v.status)} for k, v in value.items()}
            data[item.name] = value
        return data

    @staticmethod
    def from_dict(data: dict[str, Any], *, where: str) -> Model:
        """A ``[[model]]`` table of the catalog file (keys already checked; ranges as text such
        as ``"405B"``, named ``<where>.<field>`` when they do not parse)."""
        values = dict(data)
        for name in _MODEL_RANGES:
            if name in values:
                values[name] = parse_range(str(values[name]), field=f"{where}.{name}")
        values.setdefault("tokens", None)
        values.setdefault("reported_gpu_hours", None)
        values.setdefault("reported_days", None)
        values.setdefault("reported_mfu", None)
        values["precision"] = Precision(values["precision"])
        values["status"] = SourceStatus(values["status"])
        values["field_sources"] = {
            name: FieldSource(source=raw["source"], status=SourceStatus(raw["status"]))
            for name, raw in values.get("field_sources", {}).items()
        }
        model = Model(**values)
        get_accelerator(model.accelerator)  # an unknown accelerator id is a catalog bug
        return model

    @property
    def is_moe(self) -> bool:
        """A mixture of experts: fewer parameters active per token than in total."""
        return self.active_params.central < self.total_params.central

    def reported_hours(self) -> Range | None:
        """Reported GPU-hours, or GPUs x days x 24 where the source gives only those."""
        if self.reported_gpu_hours is not None:
            return self.reported_gpu_hours
        if self.reported_days is None or self.num_gpus is None:
            return None
        days, gpus = self.reported_days, self.num_gpus
        return Range(
            low=days.low * gpus.low * 24,
            central=days.central * gpus.central * 24,
            high=days.high * gpus.high * 24,
        )


#: An accelerator or a model, as the catalog registers it under its id (and aliases).
_Record = TypeVar("_Record", Accelerator, Model)
_ACCELERATOR_KEYS = frozenset(Accelerator.__dataclass_fields__)
_MODEL_FIELDS = frozenset(Model.__dataclass_fields__)
_MODEL_RANGES = (
    "active_params",
    "total_params",
    "tokens",
    "reported_gpu_hours",
    "num_gpus",
    "achieved_tflops_per_gpu",
    "reported_days",
    "reported_mfu",
)


def parse_precision(value: Precision | str, *, field: str = "estimate.precision") -> Precision:
    """``bf16`` or ``fp8``; anything else is a ``FieldError`` naming ``field``."""
    try:
        return Precision(str(value).lower())
    except ValueError:
        raise FieldError(field, f": unknown precision {value!r}", hint="use bf16 or fp8") from None


def get_accelerator(accelerator_id: str) -> Accelerator:
    """The accelerator with this id or alias."""
    return _lookup("accelerator", accelerator_id, _accelerators())


def list_accelerators() -> list[Accelerator]:
    """Every accelerator in the catalog, in file order."""
    return list(dict.fromkeys(_accelerators().values()))


def get_model(model_id: str) -> Model:
    """The model with this id."""
    return _lookup("model", model_id, _models())


def list_models() -> list[Model]:
    """Every model in the catalog, in file order."""
    return list(_models().values())


def _lookup(kind: str, wanted: str, table: Mapping[str, _Record]) -> _Record:
    key = wanted.strip().lower()
    if key in table:
        return table[key]
    canonical = {entry.id for entry in table.values()}
    raise UnknownIdError(kind, wanted, canonical)


def _read_catalog(name: str) -> tomlfile.TomlDocument:
    return tomlfile.read_bundled("catalog", name.removesuffix(".toml"))


@cache
def _accelerators() -> dict[str, Accelerator]:
    doc = _read_catalog("accelerators.toml")
    path = doc.origin
    table: dict[str, Accelerator] = {}
    for index, raw in enumerate(doc.data.get("accelerator", [])):
        _check_keys(raw, _ACCELERATOR_KEYS, path, f"accelerator[{index}]")
        try:
            record = Accelerator.from_dict(raw)
        except (KeyError, TypeError, ValueError) as error:
            raise ParseError(str(error), path=path, field=f"accelerator[{index}]") from error
        _register(table, record, (record.id, *record.aliases), path)
    return table


@cache
def _models() -> dict[str, Model]:
    doc = _read_catalog("models.toml")
    path = doc.origin
    table: dict[str, Model] = {}
    for index, raw in enumerate(doc.data.get("model", [])):
        where = f"model[{index}]"
        _check_keys(raw, _MODEL_FIELDS, path, where)
        try:
            record = Model.from_dict(raw, where=where)
        except (KeyError, TypeError, ValueError) as error:
            raise ParseError(str(error), path=path, field=where) from error
        _register(table, record, (record.id,), path)
    return table


def _check_keys(keys: Iterable[str], allowed: frozenset[str], path: str, where: str) -> None:
    """A catalog table's keys (a misspelt one would be ignored and its number lost)."""
    unknown = sorted(set(keys) - allowed)
    if unknown:
        raise ParseError(f"unknown keys {unknown}", path=path, field=where)


def _register(table: dict[str, _Record], record: _Record, keys: tuple[str, ...], path: str) -> None:
    for key in keys:
        if key.lower() in table:
            raise ParseError(f"duplicate id or alias {key!r}", path=path, field="id")
        table[key.lower()] = record
