"""A collective's time by message size, as NCCL chooses its algorithm and protocol.

NCCL predicts each (algorithm, protocol)'s time as `latency + bytes / bandwidth` and runs the
fastest (src/graph/tuning.cc, NCCL 2.30, NVIDIA/nccl commit 5067397c; the constants below are
its published defaults, restated, not fitted). Algorithms: ring, tree (all-reduce), NVLS
(the scale-up switches reduce: NVLink SHARP), CollNet (the scale-out switches reduce: SHARP; direct,
each GPU to its own NIC, or chain, up and down a chain of the node's GPUs),
PAT (reduce-scatter and all-gather with one GPU a node). Protocols: LL (8-byte stores with a
flag: half the bandwidth, the lowest latency), LL128 (120 of every 128 bytes), Simple (the
full bandwidth, the highest latency). An NVLS all-reduce inside one NVLink domain is priced as
its kernel runs, loop by loop (`nvls_loop_seconds`), not by NCCL's flat 25 us NVLS step.

What a communicator brings (`Communicator`) is what gclc's tiers say: the per-GPU rate of
the scale-up domain and of the scale-out network (bandwidth x efficiency: a ring's bus
bandwidth), whether either reduces in its switches, and the scale-out's one-way latency
(NCCL's `latencyInter`). Those are the parameters to fit to nccl-tests measurements; the
tables here stay NCCL's.
"""

from __future__ import annotations

import functools
import math

import attrs

from ...dsl.records import frozen

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet", "collnet_chain", "pat")
PROTOCOLS = ("LL", "LL128", "Simple")

# tuning.cc `baseLatencies` (us), per algorithm: (LL, LL128, Simple)
BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "collnet": (0.0, 0.0, 0.0),
                   "collnet_chain": (0.0, 0.0, 0.0), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
                   "pat": (8.0, 8.0, 8.0)}
# tuning.cc `hwLatencies` (us per step), per link kind and algorithm: (LL, LL128, Simple)
STEP_LATENCY_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4),
               "collnet": (0.0, 0.0, 3.7), "collnet_chain": (0.0, 0.0, 3.7),
               "nvls": (0.0, 0.0, 25.0), "nvls_tree": (0.0, 0.0, 25.0), "pat": (0.0, 0.0, 4.0)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7),
             "collnet": (0.0, 0.0, 3.7), "collnet_chain": (0.0, 0.0, 3.7),
             "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0), "pat": (0.0, 0.0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0),
            "collnet": (0.0, 0.0, 31.0), "collnet_chain": (0.0, 0.0, 31.0),
            "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 20.9), "pat": (0.0, 0.0, 14.0)},
}
NET_OVERHEAD_US = 1.0          # tuning.cc getNetOverhead (Intel, ARM): a network step's floor; x3 for Simple
# tuning.cc llMaxBws (NCCL 2.28.7, unchanged in 2.30: tag v2.30.4-1, commit 5067397c): LL's bus-bandwidth cap
# (GB/s) on one node, two, more, by row. On one node NCCL reads the GPU generation's row (compCapIndex: sm_70
# Volta, sm_80 Ampere, sm_90 Hopper, sm_100 on Blackwell; "Blackwell-N1" is Hopper's x 2); across nodes it reads
# row 0 or 1 by the host CPU (`index1 = nNodes == 1 ? compCapIndex : (cpuVendor == AMD || MIXED) ? 1 : 0`): row 0
# ("Volta-N1/Intel-N2/Intel-N4", Intel, Arm and others) 39.0 and 20.4 GB/s, row 1 ("Ampere-N1/AMD-N2/AMD-N4") 22.5
# and 19.0. The Hopper and Blackwell rows' N2/N4 entries are never read (`_ll_cap`), by NCCL either since it reads
# across nodes by CPU: kept so that the table is llMaxBws row for row, as tests/model/test_nccl_model.py pins it
# against the source (a row cut short would read as a source changed).
LL_MAX_BUS_GBPS = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 45.0, 35.0),
                   "blackwell": (282.0, 90.0, 70.0)}
# tuning.cc (tag v2.30.4-1) per-channel caps, GB/s a search channel (one node, two, more), by compCapIndex:
# `busBw = min(busBw * share, graph->nChannels * perChMax...)` for ring LL128 (perChMaxRingLL128Bws), every tree
# all-reduce before its protocol's share (perChMaxTreeBws) and tree LL128 after it (perChMaxTreeLL128Bws): a cap
# of the search's channel count x the rate (`_per_channel`). (Blackwell's ring LL128 was 2 x 36.7 up to 2.28.9,
# 34.5 in 2.29.2 and 40 from 2.29.7: NVIDIA's own reading of what one channel's LL128 carries on Blackwell;
# 16 x 40 = 640 GB/s busbw, as 3 B200 measure forced, 479 GB/s algbw, NVIDIA/nccl#2343. The model takes the
# newest table.)
PER_CHANNEL_GBPS = {
    "ring_LL128": {"ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 36.7), "blackwell": (40.0, 40.0, 40.0)},
    "tree": {"ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0), "blackwell": (70.0, 42.8, 24.0)},
    "tree_LL128": {"ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 29.0), "blackwell": (55.6, 31.67, 20.0)},
}
# The search's channels (search.cc, tag v2.30.4-1). On one NVSwitch board NCCL's NVLink is links x
# SM80/SM90/SM100_NVLINK_BW (topo.h: 12 x 20, 18 x 20.6, 18 x 40.1 GB/s); the ring search takes the fastest speed
# of speedArrayIntra / sm90SpeedArrayIntra / sm100SpeedArrayIntra whose channels fit (6 x 40, 6 x 60, 8 x 90) and
# ncclTopoDupChannels doubles them at half the speed (bwIntra >= 25; on Hopper and later not below 50 with more
# than 4 channels): 12, 12 and 16 channels, the tree's held to the ring's. ASSUMPTION: the generation's full link
# count (DGX/HGX A100 12, H100/H200/H20 18, B200 and GB200/GB300 trays 18). Across nodes a channel runs at the
# fastest speedArrayInter entry (by generation) a GPU's NIC carries, one channel a NIC, doubled at half the speed
# by the same rule (ASSUMPTION: a NIC a GPU, as on every std node: the node's channels are its GPUs).
CHANNELS_INTRA = {"ampere": 12, "hopper": 12, "blackwell": 16}
CHANNEL_SPEEDS_INTER = {
    "ampere": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24,
               0.12),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                  1.2, 0.24, 0.12),
}
MAX_SEARCH_CHANNELS = 32    # init.cc: ringGraph->maxChannels = MAXCHANNELS / 2


def search_channels(generation: str, nodes: int, per_node: int, nic: float, link: str = "nvlink") -> int:
    """NCCL's search channels (search.cc): on one NVLink board the generation's; across nodes one a NIC at the
    fastest inter speed a GPU's NIC (`nic` bytes/s) carries, doubled where NCCL duplicates them. 0 where NCCL's
    search is not modelled (a PCIe board, no NIC rate): no per-channel cap then."""
    return _search(generation, nodes, per_node, nic, link)[0]


def _search(generation: str, nodes: int, per_node: int, nic: float, link: str) -> tuple[int, float]:
    """(channels, GB/s a channel) of NCCL's ring search across nodes (`search_channels`); on one node the channels
    alone (0.0 GB/s: not needed)."""
    if nodes <= 1:
        return (CHANNELS_INTRA[generation] if link == "nvlink" else 0), 0.0
    speed = next((s for s in CHANNEL_SPEEDS_INTER[generation] if s <= nic / 1e9), 0.0) if 0 < nic < math.inf else 0.0
    if not speed:
        return 0, 0.0
    duplicated = speed >= 25.0 and not (generation != "ampere" and speed < 50.0 and per_node > 4)
    channels = min(MAX_SEARCH_CHANNELS, per_node * (2 if duplicated else 1))
    # ncclTopoDupChannels: twice the channels at half the speed each (bwIntra, bwInter /= DIVUP(dup, nChannels):
    # no halving where the search's channels were already at the maximum)
    return channels, speed / -(-channels // per_node)


# The channels NCCL's ring and tree kernels run (comm->nChannels; connect.cc ncclTopoPostset, tag v2.30.4-1): the
# search's channels doubled, "Duplication should be complete now": std::min(MAXCHANNELS, nChannels * 2), MAXCHANNELS
# 64 (device.h, since 2.25.1). Across nodes Hopper and later double them again while fewer than 16 and the ring's
# channel runs faster than 45 GB/s ("Use 4 compute channels per search channel to reach peak BW on <8 PPN"; the ring's
# bwIntra is its search speed across nodes: pass 2 raises bwIntra and bwInter together); before that, with CollNet
# (SHARP) on and more than one GPU a node, half as many again ("Add more channels to saturate intra-node
# bandwidth": its chain graph's NVLink is faster than its NIC; ASSUMPTION: so on every NVLink node). Not modelled:
# unpack networking's doubling below 16 (NCCL_NET_DEVICE_UNPACK, GPUDirect TCPX; not InfiniBand or RoCE).
# NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS default to 0 and MAXCHANNELS, and the communicator's minCTAs / maxCTAs
# to 1 and MAXCHANNELS (init.cc NCCL_CONFIG_DEFAULT), so they move nothing. A ring or tree call runs on all of
# them once it carries nc x threads x threshold bytes (enqueue.cc topoGetAlgoInfo). tuning.cc's caps go by the
# search's channels all the same (`_per_channel`), although ncclTopoTuneModel runs after ncclTopoPostset (init.cc),
# with comm->nChannels already doubled: they are NCCL's rates a search channel, its two kernel channels together.
#
# A tree piece's fill (`_fill`) splits the tree's bus share over CHANNELS, the 16 the kernels run on 8-GPU nodes with 8
# NICs of 400G (`collective_channels`), whatever the communicator. (Tried and left, 2026-12-07: over the channels
# each communicator runs, 24 on one H100 board; no published row moves, but a small call's channel then slows as the
# search finds more channels, against tests/model/test_nccl_channels.py's law that more channels never slow a call:
# an 8 B all-reduce of 2 ranks on 8 Ampere nodes, 8 search channels 37.02 us against 4's 36.91. A lone channel's
# rate is its CTA's, not a share of a bus the idle channels leave.)
MAX_CHANNELS = 64


def collective_channels(generation: str, nodes: int, per_node: int, nic: float, link: str = "nvlink",
                        collnet: bool = False) -> int:
    """The channels NCCL's ring and tree kernels run (comm->nChannels; 0 where the search is not modelled):
    the search's doubled, half as many again with CollNet across nodes of several GPUs, and across nodes on
    Hopper and later doubled again below 16 when a channel runs faster than 45 GB/s. 256 DGX H100 over 400G:
    8 search channels at 48 GB/s, 16 kernel channels (24 with SHARP)."""
    search, speed = _search(generation, nodes, per_node, nic, link)
    channels = min(MAX_CHANNELS, 2 * search)
    if collnet and nodes > 1 and per_node > 1:
        channels = min(MAX_CHANNELS, channels + channels // 2)
    if generation != "ampere" and nodes > 1 and speed > 45.0 and channels < 16:
        channels = min(MAX_CHANNELS, 2 * channels)
    return channels


# the channels a tree piece's fill splits its share over (`_fill`): those of 8-GPU Hopper nodes with 8 NICs of 400G
# (NCCL's INFO line "16 coll channels"); ASSUMPTION: on every communicator (24 run on one H100 board, 32 on Blackwell's)
CHANNELS = collective_channels("hopper", 2, 8, 50e9)


# ESTIMATE: an LL step (ring and tree) over NVLink 5 takes 1.44 us, not the 0.6 us NCCL's table gives every
# NVLink (tuning.cc hwLatencies). Read from the smallest published call of 4 and 8 GB300 of an NVL72 rack
# (Oracle's GB300 quick start, NCCL 2.28.7: 512 KiB, a ring with LL), each call's time less NCCL's ring LL
# base (6.6 us) and its bytes at the Blackwell LL cap, over its 2(n-1) steps: 1.42 and 1.46 us; each
# predicts the other table's rows up to 2 MiB within 3.5 % and 12 % (benchmarks/nccl_curves.py prints them).
# ASSUMPTION: the same on a DGX B200's board NVLink (no published small call to read it from).
NVLINK5_LL_STEP_US = 1.44
LL_SHARE, LL128_SHARE = 0.5, 0.92       # bus bandwidth the LL and LL128 rings carry
TREE_SHARE, TREE_LL_SHARE = 0.92, 1 / 3.8
PAT_SHARE = 0.75
# NVLS: the buffer goes through the GPU's port once each way (an all-reduce pipelines its
# reduce-scatter up and its all-gather down), at this share of what a ring gets through it:
# on 8 H100 "a peak busBw of ~480GB/s (algbw ~275GB/s)" against ~370 GB/s for rings
# (sjeaugey, NVIDIA/nccl-tests#212): 275 / 370. (NCCL's own tables scale a different
# per-channel rate: tuning.cc nvlsEfficiency, Hopper 0.85, Blackwell 0.74.)
NVLS_EFFICIENCY = 275 / 370
# ... on Hopper. On Blackwell, ESTIMATE: the per-byte slope of the published 8-GPU GB300 table where NCCL runs its
# 128 KiB NVLS chunk (Oracle GB300 quick start, NCCL 2.28.7, 2-16 GiB: t = 0.12 ms + bytes / 482.5 GB/s algbw;
# benchmarks/nccl_curves.py prints it), over the NVLink 5 ring rate (682.2 GB/s): 0.707. A slope, so no per-call
# cost enters it; 8 GPUs of a rack are bound by their ports, not the switch chips. (Until 2026-12-07 Hopper's
# share scaled by NCCL's own ratio, tuning.cc nvlsEfficiency 0.74 / 0.85: 0.647, 441 GB/s; with the NVLS pipeline's
# fill, below, that priced 8 x B200 at 8 GiB 12 % slow.)
NVLS_BLACKWELL_SHARE = 482.5 / 682.2
# Ampere's is 0 (tuning.cc nvlsEfficiency: "0.0f, // Ampere"): NVLS's bandwidth is 0 there and NCCL never
# picks it (nor can it: nvls.cc reads CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, which NVLink 3 lacks).
NVLS_TABLE_EFFICIENCY = {"ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
# NVLS tree (tuning.cc NCCL_ALGO_NVLS_TREE, NCCL 2.30, commit 5067397c, tag v2.30.4-1): an
# all-reduce over several nodes whose NVSwitches reduce (NVLS), no SHARP needed (enqueue.cc
# updateCollCostTable runs it wherever NVLS is supported; tuning.cc disables it on one node).
# NVLS sums inside each node, a tree between the nodes (NCCL_MAX_NVLS_TREE_ARITY 3, device.h)
# carries each node's sum up and the total down. Its bus bandwidth is the least of NVLS's inside
# a node (the same `intraBw` as on one node) and the network's, doubled on two nodes ("Handle 2
# node case of NVLSTree": each node roots half the channels' trees, so a byte leaves a node once
# and enters once; a ring's cross 2(n-1)/n times); NCCL turns it into an algorithm bandwidth as
# a ring's (x nRanks / 2(nRanks-1)). Bitdeer's two DGX H100 hosts: 468 GB/s busbw, one host
# 470 (tests/data/measurements/nccl). Not modelled: the per-channel cap perChMaxNVLSTreeBws
# (Hopper 57.7 GB/s on two nodes, 45.5 on more; x 16 NVLS channels it is above 8 NICs' rate).
NVLS_TREE_TWO_NODES = 2.0
COLLNET_SHARE = 0.9            # tuning.cc: CollNet's bus bandwidth, of the network's
# enqueue.cc updateCollCostTable (NCCL 2.30): NVLS and NVLS tree run reduce-scatter and
# all-gather only while a node (an MNNVL domain) has at most NCCL_MAX_NVLS_ARITY GPUs, and
# CollNet direct and chain all collectives only with at most NCCL_MAX_DIRECT_ARITY + 1 (device.h: 32, 7)
NVLS_MAX_LOCAL_RANKS = 32
COLLNET_MAX_LOCAL_RANKS = 8
# NVLS reduces in the switch chips: each element of a reduction over n GPUs of a domain costs n - 1
# adds there (multimem.ld_reduce pulls all n operands, NVIDIA/nccl#828), spread over the domain's
# chips (every GPU has links to every chip). Their rate (Tier.switch_reduction) is an FP32 figure
# and nccl-tests reduce floats: a byte rate of 4 bytes per add. ASSUMPTION for other types.
FP32_BYTES = 4
# A tree forwards each piece of the buffer whole from hop to hop (a ring cuts it into one block
# per rank and so pipelines by itself). NCCL runs a small call on one channel and spreads it
# over more only once each channel's piece reaches `threads x threshold` bytes (enqueue.cc
# topoGetAlgoInfo: channels drop "while nBytes < nc * nt * threadThreshold"); a piece that
# small is not pipelined, so every hop but the last also waits for it at one channel's rate.
# Threads and thresholds are NCCL's defaults (device.h NCCL_LL_MAX_NTHREADS 512,
# NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512; init.cc tree thresholds 8/8/64,
# as NCCL_DEBUG prints "threadThresholds 8/8/64"). Channels: the communicator's search channels
# for the per-channel caps (`search_channels`); the bus share's split, ASSUMPTION: the channels the kernels run on
# 8-GPU NVSwitch nodes with 8 NICs of 400G (CHANNELS, 16, `collective_channels`, NCCL's "16 coll channels"), whatever
# the communicator.
# NVLS inside one NVLink domain, loop by loop (NCCL 2.28.7, unchanged in 2.30; NVIDIA/nccl): NCCL runs an
# NVLS all-reduce on a fixed number of channels whatever its size (enqueue.cc topoGetAlgoInfo: `nc =
# comm->nvlsChannels`, no reduction for small calls as rings and trees get), NVLS_NCHANNELS 16 on Hopper;
# on Blackwell 32 up to NCCL 2.26 and, from 2.27, 24 inside one NVLink domain (nvls.cc NVLS_NCHANNELS_SM90,
# _SM100, _SM100_NVL; tags v2.25.1-1, v2.26.2-1, v2.27.3-1). Each channel loops
# over its share, `heads` chunks a loop (all_reduce.h RunWorkColl<AllReduce, NVLS> oneNode: loopCount =
# nHeads x chunkSize; heads = min(NCCL_MAX_NVLS_ARITY 32, GPUs), search.cc), the chunk 128 KiB
# (NCCL_NVLS_CHUNKSIZE) halved to 64, 32 and 16 KiB below 64, 8 and 2 loops' worth of a channel's bytes
# (enqueue.cc calcCollChunking, called per channel on its own bytes). In a loop the scatter and gather warps
# copy to and from each head's slot in turn (prims_simple.h ScatterGatherOp: a loop over the peers, then one
# barrier and one post, fenced, for all of them), slots of the rank's own buffer bound to the multicast object
# (nvls.cc ncclNvlsBufferSetup: send[1] and recv[1] are the unicast buffer; the heads' multimem loads and
# stores carry all the NVLink traffic), so a loop takes at least `heads` of those steps; NVLS_HEAD_STEP_S is
# one head's (both copies),
# ESTIMATE read from the published GB300 tables where loops are that short, on the sizes NCCL's own table runs
# as NVLS (`predicted`; benchmarks/nccl_curves.py prints it per run, held out: 2.26 and 2.49 us a head at 64
# and 8 GPUs; 4 GPUs run no NVLS, and their ring rows had read 2.68, the 8-GPU ring rows 2.80, a mean of 2.58
# before). A loop then takes the longer of those steps and its bytes at the port's NVLS rate (the call's bytes
# with the pipeline's fill, NVLS_FILL_LOOPS); the call adds NCCL's own NVLS latency (tuning.cc hwLatencies,
# NVLink, NVLS Simple: 25 us), which NCCL's table charges an NVLS call whatever its size. (Tried and left:
# a loop of a fixed part and a step a head, the line through the three tables' loop times, 10.7, 22.4, 72.4
# us at 4, 8, 32 heads, held out no better at 64 GPUs, 43.6 % against 41.2 %; NCCL's Simple base, 8.4 us,
# in place of the 25 us, which meets the 64-GPU table's < 1 MB goal in sample but prices the 8 x H100 NVLS
# rows of tests/data/measurements/nccl 11.5 % fast at 256 MiB, where a cost per call the model lacks,
# ~75-80 us on 8 GPUs of either generation, shows: see nvls_loop_seconds.)
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_CHUNK_CUTS = ((64, 65536), (8, 32768), (2, 16384))     # (loops of a channel, chunk below them)
NVLS_MAX_HEADS = 32
NVLS_CHANNELS = {"ampere": 0, "hopper": 16, "blackwell": 24}   # NCCL 2.27 on, inside one NVLink domain
NVLS_CHANNELS_BEFORE_2_27 = {"ampere": 0, "hopper": 16, "blackwell": 32}   # Ampere: init.cc nvlsChannels = 0


def nvls_channels(generation: str, nccl_version: str = "") -> int:
    """NCCL's NVLS channels inside one NVLink domain (nvls.cc) for a GPU generation and an NCCL version
    ("2.25.1"; empty: the newest)."""
    if nccl_version:
        try:
            major, minor = (int(part) for part in nccl_version.split(".")[:2])
        except ValueError:
            raise ValueError(f"NCCL version {nccl_version!r}: expected major.minor[.patch], e.g. 2.28.7") from None
        if (major, minor) < (2, 27):
            return NVLS_CHANNELS_BEFORE_2_27[generation]
    return NVLS_CHANNELS[generation]


def nvls_channels_vary(generation: str) -> bool:
    """Whether NCCL's versions open different NVLS channel counts on this GPU generation (Blackwell's
    32 up to 2.26, 24 from 2.27): where they do, a measurement's NCCL version changes its price."""
    return NVLS_CHANNELS_BEFORE_2_27[generation] != NVLS_CHANNELS[generation]


def nvls_share(generation: str) -> float:
    """NVLS's share of a ring's port rate on a GPU generation (ampere: 0, NVLS does not run; hopper, blackwell)."""
    if generation == "blackwell":
        return NVLS_BLACKWELL_SHARE
    return NVLS_EFFICIENCY * NVLS_TABLE_EFFICIENCY[generation] / NVLS_TABLE_EFFICIENCY["hopper"]


# ASSUMPTION: Hopper's NVLS (NVLink 4, 16 channels) takes the same step a head as the GB300 tables read;
# no published Hopper row is short enough to read it: the 8xH100 (4 GiB) and 8xH200 (8 GiB) NVLS rows of
# benchmarks/nccl_curves.py are bound by their bytes (-1.1 % and +0.4 % with any step from 0 to 2.58 us). NCCL's
# own pick on one HGX H100 (NVLS from 2 MiB, nccl-tests#309) puts its 2-8 MiB calls on these steps.
NVLS_HEAD_STEP_S = 2.38e-6
# The NVLS all-reduce's pipeline (all_reduce.h runNvls oneNode, NCCL 2.25.1-2.30: a channel's scatter warps copy a
# loop into NCCL's buffers, the heads reduce it in the switches and multicast it back, the gather warps copy it
# out; NCCL_STEPS 8 slots a head let the stages overlap) scatters the first loop before any head reduces and
# gathers the last after the last reduce: two loops beyond the bytes where the port's rate binds (where the head
# steps bind, the stages wait on them and the fill hides in them). The source supports these 2 loops; the rank
# factor on top is nvls_fill_rank_factor's ESTIMATE.
# NCCL drops the scatter and gather copies when the buffers are registered (all_reduce.h v2.28.7 `nelem =
# work->regUsed ? 0 : ...`), which it does by itself under CUDA-graph capture outside MNNVL (enqueue.cc,
# NCCL_GRAPH_REGISTER default 1; nvls.cc ncclNvlsGraphRegisterBuffer): a call the model knows is graph-captured
# inside one host (serving's, Communicator.registered) pays no fill. ASSUMPTION: every other call's buffers are
# not registered (training's eager calls; NCCL_LOCAL_REGISTER / user buffer registration not modelled).
# ASSUMPTION: the fill and drain run at the channel's switch-bound rate (`moving`), though they are local copies.
NVLS_FILL_LOOPS = 2
TREE_PIECE_BYTES = {"LL": 512 * 8, "LL128": 640 * 8, "Simple": 512 * 64}


@frozen(cache_hash=True)  # the key of every NCCL option lookup
class Communicator:
    """`ranks` GPUs over `nodes` scale-up domains, as NCCL sees them (a multi-node NVLink rack,
    MNNVL, is one node). Rates are bytes/s per GPU per direction (a ring's bus bandwidth)."""

    ranks: int
    nodes: int
    intra: float                  # through the scale-up domain (NVLink, PCIe)
    inter: float = math.inf       # through the scale-out network (unused on one node)
    link: str = "nvlink"          # nvlink or pcie: the scale-up's kind
    nvls: bool = False            # the scale-up switches reduce (NVLink SHARP)
    collnet: bool = False         # the scale-out switches reduce (SHARP)
    wire: float = 0.0             # seconds one way across the scale-out (NCCL's latencyInter)
    reduce_rate: float = math.inf   # FP32 adds/s the scale-up switches reduce this group's data at
    across: float = math.inf      # the slowest scale-out tier a GPU's bytes cross (a spine's ECMP share)
    nvls_channels: int = NVLS_CHANNELS["hopper"]   # NCCL's NVLS channels (by GPU generation, nvls.cc)
    nvls_share: float = NVLS_EFFICIENCY            # NVLS's share of `intra` (by GPU generation, `nvls_share`)
    generation: str = "hopper"    # the GPUs' generation (ampere, hopper, blackwell): NCCL's LL cap, NVLS, NVLink 5's LL step
    host: str = ""                # the host CPUs' vendor, lower case ("amd", "intel", "mixed"; ""): LL's cap
    channels: int = 0             # NCCL's search channels (`search_channels`; 0: no per-channel cap)
    registered: bool = False      # its buffers registered (NCCL does it under CUDA-graph capture outside MNNVL): no NVLS fill

    @property
    def per_node(self) -> int:
        return max(1, self.ranks // max(1, self.nodes))


@frozen
class Choice:
    algorithm: str
    protocol: str
    seconds: float
    predicted: float = 0.0   # NCCL's own table time for it (`predicted`): what NCCL picks by


def time(collective: str, nbytes: float, c: Communicator) -> float:
    """Seconds of `collective` (all_reduce, reduce_scatter, all_gather) on `nbytes` (the
    buffer: the whole vector for all-reduce and reduce-scatter, the gathered one for all-gather)."""
    return choose(collective, nbytes, c).seconds


def choose(collective: str, nbytes: float, c: Communicator, only: str | None = None) -> Choice:
    """NCCL's pick: the (algorithm, protocol) of least predicted time (NCCL's own, `predicted`), at the
    model's price; `only` one algorithm, as NCCL_ALGO forces it."""
    if c.ranks <= 1:
        return Choice("none", "none", 0.0)
    return min(priced(collective, nbytes, c, only), key=lambda option: option.predicted, default=None)


def priced(collective: str, nbytes: float, c: Communicator, only: str | None = None) -> list[Choice]:
    """Every (algorithm, protocol) NCCL weighs for the call (`only` one algorithm), each at the model's price and
    NCCL's own prediction (`predicted`), in NCCL's order: `choose` takes the first of least prediction."""
    found = []
    for algorithm, protocol, latency, bandwidth in _options(collective, c):
        if only is not None and algorithm != only:
            continue
        seconds = _seconds(collective, algorithm, latency + _fill(algorithm, protocol, nbytes, c),
                           nbytes, nbytes / bandwidth, c)
        guess = predicted(collective, algorithm, protocol, nbytes, seconds, c)
        found.append(Choice(algorithm, protocol, seconds, guess))
    return found


def _seconds(collective: str, algorithm: str, latency: float, nbytes: float, moving: float, c: Communicator) -> float:
    """An option's time: its latency and its bytes (`moving` seconds), as NCCL's tables add them; an
    NVLS all-reduce inside one domain loop by loop instead (`nvls_loop_seconds`)."""
    if algorithm == "nvls" and collective == "all_reduce" and c.nodes == 1:
        return nvls_loop_seconds(nbytes, moving, c)
    return latency + moving


def predicted(collective: str, algorithm: str, protocol: str, nbytes: float, seconds: float, c: Communicator) -> float:
    """NCCL's own prediction of an option that the model prices at `seconds`: NCCL picks the least
    (enqueue.cc topoGetAlgoInfo: `ncclTopoGetAlgoTime`, latency + bytes / bandwidth of tuning.cc's tables), not
    the option whose kernel then runs fastest. The two differ where the model prices a kernel otherwise than
    NCCL's table: an NVLS all-reduce inside one domain, which NCCL predicts at its 25 us and its table bandwidth
    (`nvls_table_bandwidth`) and the model loop by loop (`nvls_loop_seconds`), and a Blackwell NVLink LL step,
    NCCL's 0.6 us against the 1.44 us it takes (NVLINK5_LL_STEP_US). Elsewhere the prediction is the price."""
    if algorithm == "nvls" and collective == "all_reduce" and c.nodes == 1:
        bandwidth = nvls_table_bandwidth(collective, c)
        if not bandwidth:   # no NVLS graph at any search speed: NCCL never runs it
            return math.inf
        return STEP_LATENCY_US["nvlink"]["nvls"][PROTOCOLS.index("Simple")] * 1e-6 + nbytes / bandwidth
    p = PROTOCOLS.index(protocol)
    return seconds - (_latency(collective, algorithm, p, c) - _latency(collective, algorithm, p, c, table=True)) * 1e-6


# search.cc sm90SpeedArrayIntra, sm100SpeedArrayIntra (NCCL 2.25.1-2.30, GB/s a channel): the rates NCCL's graph
# search tries, fastest first, for a graph inside one node (an MNNVL rack is one: topo.cc fuses its trays' XML)
NVLS_SEARCH_SPEEDS = {"hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                      "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}


def nvls_table_bandwidth(collective: str, c: Communicator) -> float:
    """NCCL's table bandwidth of NVLS inside one domain (B/s of the buffer), which NCCL picks by. The NVLS graph
    (search.cc ncclTopoSearchTryNvls) has one channel a head, min(32, GPUs) heads (all of them: minChannels =
    maxChannels inside a node), each taking its rate from every GPU's NVLink and twice from its head's, so the
    rate is the fastest search speed s with (heads + 1) x s within a GPU's NVLink (and heads x s within the
    GPUs' total x n / (n - 1)). tuning.cc then gives NVLS heads x s x nvlsEfficiency x (heads - 1) / heads, x 2
    for an all-reduce (it pipelines two operations) or x (n - 1) / n otherwise, and an all-reduce's algorithm
    bandwidth x n / 2(n - 1). On 4 GB300 of a rack 266 GB/s (4 x 90), below a ring's, so NCCL runs no NVLS there;
    on 8, 474 (8 x 80); on 64-72, 465-466 (32 x 20). ESTIMATE: a GPU's NVLink as NCCL sums it (topo.h: 18 links x
    SM100_NVLINK_BW 40.1 = 722 GB/s on NVLink 5, x SM90 20.6 = 371 on NVLink 4) is the tier's ring rate here (682,
    366), which gives 8 Blackwell GPUs 70 a channel (414 GB/s) rather than 80 and Hopper's 40 exactly."""
    n, heads = c.per_node, max(1, min(NVLS_MAX_HEADS, c.per_node))
    if heads < 2 or c.generation not in NVLS_SEARCH_SPEEDS:
        return 0.0
    nvlink = c.intra / 1e9
    speed = next((s for s in NVLS_SEARCH_SPEEDS[c.generation]
                  if (heads + 1) * s <= nvlink and heads * s <= nvlink * n / (n - 1)), 0.0)
    per_channel = speed * NVLS_TABLE_EFFICIENCY[c.generation] * (heads - 1) / heads
    per_channel *= 2.0 if collective == "all_reduce" else (n - 1) / n
    bus = heads * per_channel * 1e9
    return bus * n / (2 * (n - 1)) if collective == "all_reduce" else bus


def nvls_loops(nbytes: float, c: Communicator) -> tuple[int, int]:
    """(loops a channel runs, heads a loop) of an NVLS all-reduce of `nbytes` inside one domain."""
    heads = max(1, min(NVLS_MAX_HEADS, c.per_node))
    per_channel = nbytes / c.nvls_channels
    return max(1, math.ceil(per_channel / (heads * _nvls_chunk(per_channel, heads)))), heads


def _nvls_chunk(per_channel: float, heads: int) -> int:
    chunk = NVLS_CHUNK_BYTES
    for loops, smaller in NVLS_CHUNK_CUTS:
        if per_channel < loops * heads * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def nvls_loop_seconds(nbytes: float, moving: float, c: Communicator) -> float:
    """Seconds of an NVLS all-reduce inside one domain whose bytes take `moving` seconds through the
    port: NCCL's NVLS latency, then each loop's head steps or its bytes and the pipeline's fill and drain
    (`nvls_fill_seconds`), whichever is longer. Where NCCL doubles the chunk, a call just above the cut runs
    half the loops of one just below; a larger call is priced at least as the largest call below each cut it
    passes (the model's law: a larger call never takes less time; the published tables never fall either)."""
    loops, heads = nvls_loops(nbytes, c)
    per_channel = nbytes / c.nvls_channels
    step = heads * NVLS_HEAD_STEP_S
    seconds = max(loops * step, moving + nvls_fill_seconds(nbytes, moving, c))
    chunk = NVLS_CHUNK_BYTES
    for cut_loops, smaller in NVLS_CHUNK_CUTS:   # each cut: per-channel bytes where the chunk halves
        cut = cut_loops * heads * chunk
        if cut <= per_channel:   # the largest call below the cut runs its loops at `smaller`
            seconds = max(seconds, math.ceil(cut / (heads * smaller)) * step)
        chunk = smaller
    return STEP_LATENCY_US["nvlink"]["nvls"][PROTOCOLS.index("Simple")] * 1e-6 + seconds


def nvls_fill_rank_factor(c: Communicator) -> float:
    """ESTIMATE, no stage of NCCL's source: the fill's loops scaled by ranks / heads (1 to 32 ranks, 2-2.25 at
    64-72), read off the published per-call constants (4.0-5.6 loops at 64-72 ranks, 1.2-1.8 at 8 in the
    bytes-bound chunk regimes, net of NCCL's 25 us NVLS latency; benchmarks/nvls_rank_holdout.py). Held out
    table by table against a fixed 4 loops (k = 4 fitted), it loses on max |busbw error| on four tables of five
    (by 0.5-3 points) and wins on the per-call constants it stands for (worst -31 % against +89 %, the 8-GPU
    table's): kept for those (docs/network.md, "What grows with the ranks")."""
    return c.per_node / max(1, min(NVLS_MAX_HEADS, c.per_node))


def nvls_fill_seconds(nbytes: float, moving: float, c: Communicator) -> float:
    """What the model charges for the NVLS pipeline's fill and drain: NVLS_FILL_LOOPS loops of a channel (the
    source's first scatter and last gather) times nvls_fill_rank_factor (an ESTIMATE fitted to the tables), at
    the channel's rate (its bytes in `moving` seconds); a call smaller than a loop fills with what it has. None
    where the buffers are registered (`registered`): runNvls then skips the scatter and gather copies
    (all_reduce.h v2.28.7, `nelem = work->regUsed ? 0 : ...`)."""
    if c.registered:
        return 0.0
    heads = nvls_loops(nbytes, c)[1]
    per_channel = nbytes / c.nvls_channels
    loop = heads * _nvls_chunk(per_channel, heads)
    return NVLS_FILL_LOOPS * nvls_fill_rank_factor(c) * min(loop, per_channel) / per_channel * moving


IN_NETWORK = ("nvls", "collnet", "collnet_chain")


def on_topology(collective: str, nbytes: float, wire: float, c: Communicator,
                in_network: bool | None = None) -> Choice | None:
    """NCCL's pick when the topology, not NCCL's tables, says how fast the bytes can move:
    the fastest option moves `nbytes` in `wire` seconds (gclc's tiers: oversubscription,
    ragged groups and in-network reduction counted), every other option as much slower as
    NCCL's shares make it (LL's half bandwidth, a tree's share) and no faster than its caps
    allow (LL's and the per-channel ones: rates, not shares, in tuning.cc), and each pays its
    own latency. Large calls run at the tiers' rate; small ones pay NCCL's latency. NCCL picks the
    option it predicts fastest (`predicted`), which is not always the fastest priced.
    `in_network`: only the algorithms whose switches reduce (True: `wire` is the tiers' price
    with them reducing) or only the others (False); None: all (None where none runs)."""
    if c.ranks <= 1:
        return Choice("none", "none", 0.0)
    options = [o for o in _options(collective, c)
               if o[0] != "nvls_tree" and (in_network is None or (o[0] in IN_NETWORK) == in_network)]
    if not options:
        return None
    shares = [_bandwidth(collective, algorithm, protocol, c, "share") for algorithm, protocol, *_ in options]
    fastest = max(shares)
    best = None
    for (algorithm, protocol, latency, _), share in zip(options, shares):
        capped = nbytes / _bandwidth(collective, algorithm, protocol, c, "cap")
        seconds = _seconds(collective, algorithm, latency + _fill(algorithm, protocol, nbytes, c),
                           nbytes, max(wire * fastest / share, capped), c)
        option = Choice(algorithm, protocol, seconds, predicted(collective, algorithm, protocol, nbytes, seconds, c))
        if best is None or option.predicted < best.predicted:
            best = option
    return best


def nvls_tree(collective: str, nbytes: float, c: Communicator) -> Choice | None:
    """NCCL's NVLS tree where it runs (an all-reduce over nodes whose NVSwitches reduce; None
    elsewhere), at its own bandwidth on the communicator's rates: its two halves (NVLS inside
    the nodes, the tree across them) are pipelined, where the tiers' hierarchical price
    (model/comms.py) runs them one after the other."""
    if "nvls_tree" not in _algorithms(collective, c):
        return None
    return choose(collective, nbytes, c, only="nvls_tree")


def p2p_latency(c: Communicator) -> float:
    """Seconds before a grouped send/receive lands (an all-to-all, a pipeline or ring-attention
    send): NCCL runs every peer at once on its own channels, so a call is one step of a Simple
    ring, its base and one step over the outermost link it crosses. NCCL's p2p is not in
    tuning.cc; this reuses its ring constants, checked against two published small-message
    all-to-alls (tests/model/test_collectives.py): 8 x H20 on one node, 10.6 us at 128 B
    (deepseek-ai/DeepEP#303, nccl-tests), and 2 DGX-H100 over 400G with NVLink disabled,
    "30 microseconds small message latency" (deepseek-ai/DeepEP#3)."""
    simple = PROTOCOLS.index("Simple")
    if c.nodes > 1:
        step = STEP_LATENCY_US["net"]["ring"][simple] + c.wire * 1e6 * 2
    else:
        step = STEP_LATENCY_US[c.link]["ring"][simple]
    return (BASE_LATENCY_US["ring"][simple] + step) * 1e-6


def switch_reduction_seconds(collective: str, nbytes: float, c: Communicator) -> float:
    """Seconds the scale-up switches take to reduce an NVLS call's `nbytes` (its floor where
    their reduction engines, not the GPUs' ports, bound it; 0 for a gather or where no rate is known)."""
    if collective == "all_gather" or not c.nvls or math.isinf(c.reduce_rate) or c.per_node <= 1:
        return 0.0
    return nbytes / FP32_BYTES * (c.per_node - 1) / c.reduce_rate


def bus_bandwidth(collective: str, nbytes: float, seconds: float, ranks: int) -> float:
    """nccl-tests' busbw: algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the others."""
    factor = 2 * (ranks - 1) / ranks if collective == "all_reduce" else (ranks - 1) / ranks
    return nbytes / seconds * factor


@functools.lru_cache(maxsize=4096)
def _options(collective: str, c: Communicator) -> tuple[tuple[str, str, float, float], ...]:
    """(algorithm, protocol, latency s, algorithm bandwidth B/s) of every option NCCL weighs. LL128 runs only over
    NVLink (tuning.cc, tag v2.30.4-1: LL128 `pEnable &= (graphs[a]->typeIntra <= PATH_NVB)`; GPUs that meet
    through PCIe switches or the CPU are PATH_PIX and beyond)."""
    found = []
    for algorithm in _algorithms(collective, c):
        for p, protocol in enumerate(PROTOCOLS):
            if protocol == "LL128" and c.link == "pcie":
                continue
            bandwidth = _bandwidth(collective, algorithm, protocol, c)
            if bandwidth > 0 and (algorithm in ("ring", "tree") or protocol == "Simple"):
                found.append((algorithm, protocol, _latency(collective, algorithm, p, c) * 1e-6, bandwidth))
    return tuple(found)


def _algorithms(collective: str, c: Communicator) -> tuple[str, ...]:
    """The algorithms NCCL weighs (enqueue.cc updateCollCostTable): NVLS reduce-scatter and
    all-gather on at most NVLS_MAX_LOCAL_RANKS GPUs a domain, CollNet direct and chain on at
    most COLLNET_MAX_LOCAL_RANKS (an NVL72 rack's 72 GPUs take neither)."""
    collnet = c.collnet and c.nodes > 1 and c.per_node <= COLLNET_MAX_LOCAL_RANKS
    if not NVLS_TABLE_EFFICIENCY[c.generation]:   # Ampere: NVLS and NVLS tree at 0 bandwidth (tuning.cc)
        c = attrs.evolve(c, nvls=False)
    if collective == "all_reduce":
        algorithms = ["ring", "tree"]
        if c.nvls and (c.nodes == 1 or c.collnet):
            algorithms.append("nvls")
        if collnet:
            algorithms += ["collnet", "collnet_chain"]
        if c.nvls and c.nodes > 1 and c.per_node > 1:   # NVLS inside each node, a tree across them
            algorithms.append("nvls_tree")
        return tuple(algorithms)
    algorithms = ["ring"]
    if c.nvls and 1 < c.per_node <= NVLS_MAX_LOCAL_RANKS and (c.nodes == 1 or c.collnet):
        algorithms.append("nvls")
    if c.per_node == 1 and c.nodes > 1:
        algorithms.append("pat")
    if collnet:
        algorithms.append("collnet")
    return tuple(algorithms)


def _ring_steps(collective: str, c: Communicator) -> tuple[int, int]:
    """(all steps, steps that cross the network) of a ring."""
    if collective == "all_reduce":
        return 2 * (c.ranks - 1), (2 * (c.nodes - 1) if c.nodes > 1 else 0)
    return c.ranks - 1, c.nodes - 1


def _bus(c: Communicator) -> float:
    """A ring's bus bandwidth: the scale-up's on one node. Across nodes each channel's ring
    leaves a node once, and the channels spread over all its NICs, so the node's NICs
    together (per node x per GPU) carry what one GPU's ring carries (tuning.cc: nChannels x
    bwInter): B200 over 8 x 50 GB/s EFA reaches 382 GB/s busbw (stas00/ml-engineering)."""
    return c.intra if c.nodes == 1 else min(c.intra, c.inter * c.per_node)


def _ll_cap(c: Communicator) -> float:
    """LL's bus-bandwidth cap (tuning.cc llMaxBws): the GPU generation's row on one node, the host CPU's across
    nodes (row 1 for AMD or a mix of vendors, row 0 for Intel, Arm and the rest)."""
    column = min(c.nodes, 3) - 1
    if c.nodes == 1:
        return LL_MAX_BUS_GBPS[c.generation][column] * 1e9
    return LL_MAX_BUS_GBPS["ampere" if c.host in ("amd", "mixed") else "volta"][column] * 1e9


def _per_channel(cap: str, c: Communicator) -> float:
    """NCCL's per-channel cap `cap` (PER_CHANNEL_GBPS) x its search channels, bytes/s of bus (inf: none)."""
    return c.channels * PER_CHANNEL_GBPS[cap][c.generation][min(c.nodes, 3) - 1] * 1e9 if c.channels else math.inf


def _ring_tree_bus(algorithm: str, protocol: str, c: Communicator,
                   whole_call: bool = True) -> tuple[float, float]:
    """(share, cap) of a ring's or a tree's bus bandwidth (tuning.cc): the share of the bus its protocol carries,
    and the rate its caps allow (LL's, llMaxBws, bounding the call's channels together: `whole_call`; the
    per-channel ones); NCCL's bandwidth is the lesser."""
    bus = _bus(c)
    ll = _ll_cap(c) if whole_call else math.inf
    if algorithm == "ring":
        share = bus * {"LL": LL_SHARE, "LL128": LL128_SHARE, "Simple": 1.0}[protocol]
        return share, {"LL": ll, "LL128": _per_channel("ring_LL128", c), "Simple": math.inf}[protocol]
    tree, cap = bus * TREE_SHARE, _per_channel("tree", c)   # the tree's share and cap, then its protocol's
    if protocol == "LL":
        return tree * TREE_LL_SHARE, min(cap * TREE_LL_SHARE, ll)
    if protocol == "LL128":
        protocol_share = 7 / 9 if c.nodes == 1 else 120 / 128
        return tree * protocol_share, min(cap * protocol_share, _per_channel("tree_LL128", c))
    return tree, cap


def _bandwidth(collective: str, algorithm: str, protocol: str, c: Communicator, part: str = "") -> float:
    """Algorithm bandwidth (bytes of the buffer per second), as NCCL's tables give it; `part`: a ring's or a
    tree's "share" of the bus alone or its "cap" alone (tuning.cc: the caps are rates, not shares)."""
    bus = _bus(c)
    if algorithm in ("ring", "tree"):
        share, cap = _ring_tree_bus(algorithm, protocol, c)
        bus = {"share": share, "cap": cap}.get(part, min(share, cap))
        if algorithm == "tree":
            return bus * 0.5
        steps, _ = _ring_steps(collective, c)
        return bus * c.ranks / steps
    if part == "cap":
        return math.inf
    if algorithm == "nvls":   # the whole buffer through the port: slower than a ring for half an all-reduce
        through = _nvls_through(collective, c)
        return min(through, c.inter * c.per_node) if c.nodes > 1 else through
    if algorithm == "nvls_tree":
        return _nvls_tree_bus(c) * c.ranks / (2 * (c.ranks - 1))
    if algorithm == "pat":
        return bus * PAT_SHARE * c.ranks / (c.ranks - 1)
    if algorithm == "collnet":   # the switches reduce: the buffer crosses the NIC once each way
        return min(c.intra, c.inter * c.per_node * COLLNET_SHARE)
    if algorithm == "collnet_chain":   # ... reduced up a chain of the node's GPUs and sent back down it:
        return min(c.intra / 2, c.inter * c.per_node * COLLNET_SHARE)   # the buffer twice through each port
    return 0.0


def _nvls_through(collective: str, c: Communicator) -> float:
    """NVLS's algorithm bandwidth inside a node: the port's share, or the switch chips' reduction rate."""
    through = c.intra * c.nvls_share
    reducing = switch_reduction_seconds(collective, 1.0, c)   # seconds per byte in the switch chips
    return min(through, 1 / reducing) if reducing else through


def _nvls_tree_bus(c: Communicator) -> float:
    """The NVLS tree's bus bandwidth (tuning.cc): one node's NVLS bus bandwidth (its algorithm
    bandwidth x 2(p-1)/p, p GPUs a node) or the node's NICs', doubled on two nodes."""
    inside = _nvls_through("all_reduce", c) * 2 * (c.per_node - 1) / c.per_node
    # the tree's hops cross every scale-out tier between the nodes: the slowest (an oversubscribed or
    # ECMP-hashed spine) bounds them as it bounds a ring's
    across = min(c.inter, c.across) * c.per_node * (NVLS_TREE_TWO_NODES if c.nodes <= 2 else 1.0)
    return min(inside, across)


def _latency(collective: str, algorithm: str, p: int, c: Communicator, table: bool = False) -> float:
    """Microseconds before the first byte lands, as tuning.cc adds them up (`table`: with NCCL's own
    NVLink LL step on Blackwell too, as NCCL predicts it)."""
    base = BASE_LATENCY_US[algorithm][p]
    intra = STEP_LATENCY_US[c.link][algorithm][p]
    if (not table and c.generation == "blackwell" and c.link == "nvlink" and PROTOCOLS[p] == "LL"
            and algorithm in ("ring", "tree")):
        intra = NVLINK5_LL_STEP_US
    net_algorithm = "tree" if c.per_node == 1 else algorithm   # tuning.cc: one GPU a node steps as a tree
    inter = STEP_LATENCY_US["net"][net_algorithm][p] + c.wire * 1e6 * (2 if PROTOCOLS[p] == "Simple" else 1)
    if algorithm == "ring":
        steps, crossing = _ring_steps(collective, c)
        if c.nodes > 1:
            intra = max(intra, NET_OVERHEAD_US * (3 if PROTOCOLS[p] == "Simple" else 1))
        return base + (steps - crossing) * intra + crossing * inter
    if algorithm == "tree":
        return base + 2 * ((c.per_node - 1) * intra + _log2(c.nodes) * inter)
    if algorithm == "nvls":
        return STEP_LATENCY_US["nvlink"]["nvls"][p] + (inter if c.nodes > 1 else 0.0)
    if algorithm == "nvls_tree":   # one NVLS step, then up and down the tree's log2(nodes) levels
        return base + STEP_LATENCY_US["nvlink"]["nvls_tree"][p] + 2 * _log2(c.nodes) * inter
    if algorithm == "collnet":
        return base + 2 * (min(1, c.per_node - 1) * intra + (c.per_node - 1) * 0.4) + inter
    if algorithm == "collnet_chain":   # up and down the chain, one intra-node step a GPU
        return base + 2 * (c.per_node - 1) * intra + inter
    if algorithm == "pat":
        return base + _log2(c.nodes) * inter / 3.5 + c.ranks * 2.8
    return math.inf


def _fill(algorithm: str, protocol: str, nbytes: float, c: Communicator) -> float:
    """Seconds a tree's pipeline takes to fill: every hop of its way up and down but the last
    waits for one channel's piece (the whole call while it is smaller than a piece), at that
    channel's share of the tree's bus bandwidth for the protocol. 0 for other algorithms. LL's cap
    (tuning.cc llMaxBws) bounds a call's channels together: the one channel a piece that small runs on
    (enqueue.cc) may take all of it, not a sixteenth."""
    if algorithm != "tree":
        return 0.0
    hops = 2 * ((c.per_node - 1) + _log2(c.nodes))
    # a channel's part of the tree's bus share (over CHANNELS), and no more than tuning.cc's per-channel rate: the
    # per-channel cap is the search's channels x that rate (`_per_channel`), so it is divided by those channels.
    # (Dividing the share by them too breaks two laws, tests/model/test_nccl_channels.py: more channels would
    # slow a call, and a cap speed one.)
    share, cap = _ring_tree_bus("tree", protocol, c, whole_call=False)
    channel = min(share / CHANNELS, cap / (c.channels or CHANNELS),
                  _bandwidth("all_reduce", "tree", protocol, c) * 2)   # busbw = 2 x a tree's algbw
    return max(0, hops - 1) * min(nbytes, TREE_PIECE_BYTES[protocol]) / channel


def _log2(n: int) -> int:
    return max(0, int(math.floor(math.log2(n)))) if n >= 1 else 0
