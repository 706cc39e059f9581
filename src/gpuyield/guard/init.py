"""Initialization checks: values beyond 3 standard deviations of each tensor's intended distribution.

The essay: "Allen AI found that initializing with the usual normal distribution creates loss spikes
after 600B tokens. This can be ameliorated if all values beyond 3 std dev are clipped to 3 std dev."
OLMo's code does it at initialization: ``olmo/initialization.py`` (github.com/allenai/OLMo),
``init_normal(module, std, init_cutoff_factor)`` draws ``nn.init.trunc_normal_(weight, mean=0,
std=std, a=-cutoff*std, b=cutoff*std)``, with ``init_cutoff_factor = 3`` in the OLMo configs.

``check_init(model)`` reports, per parameter tensor, the values beyond ``sigma`` standard deviations
and the largest ``|z|``; ``clip_init_(model)`` clips those values to the bound, in place.

The intended distribution of a tensor: centre and scale given by the caller (``std=``, centre 0),
or estimated robustly from the tensor itself, as its median and ``1.4826 x`` its median absolute
deviation (MAD). The robust estimate is what a normal init meant, whatever scale the architecture
chose for that tensor (GPT-2 scales its residual projections by ``1/sqrt(2 n_layer)``), and the
outliers do not move it: clipping changes neither the median nor the MAD, so a clipped model checks
clean. Medians are the lower median (``torch.median``). Constant tensors (norm gains of 1, zero
biases) have no spread and are reported as such, never clipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gpuyield.errors import InputError, MissingExtraError

try:
    import torch
except ImportError as error:  # pragma: no cover - the train extra is installed in CI
    raise MissingExtraError("train", error.name or "torch") from error

# The MAD of a normal distribution is 0.6745 of its standard deviation.
MAD_TO_STD = 1.482602218505602


@dataclass(frozen=True, kw_only=True, slots=True)
class TensorInit:
    """One parameter tensor against its intended distribution."""

    name: str
    """Parameter name (``model.named_parameters()``)."""
    numel: int
    """Number of values."""
    center: float
    """Centre of the intended distribution."""
    std: float
    """Its standard deviation (0 for a constant tensor)."""
    std_source: str
    """``given`` (the caller's ``std``), ``robust`` (median and MAD) or ``constant``."""
    beyond: int
    """Values beyond ``sigma`` standard deviations."""
    max_abs_z: float
    """Largest ``|value - center| / std`` (0 for a constant tensor)."""

    @property
    def share_beyond(self) -> float:
        """``beyond / numel``."""
        return self.beyond / self.numel if self.numel else 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class InitReport:
    """Every parameter tensor of a model; ``clip_init_`` returns the state before it clipped."""

    sigma: float
    """The bound, in standard deviations."""
    tensors: tuple[TensorInit, ...]
    """Per tensor, in ``named_parameters`` order."""

    @property
    def beyond(self) -> int:
        """Values beyond the bound, all tensors."""
        return sum(t.beyond for t in self.tensors)

    @property
    def numel(self) -> int:
        """Values checked."""
        return sum(t.numel for t in self.tensors)

    @property
    def share_beyond(self) -> float:
        """``beyond / numel``; a normal init has about 0.27% beyond 3 sigma."""
        return self.beyond / self.numel if self.numel else 0.0

    @property
    def max_abs_z(self) -> float:
        """Largest ``|z|`` of any tensor."""
        return max((t.max_abs_z for t in self.tensors), default=0.0)

    def worst(self, n: int = 5) -> tuple[TensorInit, ...]:
        """The ``n`` tensors with the largest ``|z|``."""
        return tuple(sorted(self.tensors, key=lambda t: -t.max_abs_z)[:n])


def _std_for(name: str, std: float | Mapping[str, float] | None) -> float | None:
    if std is None:
        return None
    value = std.get(name) if isinstance(std, Mapping) else std
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise InputError(f"std for {name!r} must be a positive number, got {value!r}")
    return value


def _intended(values: torch.Tensor, given: float | None) -> tuple[float, float, str]:
    if given is not None:
        return 0.0, given, "given"
    flat = values.detach().reshape(-1).double()
    center = float(flat.median())
    scale = MAD_TO_STD * float((flat - center).abs().median())
    return (center, scale, "robust") if scale > 0 else (center, 0.0, "constant")


def _bounds(center: float, std: float, sigma: float) -> tuple[float, float]:
    # One definition of the bounds for both functions, so a clipped value never counts as beyond.
    return center - sigma * std, center + sigma * std


def _check_tensor(name: str, values: torch.Tensor, sigma: float, given: float | None) -> TensorInit:
    center, std, source = _intended(values, given)
    flat = values.detach().reshape(-1).double()
    if std == 0:
        return TensorInit(
            name=name,
            numel=flat.numel(),
            center=center,
            std=0.0,
            std_source=source,
            beyond=0,
            max_abs_z=0.0,
        )
    low, high = _bounds(center, std, sigma)
    beyond = int(((flat < low) | (flat > high)).sum())
    max_abs_z = float((flat - center).abs().max()) / std
    return TensorInit(
        name=name,
        numel=flat.numel(),
        center=center,
        std=std,
        std_source=source,
        beyond=beyond,
        max_abs_z=max_abs_z,
    )


def _check_sigma(sigma: float) -> None:
    if not math.isfinite(sigma) or sigma <= 0:
        raise InputError(f"sigma must be a positive number, got {sigma!r}", hint="e.g. sigma=3.0")


def check_init(
    model: torch.nn.Module, *, sigma: float = 3.0, std: float | Mapping[str, float] | None = None
) -> InitReport:
    """Per parameter tensor: values beyond ``sigma`` standard deviations and the largest ``|z|``.

    ``std``: the intended standard deviation (centre 0) for every tensor, or per parameter name;
    tensors without one use the robust estimate (median, MAD).
    """
    _check_sigma(sigma)
    with torch.no_grad():
        tensors = tuple(
            _check_tensor(name, p, sigma, _std_for(name, std))
            for name, p in model.named_parameters()
            if p.numel() > 0
        )
    return InitReport(sigma=sigma, tensors=tensors)


def clip_init_(
    model: torch.nn.Module, *, sigma: float = 3.0, std: float | Mapping[str, float] | None = None
) -> InitReport:
    """Clip every value beyond ``sigma`` standard deviations to the bound, in place (OLMo's remedy).

    Values inside the bound are not touched. Returns the check from before clipping (what was
    clipped); ``check_init`` afterwards finds none beyond.
    """
    report = check_init(model, sigma=sigma, std=std)
    by_name = {t.name: t for t in report.tensors}
    with torch.no_grad():
        for name, p in model.named_parameters():
            found = by_name.get(name)
            if found is None or found.beyond == 0:
                continue
            low, high = _bounds(found.center, found.std, sigma)
            # Bounds rounded into the tensor's dtype could land just outside them: step inside.
            low_t = torch.tensor(low, dtype=torch.float64)
            high_t = torch.tensor(high, dtype=torch.float64)
            low_c = _inside(low_t, p.dtype, up=True)
            high_c = _inside(high_t, p.dtype, up=False)
            p.clamp_(min=low_c, max=high_c)
    return report


def _inside(bound: torch.Tensor, dtype: torch.dtype, *, up: bool) -> float:
    """The bound in ``dtype``, moved one step inward if rounding took it outside."""
    cast = bound.to(dtype)
    outside = cast.double() < bound if up else cast.double() > bound
    if outside:
        target = torch.tensor(math.inf if up else -math.inf, dtype=dtype)
        cast = torch.nextafter(cast, target)
    return float(cast)
