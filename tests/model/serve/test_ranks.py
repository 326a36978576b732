"""A serve replica's ranks in its engine's order (model/serve/ranks.py): laws over any layout of
powers of two on a node / leaf / spine hierarchy, in SGLang's order and in vLLM's. Where vLLM
actually puts the groups is checked against vLLM's own code in tests/views/test_export_vllm.py."""

from hypothesis import given, strategies as st

from gclc.compiler.ir import Tier
from gclc.dsl.source import no_span
from gclc.model.serve import ranks
from gclc.model.serve.inference import ServeConfig
from gclc.testing import load_profile

load_profile()

TIERS = tuple(Tier(level, f"t{level}", "f", "nvlink", "node", group, 400e9 / 4 ** level, 1e-6, 1.0, False, 1.0,
                   span=no_span()) for level, group in enumerate((8, 64, 4096)))
ORDERS = (ranks.DEFAULT_ORDER, ("tp", "pp", "ep"))
powers = st.sampled_from([1, 2, 4, 8, 16])


def holding(members) -> object:
    """The innermost tier one of whose domains (blocks of group_gpus consecutive ranks) holds every member."""
    return next(t for t in TIERS if len({m // t.group_gpus for m in members}) == 1)


@given(powers, powers, powers, st.sampled_from(ORDERS))
def test_a_replicas_ranks_are_each_gpu_once_and_its_groups_meet_where_their_ranks_sit(tp, ep, pp, order):
    c = ServeConfig(tp=tp, batch=1, ep=ep, pp=pp)
    every = [ranks.rank(c, order, t, e, s) for t in range(tp) for e in range(ep) for s in range(pp)]
    assert sorted(every) == list(range(c.gpus))
    assert sorted(r for s in range(pp) for r in ranks.stage_ranks(c, order, s)) == list(range(c.gpus))
    experts = ranks.expert_stages(c, order, TIERS)
    product = 1
    for stage in experts:
        product *= stage.peers
    assert product == tp * ep
    if tp * ep > 1:   # the all-to-all's outermost tier: the one a domain of which holds each stage's ranks
        assert experts[-1].tier == max((holding(ranks.stage_ranks(c, order, s)) for s in range(pp)), key=TIERS.index)
    if order != ranks.DEFAULT_ORDER and pp > 1:   # each hop: the tier that holds every pair of neighbours
        for s, tier in enumerate(ranks.hops(c, order, TIERS)):
            pairs = [(ranks.rank(c, order, t, e, s), ranks.rank(c, order, t, e, s + 1)) for t in range(tp) for e in range(ep)]
            assert tier == max((holding(p) for p in pairs), key=TIERS.index)
