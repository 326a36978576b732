"""What a command says when the cluster, partition or job named on its command line is not
in the design (or is not the kind the command draws): the sentences `cli/` prints with its
exit codes."""

from __future__ import annotations


def no_cluster(path: str) -> str:
    """A design with no cluster at all."""
    return f"{path} declares no cluster (nor does anything it imports)"


def unknown_cluster(name: str, path: str, kind: str | None, clusters: list[str]) -> str:
    """`--cluster NAME` names no cluster; `kind` is what NAME is instead (None: nothing)."""
    what = f" (`{name}` is a {kind})" if kind else ""
    known = f"; the design has: {', '.join(clusters)}" if clusters else "; the design declares none"
    return f"no cluster `{name}` in {path}{what}{known}"


def unknown_export_cluster(name: str, source: str, clusters) -> str:
    """`gclc export --cluster NAME[.PART]` whose cluster is not in the design."""
    return f"no cluster `{name}` in {source}; the design has: {', '.join(clusters) or 'none'}"


def unknown_partition(cluster: str, part: str, parts: list[str]) -> str:
    """`--cluster CLUSTER.PART` whose partition the cluster lacks."""
    return f"cluster `{cluster}` has no partition `{part}`; its partitions: {', '.join(parts)}"


def not_a_drawn_train_plan(job: str) -> str:
    """`gclc render --view topology --job NAME` where NAME's plan is not one train job's."""
    return (f"`{job}` is not a train job on one partition: the topology's link loads are drawn for "
            "a train plan (draw a serve or split plan with --view placement)")


def on_another_cluster(job: str, runs_on: str, drawn: str) -> str:
    """`--job NAME` whose plan runs on a cluster other than the one drawn."""
    return f"`{job}` runs on `{runs_on}`, not on the cluster drawn (`{drawn}`); draw it with --cluster {runs_on}"
