"""Goodput's checkpoint over the DPU path (solver/schedule/failures.py, model/train/dpu.py): a node
whose DPUs take storage writes and reads its checkpoint over their ports beside the host's
`storage` path, so the checkpoint is shorter and goodput higher; a node without DPUs, or
whose DPUs take only the network, is unchanged. Checked on hand calculations and as a law."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gclc.compiler.driver import check_text
from gclc.model.train import dpu
from gclc.model.job import train_job
from gclc.solver.schedule import failures
from gclc.model.train.host import CHECKPOINT_BYTES_PER_PARAM, NODE_STORAGE_BPS
from gclc.solver.schedule.goodput import RESTART_FIXED_S

DESIGN = """
chip G {{ peak {{ bf16 = 1000 TFLOPS }} hbm {{ capacity = 80 GB  bandwidth = 3 TB/s }} power {{ tdp = 700 W }} }}
dpu Dpu {{ bandwidth = {line} Gb/s  cores = 16 {offload} }}
fabric Up {{ kind = nvlink  topology = switched  bandwidth = 450 GB/s }}
fabric Ib {{ kind = infiniband  topology = fat_tree(tiers = 2, radix = 64)  bandwidth = 400 Gb/s  latency = 1 us }}
node Box {{ gpus = 8 x G  scaleup = Up {storage} {dpus} }}
cluster C {{ units = 64 x Box  scaleout = Ib }}
model M {{ arch = dense  layers = 32  hidden = 4096  heads = 32  kv_heads = 8  ffn = 14336  vocab = 128256  seq = 4096 }}
train t {{ model = M  on = C  batch = 512 }}
"""


def job(dpus: str = "", offload: str = "", storage: str = "storage = 2 GB/s", line: int = 400):
    result = check_text(DESIGN.format(dpus=dpus, offload=offload, storage=storage, line=line), "ckpt.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def cluster_of(j):
    return j.entity.get("on")


def test_a_node_without_dpus_writes_at_its_storage_bandwidth():
    j = job()
    assert failures.node_storage(cluster_of(j), j.partition) == 2e9
    # by hand: 14 bytes per parameter over 16 nodes at 2 GB/s each; the restart reads it back
    good = failures.job_goodput(j, 128)
    size = CHECKPOINT_BYTES_PER_PARAM * j.shape.params
    assert good.write == pytest.approx(size / (16 * 2e9))
    assert good.restart == pytest.approx(RESTART_FIXED_S + size / (16 * 2e9))
    undeclared = job(storage="")
    assert failures.node_storage(cluster_of(undeclared), undeclared.partition) == NODE_STORAGE_BPS


def test_storage_dpus_add_their_line_rate_and_raise_goodput():
    plain = job()
    fast = job(dpus="dpus = 2 x Dpu")  # storage and input by default
    # 2 DPUs x 400 Gb/s = 100 GB/s beside the host's 2 GB/s
    assert dpu.storage_rate(fast.partition.node) == pytest.approx(2 * 400e9 / 8)
    assert failures.node_storage(cluster_of(fast), fast.partition) == pytest.approx(2e9 + 100e9)
    slow_good, fast_good = failures.job_goodput(plain, 128), failures.job_goodput(fast, 128)
    assert fast_good.write == pytest.approx(slow_good.write * 2 / 102)
    assert fast_good.restart < slow_good.restart
    assert fast_good.efficiency > slow_good.efficiency


def job_with_nics(count: int, line: int):
    """The node of `job()` with `count` plain NICs of `line` Gb/s as its scale-out cards."""
    text = DESIGN.format(dpus=f"nics = {count} x Nic", offload="", storage="storage = 2 GB/s", line=line)
    result = check_text(text + f"nic Nic {{ bandwidth = {line} Gb/s }}\n", "ckpt.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


def test_dpus_that_do_not_take_storage_change_nothing():
    """A DPU that takes only the network adds nothing to the checkpoint path. Its ports are the
    node's scale-out links (model/train/dpu.py: it is the node's scale-out NIC), so one at the fabric's
    rate, where the node had no card, changes nothing at all; two cable twice the ports into the
    fabric (more switches to fail) but write and read the checkpoint as fast."""
    plain = failures.job_goodput(job(), 128)
    one = job(dpus="dpus = 1 x Dpu", offload="offload = [network]")
    assert dpu.storage_rate(one.partition.node) == 0
    assert failures.job_goodput(one, 128) == plain
    two = failures.job_goodput(job(dpus="dpus = 2 x Dpu", offload="offload = [network]"), 128)
    assert (two.write, two.restart) == (plain.write, plain.restart)


def test_a_stated_job_bandwidth_wins_over_the_paths():
    text = DESIGN.format(dpus="dpus = 2 x Dpu", offload="", storage="", line=400).replace(
        "batch = 512", "batch = 512  checkpoint { bandwidth = 20 GB/s }")
    result = check_text(text, "ckpt.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    j = train_job(result.design)
    assert failures.job_goodput(j, 128).write == pytest.approx(CHECKPOINT_BYTES_PER_PARAM * j.shape.params / 20e9)


@settings(max_examples=max(5, settings.default.max_examples // 10), deadline=None)
@given(st.integers(1, 4), st.sampled_from([25, 100, 400, 800]), st.sampled_from(["", "offload = [network]",
                                                                                 "offload = [storage]"]),
       st.sampled_from([8, 64, 512]))
def test_dpus_never_lower_goodput_and_raise_it_when_they_take_storage(count, line, offload, gpus):
    # DPUs that take the network are the node's scale-out NICs: against NICs of the same line
    # rate they change who runs the transport, never the checkpoint or the fabric
    network = "network]" in offload
    plain = failures.job_goodput(job_with_nics(count, line) if network else job(line=line), gpus)
    with_dpus = failures.job_goodput(job(dpus=f"dpus = {count} x Dpu", offload=offload, line=line), gpus)
    assert with_dpus.write <= plain.write and with_dpus.efficiency >= plain.efficiency
    if not network:  # the DPUs take storage (the default or stated)
        assert with_dpus.write < plain.write and with_dpus.efficiency > plain.efficiency


def test_explain_shows_the_dpu_paths_with_their_formulas():
    from gclc.compiler.lower import lower
    from gclc.model.chip_metrics import chip_metrics

    result = check_text(DESIGN.format(dpus="dpus = 2 x Dpu", offload="", storage="", line=400), "ckpt.gcl")
    rows = {m.key: m for m in chip_metrics(lower(result.design))}
    assert rows["node.Box.dpu_storage"].value == pytest.approx(100e9)
    assert "2 x 50 GB/s line rate" in rows["node.Box.dpu_storage"].formula
    assert rows["node.Box.dpu_input"].value == pytest.approx(2 * 16e9)  # 16 Arm cores at 1 GB/s each, under 50 GB/s
    plain = check_text(DESIGN.format(dpus="", offload="", storage="", line=400), "ckpt.gcl")
    assert not any(k.endswith(("dpu_storage", "dpu_input")) for k in (m.key for m in chip_metrics(lower(plain.design))))


# ----------------------------------------------------------------- one checkpoint model: step and goodput


def with_job(extra: str, dpus: str = ""):
    text = DESIGN.format(dpus=dpus, offload="", storage="storage = 2 GB/s", line=400).replace(
        "batch = 512", f"batch = 512  {extra}")
    result = check_text(text, "ckpt.gcl")
    assert result.ok, [str(d) for d in result.diagnostics]
    return train_job(result.design)


@pytest.mark.parametrize("extra, dpus", [("checkpoint_every = 30 min", ""),
                                         ("checkpoint_every = 30 min", "dpus = 2 x Dpu"),
                                         ("checkpoint_every = 1 h  checkpoint { size = 300 GB }", "dpus = 2 x Dpu"),
                                         ("checkpoint_every = 1 h  checkpoint { bandwidth = 20 GB/s }", "")])
def test_the_step_and_goodput_write_the_same_checkpoint_in_the_same_time(extra, dpus):
    from gclc.model.train import host
    from gclc.model.job import pinned_config

    j = with_job(extra, dpus)
    cfg = pinned_config(j)
    good = failures.job_goodput(j, cfg.gpus)
    assert good.write == pytest.approx(host.checkpoint_time(j.shape, cfg, j.partition))
    # the interval is the job's, and the step already carries each save: the write is counted once
    assert good.pinned and good.interval == cfg.checkpoint_every
    assert good.efficiency == pytest.approx(1 - (good.restart + (good.interval + good.write) / 2) / good.mtbf)


def test_a_job_states_its_checkpoint_interval_once():
    text = DESIGN.format(dpus="", offload="", storage="", line=400).replace(
        "batch = 512", "batch = 512  checkpoint_every = 1 h\n  checkpoint { interval = 30 min }")
    (error,) = [d for d in check_text(text, "ckpt.gcl").diagnostics if d.is_error]
    assert "checkpoint_every" in error.summary and error.subject.line == 10 and error.labels[0].span.line == 9


def test_the_plan_says_a_pinned_interval_is_pinned():
    from gclc.solver.train.plan import plan
    from gclc.views.plan_text import plan_text

    text = plan_text(plan(with_job("checkpoint_every = 30 min  parallelism { tp = 8  pp = 1 }")))
    assert "every 30 min (pinned)" in text
