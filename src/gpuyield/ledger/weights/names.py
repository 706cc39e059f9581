"""A GPU name as a cluster prints it (GRES type, gres.conf Type, DCGM modelName, a node feature)
turned into an accelerator of the estimator's catalog, or an answer saying why it is not one.

Names are compared normalized (lower case, runs of spaces and underscores as ``-``), so NVML's
"NVIDIA H100 80GB HBM3" and Slurm's AutoDetect type "nvidia_h100_80gb_hbm3" are one name. The
order: the names table (``data/catalog/gpu_names.toml``, each entry cited), then the catalog's ids
and aliases, then the same without a vendor prefix. Nothing else: an unknown name stays unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuyield import tomlfile
from gpuyield.errors import ParseError, UnknownIdError
from gpuyield.estimate.catalog import Accelerator, get_accelerator

_SEPARATORS = re.compile(r"[\s_]+")
_VENDOR_PREFIXES = ("nvidia-", "tesla-", "amd-instinct-", "amd-")


@dataclass(frozen=True, kw_only=True, slots=True)
class NameMatch:
    """What one GPU name resolves to."""

    name: str
    """The name as printed."""
    accelerator: Accelerator | None
    """The catalog entry; None when the name matches none."""
    how: str
    """How it matched (``names table``, ``catalog alias``) or why not."""


def normalize(name: str) -> str:
    """Lower case, runs of spaces and underscores as one ``-``, trimmed."""
    return _SEPARATORS.sub("-", name.strip().lower()).strip("-")


def resolve_name(name: str) -> NameMatch:
    """The accelerator a GPU name stands for, or why none."""
    key = normalize(name)
    if not key:
        return NameMatch(name=name, accelerator=None, how="empty name")
    if "mig" in key.split("-") or ",-mig" in key:
        return NameMatch(name=name, accelerator=None, how="a MIG slice, not a whole GPU")
    table = _names_table()
    if key in table:
        return NameMatch(name=name, accelerator=get_accelerator(table[key]), how="names table")
    for candidate, how in ((key, "catalog id or alias"), (_without_vendor(key), "catalog alias")):
        try:
            return NameMatch(name=name, accelerator=get_accelerator(candidate), how=how)
        except UnknownIdError:
            continue
    return NameMatch(name=name, accelerator=None, how="not in the catalog")


def _without_vendor(key: str) -> str:
    for prefix in _VENDOR_PREFIXES:
        if key.startswith(prefix):
            return key.removeprefix(prefix)
    return key


@cache
def _names_table() -> dict[str, str]:
    """Normalized name -> accelerator id, from the bundled names table."""
    doc = tomlfile.read_bundled("catalog", "gpu_names")
    table: dict[str, str] = {}
    for index, entry in enumerate(doc.data.get("name", [])):
        where = f"name[{index}]"
        if set(entry) != {"name", "accelerator", "source"}:
            raise ParseError("needs name, accelerator and source", path=doc.origin, field=where)
        key = normalize(entry["name"])
        if key in table:
            raise ParseError(f"duplicate name {entry['name']!r}", path=doc.origin, field=where)
        get_accelerator(entry["accelerator"])  # an unknown id is a catalog bug
        table[key] = entry["accelerator"]
    return table
