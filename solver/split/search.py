"""The exact optimum of the heterogeneous split (solver/split/lanes.py): which partitions run
which alternative, on how many granules, so that the step time

    factor(m) x (the slowest partition's busy time) + (the largest exchange at m)

is least, m being the number of partitions taking part. No MILP: the problem splits into
small ones that are each solved exactly.

1. Counts of partitions with the same costs form one range [lo, hi] (in the data split
   usually two: one partition, and any number above, when the exchange does not depend
   on the count). Within a range every alternative's exchange and the bubble are fixed.
2. Within a range, the exchange W is one of the alternatives' exchanges: for each W only
   the alternatives whose exchange is at most W may run, and the step time is
   factor x c + W with c the busy-time cap. c is one of the finitely many busy times
   f + d g k, sorted once; a cap is feasible when the items can be made of whole granules,
   at most one alternative per partition, each within the cap: a dynamic program over
   the partitions whose state is the set of reachable (count, items) pairs as the bits of
   one integer (shift = take k granules; a window of k by doubling). Feasibility grows
   with c, so the least cap is found by search over the sorted busy times.
3. The (range, W) pairs are visited by a lower bound (the fluid one: each partition's
   largest share under the cap, the best `hi` of them must reach the total) and any pair
   whose bound cannot beat the best found so far is skipped. Skipping is exact: the
   bound never exceeds the pair's optimum.

When every exchange and the bubble grow with the count (as physics has them), a range
may admit fewer partitions than lo: their true step time is then no more than the one
evaluated at hi, and the optimum still appears in its own range; "at most hi" is then
checked with the fewest partitions that make each count of items (one run per allowed set
and cap serves every hi). Otherwise only counts in [lo, hi] are admitted (the count in the
bits). With no upper limit on the count left, the count drops out (bits of items only).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import attrs
import numpy as np
from ...dsl.records import frozen


_NONE = 1 << 40                  # "no way to make these items" in the fewest-partitions arrays


def _shifted(values: np.ndarray, by: int) -> np.ndarray:
    """values[s - by] at s (nothing below `by`)."""
    out = np.full_like(values, _NONE)
    if by < len(values):
        out[by:] = values[:len(values) - by]
    return out


@frozen
class Choice:
    """One alternative of a class of identical partitions, as the search sees it."""

    lane: Any                    # solver.split.lanes.Lane: busy(items), exchange(count)
    granule: int
    most: int                    # granules one copy may take (within the total)
    copies: int                  # partitions of the class
    kind: int                    # the class


@frozen
class _Pair:
    """A subproblem: counts in [least, hi] (the cost evaluated at hi), exchange W."""

    least: int
    hi: int
    factor: float
    exchange: float
    allowed: frozenset[int]        # the choices that may run
    counted: bool                # the count is part of the state


def optimum(total: int, choices: Sequence[Choice], factor: Sequence[float]) -> dict[tuple[int, int], int] | None:
    """The optimal split as {(choice, copy): granules}, or None when no split exists."""
    return _Search(total, choices, factor).run()


class _Search:
    def __init__(self, total: int, choices: Sequence[Choice], factor: Sequence[float]):
        self.total, self.choices, self.factor = total, list(choices), list(factor)
        self.size = len(factor)
        self.classes: dict[int, list[int]] = {}
        for i, c in enumerate(self.choices):
            self.classes.setdefault(c.kind, []).append(i)
        busy = [np.asarray([c.lane.busy(c.granule * k) for k in range(1, c.most + 1)], dtype=float)
                for c in self.choices]
        self.caps = np.unique(np.concatenate(busy)) if busy else np.zeros(0)
        self.fewest: dict[tuple[frozenset[int], float], int] = {}   # (choices, cap): fewest partitions

    # ------------------------------------------------------------ the subproblems

    def pairs(self) -> list[_Pair]:
        profiles = [(self.factor[m - 1], tuple(c.lane.exchange(m) for c in self.choices))
                    for m in range(1, self.size + 1)]
        monotone = all(a[0] <= b[0] and all(x <= y for x, y in zip(a[1], b[1]))
                       for a, b in zip(profiles, profiles[1:]))
        ranges, lo = [], 1
        for m in range(1, self.size + 1):
            if m == self.size or profiles[m] != profiles[m - 1]:
                ranges.append((lo, m))
                lo = m + 1
        out = []
        for lo, hi in ranges:
            least = 1 if monotone else lo
            f, exchanges = profiles[hi - 1]
            for w in sorted(set(exchanges)):
                allowed = tuple(i for i, x in enumerate(exchanges) if x <= w)
                out.append(_Pair(least, hi, f, w, frozenset(allowed), not (least == 1 and hi == self.size)))
        return out

    def run(self) -> dict[tuple[int, int], int] | None:
        if not len(self.caps):
            return None
        everything = _Pair(1, self.size, 1.0, 0.0, frozenset(range(len(self.choices))), False)
        floor = self._least(everything, 0, len(self.caps) - 1, self._fluid)   # no pair's cap is lower
        if floor is None:
            return None
        best: tuple[float, _Pair, int] | None = None
        for bound, pair in sorted(((p.factor * self.caps[floor] + p.exchange, p) for p in self.pairs()),
                                  key=lambda bp: bp[0]):
            if best is not None and bound >= best[0]:
                break
            found = self._solve(pair, best[0] if best else math.inf)
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], pair, found[1])
        return None if best is None else self._witness(best[1], self.caps[best[2]])

    def _solve(self, pair: _Pair, beat: float) -> tuple[float, int] | None:
        """The least feasible cap of `pair` (as (step time, index)) if it beats `beat`."""
        top = len(self.caps) - 1
        if beat < math.inf:
            top = int(np.searchsorted(self.caps, (beat - pair.exchange) / pair.factor, side="right")) - 1
            while top >= 0 and pair.factor * self.caps[top] + pair.exchange >= beat:
                top -= 1
        if top < 0 or not self._fluid(pair, self.caps[top]) or not self._feasible(pair, self.caps[top]):
            return None
        low = self._least(pair, 0, top, self._fluid)        # nothing below passes even the bound
        # gallop up from the bound (the least cap is usually a few steps above it), then bisect
        step, last_bad = 1, low - 1
        probe = low
        while probe < top and not self._feasible(pair, self.caps[probe]):
            last_bad, probe, step = probe, min(top, probe + step), step * 2
        index = self._least(pair, last_bad + 1, probe, self._feasible)
        return pair.factor * self.caps[index] + pair.exchange, index

    def _least(self, pair: _Pair, lo: int, hi: int, test) -> int | None:
        """The least index in [lo, hi] whose cap passes the monotone `test` (hi if none below)."""
        if not test(pair, self.caps[hi]):
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            if test(pair, self.caps[mid]):
                hi = mid
            else:
                lo = mid + 1
        return hi

    # ------------------------------------------------------------ one cap

    def _window(self, i: int, cap: float) -> tuple[int, int]:
        """The granule counts k in [1, most] whose busy time is within `cap` (an interval)."""
        c = self.choices[i]
        lane, g, most = c.lane, c.granule, c.most
        fits = lambda k: lane.busy(g * k) <= cap
        if lane.per_item > 0:
            k = min(most, max(0, int((cap - lane.fixed) / (lane.per_item * g)) if cap > lane.fixed else 0))
            while k < most and fits(k + 1):
                k += 1
            while k >= 1 and not fits(k):
                k -= 1
            return (1, k)
        if lane.per_item == 0:
            return (1, most) if fits(1) else (1, 0)
        k = max(1, min(most + 1, math.ceil((cap - lane.fixed) / (lane.per_item * g))))
        while k > 1 and fits(k - 1):
            k -= 1
        while k <= most and not fits(k):
            k += 1
        return (k, most)

    def _fluid(self, pair: _Pair, cap: float) -> bool:
        """A bound: the `hi` partitions with the largest shares under the cap reach the total."""
        shares: list[tuple[int, int]] = []
        for members in self.classes.values():
            best = 0
            for i in members:
                if i in pair.allowed:
                    lo, hi = self._window(i, cap)
                    if hi >= lo:
                        best = max(best, hi * self.choices[i].granule)
            if best:
                shares.append((best, self.choices[members[0]].copies))
        reach, left = 0, pair.hi
        for share, copies in sorted(shares, reverse=True):
            take = min(copies, left)
            reach, left = reach + take * share, left - take
            if reach >= self.total or not left:
                break
        return reach >= self.total

    def _copies(self, pair: _Pair, cap: float) -> list[tuple[int, int, list[tuple[int, int, int, int]]]]:
        """The partitions in order, each as (class choice, copy, [(choice, granule, k_lo, k_hi)])."""
        out = []
        for members in self.classes.values():
            windows = []
            for i in members:
                if i in pair.allowed:
                    lo, hi = self._window(i, cap)
                    if hi >= lo:
                        windows.append((i, self.choices[i].granule, lo, hi))
            if windows:
                copies = self.choices[members[0]].copies
                out += [(members[0], q, windows) for q in range(min(copies, pair.hi) if pair.counted else copies)]
        return out

    def _layout(self, pair: _Pair) -> tuple[int, int, int]:
        """(bits per count block, shift that adds one partition, mask of the valid bits)."""
        width = self.total + 1
        if not pair.counted:
            return width, 0, (1 << width) - 1
        block = 2 * width             # a window's shift stays inside its block
        row = (1 << width) - 1
        mask = 0
        for j in range(pair.hi + 1):
            mask |= row << (j * block)
        return block, block, mask

    def _run(self, pair: _Pair, cap: float, keep: bool) -> tuple[int, list[int]]:
        block, one, mask = self._layout(pair)
        state, states = 1, []
        for _, _, windows in self._copies(pair, cap):
            if keep:
                states.append(state)
            new = state
            for _, g, lo, hi in windows:
                cur = (state << (one + g * lo)) & mask
                span, width = 1, hi - lo + 1
                while span < width:
                    step = min(span, width - span)
                    cur |= (cur << (g * step)) & mask
                    span += step
                new |= cur
            if not keep and not pair.counted and new == state:
                continue
            state = new
            if not keep and not pair.counted and state >> self.total & 1:
                break
        return state, states

    def _final(self, pair: _Pair, state: int) -> int | None:
        """A count whose block holds the total (the count itself; 0 without counts)."""
        block = self._layout(pair)[0]
        if not pair.counted:
            return 0 if state >> self.total & 1 else None
        for j in range(pair.hi, pair.least - 1, -1):
            if state >> (j * block + self.total) & 1:
                return j
        return None

    def _feasible(self, pair: _Pair, cap: float) -> bool:
        if pair.counted and pair.least == 1:
            key = (pair.allowed, float(cap))
            if key not in self.fewest:
                self.fewest[key] = int(self._fewest(pair, cap, keep=False)[0][self.total])
            return self.fewest[key] <= pair.hi
        return self._final(pair, self._run(pair, cap, keep=False)[0]) is not None

    def _fewest(self, pair: _Pair, cap: float, keep: bool) -> tuple[np.ndarray, list[np.ndarray]]:
        """For "at most hi partitions" the fewest partitions that make each count of items
        (an array; a run serves every hi): the same recursion as `_run`, min for or."""
        whole = attrs.evolve(pair, hi=self.size)
        state = np.full(self.total + 1, _NONE, dtype=np.int64)
        state[0] = 0
        states = []
        for _, _, windows in self._copies(whole, cap):
            if keep:
                states.append(state)
            new = state
            for _, g, lo, hi in windows:
                cur = _shifted(state, g * lo) + 1
                span, width = 1, hi - lo + 1
                while span < width:
                    step = min(span, width - span)
                    cur = np.minimum(cur, _shifted(cur, g * step))
                    span += step
                new = np.minimum(new, cur)
            state = new
        return state, states

    def _fewest_witness(self, pair: _Pair, cap: float) -> dict[tuple[int, int], int]:
        state, states = self._fewest(pair, cap, keep=True)
        s, count = self.total, int(state[self.total])
        picks: dict[tuple[int, int], int] = {}
        whole = attrs.evolve(pair, hi=self.size)
        for (_, q, windows), before in zip(reversed(self._copies(whole, cap)), reversed(states)):
            if before[s] == count:
                continue                                  # this partition need not run
            i, g, k = next((i, g, k) for i, g, lo, hi in windows for k in range(lo, hi + 1)
                           if s - g * k >= 0 and before[s - g * k] == count - 1)
            picks[(i, q)] = k
            s, count = s - g * k, count - 1
        assert s == 0 and count == 0, "the witness must account for every item"
        return picks

    def _witness(self, pair: _Pair, cap: float) -> dict[tuple[int, int], int]:
        """Walk the kept states back from the total: which partition takes what."""
        if pair.counted and pair.least == 1:
            return self._fewest_witness(pair, cap)
        state, states = self._run(pair, cap, keep=True)
        block = self._layout(pair)[0]
        j, s = self._final(pair, state), self.total
        bit = lambda st, count, items: items >= 0 and st >> (count * block + items) & 1
        picks: dict[tuple[int, int], int] = {}
        for (_, q, windows), before in zip(reversed(self._copies(pair, cap)), reversed(states)):
            if bit(before, j, s):
                continue                                  # this partition need not run
            back = j - 1 if pair.counted else 0
            i, g, k = next((i, g, k) for i, g, lo, hi in windows for k in range(lo, hi + 1)
                           if bit(before, back, s - g * k))
            picks[(i, q)] = k
            j, s = back, s - g * k
        assert s == 0, "the witness must account for every item"
        return picks
