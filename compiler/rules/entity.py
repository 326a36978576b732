"""The checks of one declaration, by kind: hardware parts (`hardware.py`; number formats and
DPUs: `part.py`; switches and what a fabric asks of its switch: `switch.py`), models
(`model.py`), jobs and workloads (`job.py`), serve deployments (`serve.py`), RL jobs (`rl.py`),
tenants and scheduler settings (`schedule.py`)."""

from __future__ import annotations

from typing import Callable, Iterator

from ...dsl.diagnostics import Diagnostic
from ..design import Entity
from .job import job_rules, workload_rules
from .model import model_rules
from .hardware import chip_rules, cluster_rules, fabric_rules
from .part import dpu_rules
from .switch import node_switch_rules, switch_rules
from .serve import serve_rules
from .rl import rl_rules
from .schedule import scheduler_rules, tenant_rules


def check_entity(entity: Entity, complete: bool = True) -> list[Diagnostic]:
    """The rules of the entity's kind; those that need every field only when none was invalid."""
    rules = (RULES.get(entity.kind), COMPLETE_RULES.get(entity.kind) if complete else None)
    return [d for rule in rules if rule for d in rule(entity)]


RULES: dict[str, Callable[[Entity], Iterator[Diagnostic]]] = {
    "dpu": dpu_rules, "switch": switch_rules, "node": node_switch_rules, "chip": chip_rules, "fabric": fabric_rules, "cluster": cluster_rules, "model": model_rules,
    "train": job_rules, "serve": job_rules, "workload": workload_rules, "tenant": tenant_rules,
    "scheduler": scheduler_rules, "rl": rl_rules,
}
# Rules that would misreport a field whose value was invalid (and so is absent) as missing.
COMPLETE_RULES: dict[str, Callable[[Entity], Iterator[Diagnostic]]] = {"serve": serve_rules}
