"""The edge counts placement prices ragged groups and pipeline sends with (model/network/
placement.py `_straddling`, `_sends_leaving`) are counted over one period of the pattern with
early exits (a search asks them of hundreds of layouts): each equals its definition counted
rank by rank over every block of a job its groups tile."""

from hypothesis import given
from hypothesis import strategies as st

from gclc.model.network.placement import _sends_leaving, _straddling
from gclc.testing import load_profile

load_profile()


def _blocks(domain: int, ranks: int):
    return [(lo, min(lo + domain, ranks)) for lo in range(0, ranks, domain)]


def straddling_by_definition(extent: int, domain: int, ranks: int) -> int:
    """The most groups of `extent` consecutive ranks that an edge of one block cuts (an edge
    strictly inside the job and strictly inside a group)."""
    if extent > ranks:
        return 0
    worst = 0
    for lo, hi in _blocks(domain, ranks):
        cut = {edge // extent for edge in (lo, hi) if 0 < edge < ranks and edge % extent}
        worst = max(worst, len(cut))
    return worst


def sends_by_definition(size: int, stride: int, domain: int, ranks: int) -> int:
    """The most ranks of one block that send forward (not on a pipeline's last stage) to a
    partner `stride` ahead at or past the block's end."""
    extent = size * stride
    return max([sum(1 for r in range(lo, hi) if r % extent < extent - stride and r + stride >= hi)
                for lo, hi in _blocks(domain, ranks)] or [0])


# (groups and pipelines tile the job's ranks from 0, as placement asks: ranks = extent x count)
@given(st.integers(1, 48), st.integers(1, 80), st.integers(1, 24))
def test_straddling_counts_every_block(extent, domain, count):
    ranks = extent * count
    assert _straddling.__wrapped__(extent, domain, ranks) == straddling_by_definition(extent, domain, ranks)


@given(st.integers(1, 12), st.integers(1, 24), st.integers(1, 80), st.integers(1, 12))
def test_sends_leaving_counts_every_block(size, stride, domain, count):
    ranks = size * stride * count
    assert _sends_leaving.__wrapped__(size, stride, domain, ranks) == sends_by_definition(size, stride, domain, ranks)
