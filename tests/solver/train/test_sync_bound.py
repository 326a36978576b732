"""The synchronization bound (solver/train/sync_bound.py) on its own: for any step S at least the
bound B of every other term, and any layer pass at most S / m, the step S + exposed(pass)
is never below `raised(B)`; and `raised` gives B back when nothing is exposed."""

from hypothesis import given, settings, strategies as st

from gclc.model.train import dp_sync
from gclc.solver.train.sync_bound import raised

SECONDS = st.floats(min_value=0.0, max_value=50.0, allow_nan=False)
TRAFFIC = st.builds(dp_sync.Traffic, SECONDS, SECONDS, SECONDS, SECONDS, SECONDS)


@settings(max_examples=max(300, settings.default.max_examples), deadline=None)
@given(TRAFFIC, st.sampled_from((0, 1, 2, 3)), st.integers(1, 64), st.booleans(), SECONDS,
       st.floats(0.0, 40.0), st.floats(0.0, 1.0))
def test_no_step_above_the_other_terms_is_below_the_raised_bound(traffic, zero, m, overlap, bound, more, share):
    step_without = bound + more          # the step less synchronization: at least the bound
    layer_pass = share * step_without / m   # it holds m layer passes, so one is at most S / m
    step = step_without + dp_sync.exposed(traffic, zero, m, overlap, layer_pass)
    assert raised(bound, traffic, zero, m, overlap) <= step * (1 + 1e-12)


@settings(max_examples=max(100, settings.default.max_examples // 3), deadline=None)
@given(TRAFFIC, st.sampled_from((0, 1, 2, 3)), st.integers(1, 64), st.booleans(), SECONDS)
def test_the_raised_bound_is_the_least_step_a_fine_scan_finds(traffic, zero, m, overlap, bound):
    """Tight, not merely valid: scanning S from the bound past every kink in fine steps finds
    no step below it, and one within the scan's resolution of it (the function's slope
    is at most 2 in size)."""
    value = raised(bound, traffic, zero, m, overlap)
    assert value >= bound
    far = bound + m * (max(traffic) * 3 + 1)          # past the last kink
    width = (far - bound) / 4000
    scan = min(s + dp_sync.exposed(traffic, zero, m, overlap, s / m)
               for s in (bound + i * width for i in range(4001)))
    assert value <= scan * (1 + 1e-12)
    assert scan - value <= 2 * width + 1e-9


def test_nothing_to_synchronize_leaves_the_bound():
    none = dp_sync.Traffic(0.0, 0.0, 0.0, 0.0, 0.0)
    for zero in (0, 1, 3):
        assert raised(7.5, none, zero, 4, True) == 7.5


@settings(max_examples=max(300, settings.default.max_examples), deadline=None)
@given(TRAFFIC, TRAFFIC, st.sampled_from((0, 1, 2, 3)), st.integers(1, 64), st.integers(0, 64), st.booleans(), SECONDS)
def test_the_search_reads_the_fewest_micro_batches_and_the_shortest_traffic(traffic, other, zero, m, more, overlap,
                                                                            bound):
    """What SyncFloor.step keeps of a layout's choices: more micro-batches never lower the
    raised bound (each pass is shorter, ZeRO-3 gathers per micro-batch), nor does a traffic
    no shorter in any collective (so a dominated placement order is dropped), and ZeRO-1 and
    2 raise it alike."""
    assert raised(bound, traffic, zero, m, overlap) <= raised(bound, traffic, zero, m + more, overlap) * (1 + 1e-12)
    longer = dp_sync.Traffic(*(max(a, b) for a, b in zip(traffic, other)))
    assert raised(bound, traffic, zero, m, overlap) <= raised(bound, longer, zero, m, overlap) * (1 + 1e-12)
    assert raised(bound, traffic, 1, m, overlap) == raised(bound, traffic, 2, m, overlap)
