"""GPU-seconds summed exactly, so a figure does not depend on the order an engine adds rows in.

Floating-point sums depend on their order: DuckDB's threads, Spark's partitions and a lake's files
each add the same segments in another order, and the 16th digit of a total moved with it (a report
on a store and on Spark then differed in its JSON). Here each value becomes an integer count of
micro-GPU-seconds (a segment of whole seconds and GPUs stays exact), and the counts are summed in
38 decimal digits: integer sums are the same in every order and every engine.
"""

from __future__ import annotations

from decimal import Decimal

import ibis.expr.types as ir

#: Units per GPU-second in exact sums: a micro-GPU-second, far below any figure a report prints
#: (the ledger's own tolerance is a milli-GPU-second).
UNITS_PER_GPU_SECOND = 1_000_000
_DECIMAL = "decimal(38, 0)"


def in_units(gpu_seconds: ir.NumericValue) -> ir.DecimalValue:
    """A value in GPU-seconds as whole micro-GPU-seconds (38 digits, so sums cannot overflow)."""
    units = (gpu_seconds.cast("float64") * UNITS_PER_GPU_SECOND).round().cast("int64")
    return units.cast(_DECIMAL)


def exact_sum(gpu_seconds: ir.NumericColumn) -> ir.DecimalScalar:
    """The sum of a GPU-seconds column, exact (in micro-GPU-seconds; ``gpu_seconds`` reads it)."""
    return in_units(gpu_seconds).sum()


def units_sum(units: ir.DecimalColumn) -> ir.DecimalScalar:
    """The sum of sums already in units (a total of groups), exact."""
    return units.sum().cast(_DECIMAL)


def gpu_seconds(units: Decimal | int | float | None) -> float:
    """An exact sum back in GPU-seconds (None, an empty sum: 0)."""
    if units is None:
        return 0.0
    return float(Decimal(units) / UNITS_PER_GPU_SECOND)


def json_number(gpu_seconds: float) -> float | int:
    """A figure as ``--json`` prints it: whole GPU-seconds as integers, estimates keep their fraction."""
    return round(gpu_seconds) if abs(gpu_seconds - round(gpu_seconds)) < 1e-6 else gpu_seconds
