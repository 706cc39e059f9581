"""Rolling median and MAD of the last ``size`` values (the watch's windows). Standard library only."""

from __future__ import annotations

import bisect
from collections import deque


class RollingMedian:
    """Median (and MAD) of the last ``size`` values, kept sorted; O(size) per update."""

    __slots__ = ("_order", "_sorted")

    def __init__(self, size: int) -> None:
        self._order: deque[float] = deque(maxlen=size)
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._order)

    def push(self, value: float) -> None:
        if len(self._order) == self._order.maxlen:
            oldest = self._order[0]
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._order.append(value)
        bisect.insort(self._sorted, value)

    def median(self) -> float:
        values, n = self._sorted, len(self._sorted)
        mid = n // 2
        return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2

    def mad(self, center: float) -> float:
        deviations = sorted(abs(v - center) for v in self._sorted)
        n, mid = len(deviations), len(deviations) // 2
        return deviations[mid] if n % 2 else (deviations[mid - 1] + deviations[mid]) / 2

    def clear(self) -> None:
        self._order.clear()
        self._sorted.clear()
