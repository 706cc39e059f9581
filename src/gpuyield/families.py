"""Run families and the scaling-ladder policy: the manifest's ``[[families]]`` and ``[ladder]``.

The essay's remedy for runs that "realize they are bad ideas half way through": run the idea on one
GPU, then one 8-GPU machine, then bigger, before the big run. A *family* is the set of runs that try
one idea at different sizes; the *ladder* is the sequence of GPU counts (rungs) a family must climb::

    [[families]]
    name = "llama-arch-v3"
    runs = "llama3-*"              # a glob over run names, or "re:<regex>" (whole name), or a list

    [ladder]
    rungs = [1, 8, 64, 512]        # GPUs
    within_days = 30               # the lower rung's completed run must be this recent

A job may also name its family itself, beside its run: ``--comment=run=r7,family=llama-arch-v3``;
that wins over the manifest's patterns. Rules (docs/ladder.md): a run on ``g`` GPUs sits on the
first rung ``>= g`` (above the top rung: past the ladder); on rung ``k > 0`` it needs a COMPLETED job
of the same family on at least ``rungs[k-1]`` GPUs that ended within ``within_days`` before it started.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from gpuyield.errors import ManifestError

# The rungs the issue and the essay name (one GPU, one 8-GPU machine, then x8 each step).
DEFAULT_RUNGS = (1, 8, 64, 512)
DEFAULT_WITHIN_DAYS = 30.0
# A job's own ``family=`` key in its comment, next to ``run=``.
COMMENT_FAMILY_PATTERN = r"family=([^,\s]+)"
_REGEX_PREFIX = "re:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Family:
    """Runs that try one idea at different sizes."""

    name: str
    """Family name (what ``preflight --family`` takes)."""
    patterns: tuple[str, ...]
    """Anchored regexes over run names (globs translated), for Python and SQL engines alike."""
    written: tuple[str, ...]
    """The patterns as the manifest wrote them, for messages."""

    def matches(self, run: str) -> bool:
        """True when the run belongs to the family by its name."""
        return any(re.fullmatch(p, run) for p in self.patterns)


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderPolicy:
    """The rungs (GPU counts) a family climbs and how recent the lower rung must be."""

    rungs: tuple[int, ...] = DEFAULT_RUNGS
    """Strictly increasing GPU counts."""
    within_days: float = DEFAULT_WITHIN_DAYS
    """The completed lower-rung run must have ended at most this many days before."""

    @property
    def within_s(self) -> int:
        """``within_days`` in seconds."""
        return round(self.within_days * 86400)

    def rung_index(self, gpus: int) -> int:
        """Index of the first rung ``>= gpus``; ``len(rungs)`` past the top rung."""
        return next((k for k, r in enumerate(self.rungs) if r >= gpus), len(self.rungs))

    def required_gpus(self, gpus: int) -> int | None:
        """GPUs of the completed run a run on ``gpus`` needs first (None on the first rung)."""
        k = self.rung_index(gpus)
        return None if k == 0 else self.rungs[k - 1]

    def missing_rungs(self, gpus: int, reached_gpus: int | None) -> tuple[int, ...]:
        """Rungs below a run on ``gpus`` that nothing completed reached (``reached_gpus``)."""
        below = self.rungs[: self.rung_index(gpus)]
        return tuple(r for r in below if reached_gpus is None or r > reached_gpus)

    def rung_label(self, gpus: int) -> str:
        """The rung a run on ``gpus`` sits on, as text (``16`` or ``past 512``)."""
        k = self.rung_index(gpus)
        return str(self.rungs[k]) if k < len(self.rungs) else f"past {self.rungs[-1]}"


def glob_regex(glob: str) -> str:
    """A glob over run names (``*``, ``?``, ``[...]``) as an anchored regex that RE2 reads too."""
    parts = ["^"]
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif char == "[" and "]" in glob[i + 1 :]:
            end = glob.index("]", i + 1)
            body = glob[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            parts.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            parts.append(re.escape(char))
        i += 1
    parts.append("$")
    return "".join(parts)


def parse_families(items: Any, path: Path) -> tuple[Family, ...]:
    """Validate ``[[families]]``: unique names, at least one valid pattern each."""
    if not isinstance(items, list):
        raise ManifestError(
            f"{path}: families must be an array of tables", hint='write [[families]] name = "x"'
        )
    families = tuple(_parse_family(item, path, i) for i, item in enumerate(items))
    seen: set[str] = set()
    for family in families:
        if family.name in seen:
            raise ManifestError(f"{path}: families: name {family.name!r} is declared twice")
        seen.add(family.name)
    return families


def _parse_family(item: Any, path: Path, index: int) -> Family:
    where = f"families[{index}]"
    if not isinstance(item, dict):
        raise ManifestError(f"{path}: {where} must be a table with name and runs")
    unknown = set(item) - {"name", "runs"}
    if unknown:
        raise ManifestError(
            f"{path}: {where}: unknown key {sorted(unknown)[0]!r}", hint="known: name, runs"
        )
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ManifestError(
            f"{path}: {where}.name must be a name without spaces or commas, got {name!r}",
            hint='e.g. name = "llama-arch-v3"',
        )
    runs = item.get("runs")
    written = (runs,) if isinstance(runs, str) else runs
    if not isinstance(written, list | tuple) or not written:
        raise ManifestError(
            f"{path}: {where}.runs must be a glob, 're:<regex>' or a list of them",
            hint='e.g. runs = "llama3-*" or runs = "re:llama3-(small|big)-\\\\d+"',
        )
    patterns = tuple(_pattern(p, path, f"{where}.runs") for p in written)
    return Family(name=name, patterns=patterns, written=tuple(written))


def _pattern(text: Any, path: Path, where: str) -> str:
    if not isinstance(text, str) or not text:
        raise ManifestError(f"{path}: {where}: every pattern must be a non-empty string")
    if not text.startswith(_REGEX_PREFIX):
        return glob_regex(text)
    body = text[len(_REGEX_PREFIX) :]
    try:
        re.compile(body)
    except re.error as error:
        raise ManifestError(f"{path}: {where}: {text!r} is not a valid regex: {error}") from None
    # Anchored: a family's regex names whole run names, in Python and in SQL engines alike.
    return f"^(?:{body})$"


def parse_ladder(item: Any, path: Path) -> LadderPolicy:
    """Validate ``[ladder]``: increasing positive whole rungs, a positive ``within_days``."""
    if not isinstance(item, dict):
        raise ManifestError(f"{path}: ladder must be a table", hint="write [ladder] rungs = [1, 8]")
    unknown = set(item) - {"rungs", "within_days"}
    if unknown:
        raise ManifestError(
            f"{path}: ladder: unknown key {sorted(unknown)[0]!r}", hint="known: rungs, within_days"
        )
    rungs = item.get("rungs", list(DEFAULT_RUNGS))
    if (
        not isinstance(rungs, list)
        or not rungs
        or not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rungs)
        or any(b <= a for a, b in pairwise(rungs))
    ):
        raise ManifestError(
            f"{path}: ladder.rungs must be increasing positive GPU counts, got {rungs!r}",
            hint="e.g. rungs = [1, 8, 64, 512]",
        )
    within = item.get("within_days", DEFAULT_WITHIN_DAYS)
    if isinstance(within, bool) or not isinstance(within, int | float) or within <= 0:
        raise ManifestError(
            f"{path}: ladder.within_days must be a positive number of days, got {within!r}"
        )
    return LadderPolicy(rungs=tuple(rungs), within_days=float(within))


def families_from_json(items: list[dict[str, Any]]) -> tuple[Family, ...]:
    """Families from the manifest's stored JSON (``dataclasses.asdict`` of each)."""
    return tuple(
        Family(name=i["name"], patterns=tuple(i["patterns"]), written=tuple(i["written"]))
        for i in items
    )
