"""The node group of a lineage run: which nodes are out for repair, and the spares to swap in."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gpuyield.simulate.failures import Outages


@dataclass(frozen=True, kw_only=True, slots=True)
class JobNodes:
    """The nodes a job starts on, and how they differ from the run's last job's."""

    nodes: list[int]
    #: Nodes of the last job out for repair now.
    dropped: set[int]
    #: Spares swapped in for them.
    added: list[int]
    #: When the job starts (later than asked when it waited for a repair).
    start_s: int


class NodePool:
    """Which nodes of the group are out for repair, and the spares free to swap in.

    Start times only grow, so the nodes out at ``t`` are kept by a sweep over the outages (a heap
    of return times): a restart costs the number of nodes out, not the size of the job.
    """

    def __init__(self, outages: Outages, spares: list[int]) -> None:
        self.down: dict[int, list[tuple[int, int]]] = {}
        for i in range(len(outages)):
            self.down.setdefault(int(outages.node[i]), []).append(
                (int(outages.fail_s[i]), int(outages.back_s[i]))
            )
        self.spares = sorted(spares)
        self._fail = outages.fail_s.tolist()
        self._back = outages.back_s.tolist()
        self._node = outages.node.tolist()
        self._next = 0
        self._returns: list[tuple[int, int]] = []  # heap of (back, node) of outages under way
        self.out: dict[int, int] = {}  # node -> outages under way
        self._t = -1
        self.lent: list[int] = []  # heap: until when each spare lent to a dropped replica is busy

    def back_at(self, node: int, t: int) -> int | None:
        """When the outage covering ``t`` on ``node`` ends (None: no outage covers it)."""
        for fail, back in self.down.get(node, ()):
            if fail <= t < back:
                return back
        return None

    def lend_spare(self, t: int, until: int) -> bool:
        """Lend a healthy spare from ``t`` to ``until`` to a dropped replica, if one is free."""
        self._advance(t)
        while self.lent and self.lent[0] <= t:
            heapq.heappop(self.lent)
        if sum(n not in self.out for n in self.spares) <= len(self.lent):
            return False
        heapq.heappush(self.lent, until)
        return True

    def _advance(self, t: int) -> None:
        assert t >= self._t, (t, self._t)
        while self._next < len(self._fail) and self._fail[self._next] <= t:
            node = self._node[self._next]
            heapq.heappush(self._returns, (self._back[self._next], node))
            self.out[node] = self.out.get(node, 0) + 1
            self._next += 1
        while self._returns and self._returns[0][0] <= t:
            _, node = heapq.heappop(self._returns)
            self.out[node] -= 1
            if not self.out[node]:
                del self.out[node]
        self._t = t

    def fill(self, active: list[int], active_set: set[int], t: int, need: int) -> JobNodes:
        """Nodes for a job starting at or after ``t``: healthy ones, then spares; wait if short."""
        while True:
            self._advance(t)
            bad = {n for n in self.out if n in active_set}
            healthy = [n for n in active if n not in bad] if bad else active
            spare_ok = [n for n in self.spares if n not in self.out]
            short = need - len(healthy)
            assert short >= 0, (need, len(healthy))
            if short <= len(spare_ok):
                self.lent.clear()  # a new job: every dropped replica's stand-in is given back
                used = spare_ok[:short]
                self.spares = sorted((set(self.spares) - set(used)) | bad)
                return JobNodes(nodes=healthy + used, dropped=bad, added=used, start_s=t)
            t = self._returns[0][0]  # wait for the next repair


__all__ = ["JobNodes", "NodePool"]
