"""Slurm host lists: expansion as slurm.conf(5) describes it, and compression back."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from gclc.compiler.hostlist import HOSTNAME, HostlistError, compress, expand, expand_all, lines


def test_expansion_keeps_padding_and_order():
    assert expand("dgx[001-003,010]") == ["dgx001", "dgx002", "dgx003", "dgx010"]
    assert expand("rack07-node[1-2]-ib") == ["rack07-node1-ib", "rack07-node2-ib"]
    assert expand("login") == ["login"]
    assert expand("n[1-2,4],login,m7") == ["n1", "n2", "n4", "login", "m7"]
    assert expand_all(["a[1-2]", "b"]) == ["a1", "a2", "b"]


@pytest.mark.parametrize("bad", ["dgx[3-1]", "dgx[a-b]", "dgx[1-2", "a[1]b[2]", "dgx[]", "a,,b"])
def test_malformed_lists_say_what_is_wrong(bad):
    with pytest.raises(HostlistError):
        expand(bad)


def test_compression_is_the_usual_host_list():
    assert compress(expand("dgx-h100-[001-127]")) == "dgx-h100-[001-127]"
    assert compress(["n9", "n10", "n11", "m1"]) == "n[9-11],m1"
    assert compress(["c07", "c08", "c1"]) == "c[07-08],c1"


names = st.lists(st.builds(lambda prefix, number, width: f"{prefix}{number:0{width}d}",
                           st.sampled_from(["dgx", "gb200-0001-node", "a", "rack7-n"]),
                           st.integers(0, 2000), st.integers(1, 4)), unique=True, max_size=60)


@given(names)
def test_compressed_lists_expand_to_the_same_names_in_order(hosts):
    assert expand_all(lines(hosts, width=40)) == hosts
    assert all(len(line) <= 40 or "," not in line for line in lines(hosts, width=40))


@given(names)
def test_generated_names_are_valid_host_names(hosts):
    assert all(HOSTNAME.match(h) for h in hosts)
