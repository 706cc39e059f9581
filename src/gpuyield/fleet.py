"""The manifest's fleet sections: which GPU model a node holds, and what a GPU-hour costs.

Format (TOML, in the release manifest; documented in ``docs/weights.md``)::

    [[gpu_models]]                       # for nodes whose GRES, gres.conf or DCGM name no model
    nodes = "n[1-64]"                    # a Slurm hostlist
    model = "h100-sxm"                   # an accelerator id of the estimator's catalog
    cluster = "lab"                      # optional: only nodes of this cluster

    [prices]                             # $ per GPU-hour
    source = "3-year amortized purchase, finance sheet 2026-06"   # required: where prices come from
    basis = "amortized"                  # list | reserved | amortized (optional)
    h100 = 2.10                          # keyed by the GRES type as Slurm names it...
    "a100-sxm" = 1.20                    # ...or by a catalog model id or alias

    [prices.partitions.urgent]           # optional: the GPUs of this partition's nodes
    h100 = 3.00
    source = "premium queue rate card"   # optional, else the one above

Both are statements about the hardware, so they live with the manifest (the latest one ingested
wins); model ids are checked against the catalog when the manifest is ingested and again when a
report uses them (``ledger/weights``), since this core module does not read the catalog.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuyield.errors import InputError, ManifestError
from gpuyield.hostlist import expand_hostlist
from gpuyield.tomlfile import TomlValue

PRICE_BASES = ("list", "reserved", "amortized")
_RULE_KEYS = frozenset({"nodes", "model", "cluster"})
_TABLE_KEYS = frozenset({"source", "basis", "partitions"})
# A price above this per GPU-hour is a typo (a yearly figure, or cents): the dearest cloud GPU-hour
# is a few tens of dollars.
MAX_PRICE_PER_GPU_HOUR = 1000.0


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuModelRule:
    """``[[gpu_models]]``: the nodes of a hostlist hold this catalog model."""

    nodes: str
    """A Slurm hostlist (``n[1-64]``)."""
    model: str
    """An accelerator id (or alias) of the estimator's catalog."""
    cluster: str | None = None
    """Only nodes of this cluster; None: any cluster."""
    names: frozenset[str] = field(default_factory=frozenset)
    """The hostlist expanded (checked when the manifest is read)."""

    def covers(self, cluster: str, node: str) -> bool:
        """True when this rule names ``node`` of ``cluster``."""
        return (self.cluster is None or self.cluster == cluster) and node in self.names


@dataclass(frozen=True, kw_only=True, slots=True)
class PriceTable:
    """Dollars per GPU-hour by GPU type (GRES type or catalog model), with their source."""

    usd_per_gpu_hour: dict[str, float]
    """Lower-cased key -> $ per GPU-hour."""
    source: str
    """Where the prices come from."""

    def to_dict(self) -> dict[str, Any]:
        """As stored with the manifest."""
        return {"usd_per_gpu_hour": self.usd_per_gpu_hour, "source": self.source}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> PriceTable:
        """Inverse of ``to_dict``."""
        return PriceTable(usd_per_gpu_hour=dict(data["usd_per_gpu_hour"]), source=data["source"])


@dataclass(frozen=True, kw_only=True, slots=True)
class Prices:
    """``[prices]``: the cluster's price per GPU-hour, optionally per partition."""

    default: PriceTable
    """Prices for every node."""
    basis: str = ""
    """list, reserved or amortized ('' when not stated)."""
    partitions: dict[str, PriceTable] = field(default_factory=dict)
    """Prices for the GPUs of a partition's nodes, ahead of ``default``."""

    def to_dict(self) -> dict[str, Any]:
        """As stored with the manifest."""
        return {
            "default": self.default.to_dict(),
            "basis": self.basis,
            "partitions": {name: t.to_dict() for name, t in self.partitions.items()},
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Prices:
        """Inverse of ``to_dict``."""
        return Prices(
            default=PriceTable.from_dict(data["default"]),
            basis=data["basis"],
            partitions={n: PriceTable.from_dict(t) for n, t in data["partitions"].items()},
        )


def parse_gpu_models(items: Any, path: Path) -> tuple[GpuModelRule, ...]:
    """``[[gpu_models]]`` entries; a node two rules give different models is an error."""
    if not isinstance(items, list):
        raise ManifestError(f"{path}: gpu_models must be an array of tables ([[gpu_models]])")
    rules = tuple(_parse_rule(item, path, index) for index, item in enumerate(items))
    seen: dict[tuple[str | None, str], tuple[int, str]] = {}
    for index, rule in enumerate(rules):
        for node in sorted(rule.names):
            earlier = seen.setdefault((rule.cluster, node), (index, rule.model))
            if earlier[1].lower() != rule.model.lower():
                raise ManifestError(
                    f"{path}: gpu_models[{index}] gives {node} model {rule.model!r}, "
                    f"gpu_models[{earlier[0]}] gave it {earlier[1]!r}",
                    hint="a node holds one GPU model: remove it from one of the two hostlists",
                )
    return rules


def _parse_rule(item: Any, path: Path, index: int) -> GpuModelRule:
    where = f"gpu_models[{index}]"
    if not isinstance(item, dict):
        raise ManifestError(f"{path}: {where} must be a table")
    unknown = sorted(set(item) - _RULE_KEYS)
    if unknown:
        raise ManifestError(
            f"{path}: {where}: unknown key {unknown[0]!r}", hint="keys: nodes, model, cluster"
        )
    for key in ("nodes", "model"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise ManifestError(
                f"{path}: {where}.{key} must be a non-empty string",
                hint='e.g. nodes = "n[1-64]", model = "h100-sxm"',
            )
    cluster = item.get("cluster")
    if cluster is not None and not isinstance(cluster, str):
        raise ManifestError(f"{path}: {where}.cluster must be a string")
    try:
        names = frozenset(expand_hostlist(item["nodes"]))
    except InputError as error:
        raise ManifestError(f"{path}: {where}.nodes: {error}", hint=error.hint) from None
    return GpuModelRule(
        nodes=item["nodes"].strip(), model=item["model"].strip(), cluster=cluster, names=names
    )


def parse_prices(table: Any, path: Path) -> Prices:
    """``[prices]``: numbers keyed by GPU type, a source, a basis, optional partitions."""
    if not isinstance(table, dict):
        raise ManifestError(f"{path}: prices must be a table ([prices])")
    source = table.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ManifestError(
            f"{path}: prices.source must say where the prices come from",
            hint='e.g. source = "AWS p5.48xlarge on-demand, us-east-1, 2026-06, divided by 8"',
        )
    basis = table.get("basis", "")
    if basis not in ("", *PRICE_BASES):
        raise ManifestError(
            f"{path}: prices.basis must be one of {', '.join(PRICE_BASES)}, got {basis!r}"
        )
    partitions = table.get("partitions", {})
    if not isinstance(partitions, dict):
        raise ManifestError(f"{path}: prices.partitions must be a table of partitions")
    by_partition = {}
    for name, value in partitions.items():
        where = f"prices.partitions.{name}"
        by_partition[name] = _price_table(
            _sub_table(value, path, name), path, where, source.strip()
        )
    return Prices(
        default=_price_table(table, path, "prices", source.strip()),
        basis=basis,
        partitions=by_partition,
    )


def _sub_table(value: TomlValue, path: Path, name: str) -> dict[str, TomlValue]:
    if not isinstance(value, dict):
        raise ManifestError(f"{path}: prices.partitions.{name} must be a table")
    unknown = sorted(k for k in value if k in ("basis", "partitions"))
    if unknown:
        raise ManifestError(
            f"{path}: prices.partitions.{name}: {unknown[0]!r} is set for all prices only",
            hint="a partition's table holds prices and an optional source",
        )
    return value


def _price_table(table: dict[str, TomlValue], path: Path, where: str, source: str) -> PriceTable:
    prices: dict[str, float] = {}
    for key, value in table.items():
        if key in _TABLE_KEYS:
            continue
        prices[key.strip().lower()] = _price(value, path, f"{where}.{key}")
    own = table.get("source", source)
    if not isinstance(own, str) or not own.strip():
        raise ManifestError(f"{path}: {where}.source must be a non-empty string")
    if not prices:
        raise ManifestError(
            f"{path}: {where} names no price", hint="add a price per GPU type, e.g. h100 = 2.10"
        )
    return PriceTable(usd_per_gpu_hour=prices, source=own.strip())


def _price(value: TomlValue, path: Path, where: str) -> float:
    """A finite price in dollars per GPU-hour, 0 (hardware nobody pays for) up to the cap."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_PRICE_PER_GPU_HOUR
    ):
        raise ManifestError(
            f"{path}: {where} must be dollars per GPU-hour between 0 and "
            f"{MAX_PRICE_PER_GPU_HOUR:g}, got {value!r}",
            hint="e.g. h100 = 2.10 (a GPU-hour, not a node-hour or a year)",
        )
    return float(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fleet:
    """The manifest's fleet sections together, as stored with it."""

    gpu_models: tuple[GpuModelRule, ...] = ()
    prices: Prices | None = None

    def to_dict(self) -> dict[str, Any]:
        """The sections as stored with the manifest (hostlists kept unexpanded)."""
        return {
            "gpu_models": [
                {"nodes": r.nodes, "model": r.model, "cluster": r.cluster} for r in self.gpu_models
            ],
            "prices": None if self.prices is None else self.prices.to_dict(),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Fleet:
        """Inverse of ``to_dict``; a manifest stored before these sections has neither."""
        rules = tuple(
            GpuModelRule(
                nodes=r["nodes"],
                model=r["model"],
                cluster=r["cluster"],
                names=frozenset(expand_hostlist(r["nodes"])),
            )
            for r in data.get("gpu_models", [])
        )
        stored = data.get("prices")
        prices = None if stored is None else Prices.from_dict(stored)
        return Fleet(gpu_models=rules, prices=prices)
