"""A Fenwick (binary indexed) tree over non-negative counts (Fenwick, "A new data
structure for cumulative frequency tables", Software: Practice and Experience 24(3),
1994): change one count, or find the item that holds the r-th unit, in O(log n) steps.
The simulation picks the domain of a failed node by working GPUs with it, so a failure
costs the same on 100 domains as on 100,000 (a cumulative sum per failure did not)."""

from __future__ import annotations

from typing import Iterable


class Fenwick:
    def __init__(self, counts: Iterable[int]) -> None:
        tree = [0] + [int(c) for c in counts]
        size = len(tree) - 1
        for i in range(1, size + 1):        # each node adds itself to its parent: O(n)
            parent = i + (i & -i)
            if parent <= size:
                tree[parent] += tree[i]
        self._tree, self._size = tree, size
        self._top = 1 << (size.bit_length() - 1) if size else 0

    def add(self, index: int, delta: int) -> None:
        """Add `delta` to the count of item `index` (0-based)."""
        i = index + 1
        while i <= self._size:
            self._tree[i] += delta
            i += i & -i

    def find(self, unit: int) -> int:
        """The first item whose running total exceeds `unit` (0-based; the item count when
        none does): `np.searchsorted(np.cumsum(counts), unit, side="right")`."""
        pos, step, tree = 0, self._top, self._tree
        while step:
            nxt = pos + step
            if nxt <= self._size and tree[nxt] <= unit:
                pos, unit = nxt, unit - tree[nxt]
            step >>= 1
        return pos
