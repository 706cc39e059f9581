"""Which GPU model each node holds, and what its GPU-hour costs.

A node's model comes from the first of these that names one the catalog knows (each later source
that disagrees is a warning; none is ever guessed):

1. the manifest's ``[[gpu_models]]`` (the site's own statement, for untyped sites);
2. DCGM's ``modelName`` label in utilization samples (the hardware itself);
3. the cluster's ``gres.conf`` ``Type=``;
4. the inventory's ``Gres=gpu:TYPE:N`` (``scontrol show nodes``, ``sinfo``);
5. a node feature that names a model (``AvailableFeatures=h100,sxm5``).

Its price: ``[prices.partitions.P]`` of a partition it is in, else ``[prices]``, each keyed by the
GRES type as Slurm names it or by the catalog model (id or alias).
"""

from __future__ import annotations

from dataclasses import dataclass

import ibis
from ibis.common.exceptions import TableNotFound

from gpuyield.errors import DataConsistencyError, ManifestError, UnknownIdError
from gpuyield.estimate.catalog import Accelerator, get_accelerator
from gpuyield.fleet import Prices, PriceTable
from gpuyield.ledger.weights.names import NameMatch, normalize, resolve_name
from gpuyield.manifest import Manifest

UNTYPED = "(untyped)"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeGpu:
    """One node's GPU model and price, and where each came from."""

    cluster: str
    node: str
    type_key: str
    """The catalog id when the model is known, else the name the cluster uses (or ``(untyped)``)."""
    accelerator: Accelerator | None
    """The catalog entry; None when no source names one the catalog knows."""
    model_source: str
    """Where the model came from (``gres type 'h100'``, ``manifest gpu_models[0]``), or why none."""
    slurm_types: tuple[str, ...]
    """The GRES types Slurm names this node's GPUs by (inventory, gres.conf)."""
    usd_per_gpu_hour: float | None
    """Price of one of its GPU-hours; None when ``[prices]`` has none for it."""
    price_source: str | None
    """``prices`` or ``prices.partitions.P``, with the key that matched."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetModels:
    """Every node's GPU model and price, and the doubts about them."""

    nodes: tuple[NodeGpu, ...]
    warnings: tuple[str, ...]


def fleet_models(
    backend: ibis.BaseBackend, nodes: list[tuple[str, str]], manifest: Manifest
) -> FleetModels:
    """The model and price of each ``(cluster, node)`` (the nodes of the window's capacity)."""
    table = backend.table("nodes")
    # Another engine's copy of the store (a Parquet lake) may predate features and gpu_names.
    features = table.features if "features" in table.columns else ibis.null(str)
    rows = table.select("cluster", "node", "gpu_type", "partitions", features=features)
    inventory = {(r["cluster"], r["node"]): r for r in rows.to_pyarrow().to_pylist()}
    seen: dict[tuple[str, str], list[tuple[str, str]]] = {}
    try:
        names_seen = backend.table("gpu_names").select("cluster", "node", "name", "source")
    except TableNotFound:
        names_seen = None
    for r in [] if names_seen is None else names_seen.distinct().to_pyarrow().to_pylist():
        seen.setdefault((r["cluster"], r["node"]), []).append((r["source"], r["name"]))
    # Names stored without a cluster (utilization ingested without --cluster) apply to the
    # node of that name in any cluster.
    anywhere = {node: pairs for (cluster, node), pairs in seen.items() if cluster == ""}
    warnings: list[str] = []
    result = []
    for cluster, node in nodes:
        row = inventory.get((cluster, node), {})
        pairs = seen.get((cluster, node), []) + anywhere.get(node, [])
        names = _names(manifest, cluster, node, row, sorted(set(pairs)))
        gpu = _node_gpu(cluster, node, names, warnings)
        partitions = [p for p in (row.get("partitions") or "").split(",") if p]
        result.append(_priced(gpu, partitions, manifest.prices))
    warnings += _unused_prices(result, manifest.prices)
    return FleetModels(nodes=tuple(result), warnings=tuple(dict.fromkeys(warnings)))


def _names(
    manifest: Manifest,
    cluster: str,
    node: str,
    row: dict[str, str | None],
    seen: list[tuple[str, str]],
) -> list[tuple[str, str]]:
    """(source, name) pairs for one node, in precedence order."""
    names: list[tuple[str, str]] = []
    rule = next(
        ((i, r) for i, r in enumerate(manifest.gpu_models) if r.covers(cluster, node)), None
    )
    if rule is not None:
        names.append((f"manifest gpu_models[{rule[0]}]", rule[1].model))
    names += [(f"DCGM modelName {n!r}", n) for s, n in seen if s == "dcgm"]
    names += [(f"gres.conf Type {n!r}", n) for s, n in seen if s == "gres.conf"]
    gres = row.get("gpu_type")
    if gres:
        names.append((f"GRES type {gres!r}", gres))
    names += [
        (f"node feature {f!r}", f) for f in (row.get("features") or "").split(",") if f.strip()
    ]
    return names


def _node_gpu(
    cluster: str, node: str, names: list[tuple[str, str]], warnings: list[str]
) -> NodeGpu:
    """The first name that resolves wins; a manifest model the catalog lacks is an error."""
    slurm_types = tuple(
        dict.fromkeys(normalize(n) for how, n in names if how.startswith(("GRES", "gres.conf")))
    )
    chosen: tuple[str, Accelerator, str] | None = None
    for how, name in names:
        match = _match(how, name)
        if match.accelerator is None:
            if not how.startswith("node feature"):  # features are free-form tags
                warnings.append(f"{cluster}:{node}: {how} is {match.how}")
        elif chosen is None:
            chosen = (how, match.accelerator, match.how)
        elif match.accelerator.peak_tflops_bf16 != chosen[1].peak_tflops_bf16:
            warnings.append(
                f"{cluster}:{node}: {how} says {match.accelerator.id}; "
                f"{chosen[0]} ({chosen[1].id}) is used"
            )
    if chosen is None:
        key = next((n for how, n in names if not how.startswith("node feature")), UNTYPED)
        return NodeGpu(
            cluster=cluster,
            node=node,
            type_key=normalize(key) if key != UNTYPED else key,
            accelerator=None,
            model_source="no source names a catalog model",
            slurm_types=slurm_types,
            usd_per_gpu_hour=None,
            price_source=None,
        )
    return NodeGpu(
        cluster=cluster,
        node=node,
        type_key=chosen[1].id,
        accelerator=chosen[1],
        model_source=f"{chosen[0]} ({chosen[2]})",
        slurm_types=slurm_types,
        usd_per_gpu_hour=None,
        price_source=None,
    )


def _match(how: str, name: str) -> NameMatch:
    if how.startswith("manifest"):
        return _manifest_model(name, how)
    if how.startswith("GRES") and "," in name:
        return NameMatch(name=name, accelerator=None, how="several GPU types on one node")
    return resolve_name(name)


def _manifest_model(model: str, how: str) -> NameMatch:
    try:
        return NameMatch(name=model, accelerator=get_accelerator(model), how="catalog id")
    except UnknownIdError as error:
        raise ManifestError(
            f"the stored manifest's {how} names model {model!r}, not in the catalog",
            hint=error.hint or "gpuyield estimate accelerators lists the catalog's ids",
        ) from None


def _priced(gpu: NodeGpu, partitions: list[str], prices: Prices | None) -> NodeGpu:
    """The node with its price: a partition's, else the cluster's; two partitions of the node
    that price its GPUs differently are an error (which one pays is not known)."""
    if prices is None:
        return gpu
    keys = _price_keys(gpu)
    found = {}
    for partition in partitions:
        table = prices.partitions.get(partition)
        hit = None if table is None else _lookup(table, keys)
        if hit is not None:
            found[partition] = hit
    if len({price for price, _ in found.values()}) > 1:
        listed = ", ".join(f"{p} ${v[0]:g}" for p, v in sorted(found.items()))
        raise DataConsistencyError(
            f"{gpu.cluster}:{gpu.node} is in partitions priced differently: {listed}",
            hint="a GPU-hour has one price: price by GRES type or model, or keep one of these "
            "partitions in [prices.partitions]",
        )
    if found:
        partition, (price, key) = sorted(found.items())[0]
        source = f"prices.partitions.{partition} {key!r}"
    else:
        hit = _lookup(prices.default, keys)
        if hit is None:
            return gpu
        price, key = hit
        source = f"prices {key!r}"
    return NodeGpu(
        cluster=gpu.cluster,
        node=gpu.node,
        type_key=gpu.type_key,
        accelerator=gpu.accelerator,
        model_source=gpu.model_source,
        slurm_types=gpu.slurm_types,
        usd_per_gpu_hour=price,
        price_source=source,
    )


def _price_keys(gpu: NodeGpu) -> list[str]:
    """Keys a price may be given under, most specific first: the GRES type, then the model."""
    keys = list(gpu.slurm_types)
    if gpu.accelerator is not None:
        keys += [gpu.accelerator.id, *(a.lower() for a in gpu.accelerator.aliases)]
    elif gpu.type_key != UNTYPED:
        keys.append(gpu.type_key)
    return list(dict.fromkeys(keys))


def _lookup(table: PriceTable, keys: list[str]) -> tuple[float, str] | None:
    normalized = {normalize(k): (v, k) for k, v in table.usd_per_gpu_hour.items()}
    for key in keys:
        if normalize(key) in normalized:
            return normalized[normalize(key)]
    return None


def _unused_prices(nodes: list[NodeGpu], prices: Prices | None) -> list[str]:
    """Price keys no node of the window matched: a typo, or a type not in this window."""
    if prices is None:
        return []
    used = {key for n in nodes for key in _price_keys(n)}
    tables = [("prices", prices.default)] + [
        (f"prices.partitions.{p}", t) for p, t in sorted(prices.partitions.items())
    ]
    return [
        f"{where}: {key!r} matches no GPU type of the window's nodes"
        for where, table in tables
        for key in table.usd_per_gpu_hour
        if normalize(key) not in {normalize(u) for u in used}
    ]
