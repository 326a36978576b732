"""The software stack of a published run: its framework family from the row's framework and
group words, its date from what the row cites (an arXiv id, a container release, a
Megatron-Core version), and the stack whose releases cover that date (gclc.model.stacks)."""

from __future__ import annotations

import re

from gclc.model.stacks import ERAS, NoStack, stack_for
from run_models import Unexpressible

# Megatron-Core release tags and their months (ESTIMATE: the GitHub tag dates, rounded to
# the month; only their order against core 0.4, 2023-12, decides a stack).
CORE_RELEASES = {"0.4": "2023-12", "0.5": "2024-03", "0.6": "2024-04", "0.7": "2024-06", "0.8": "2024-07",
                 "0.9": "2024-10", "0.10": "2024-12", "0.11": "2025-02", "0.12": "2025-04", "0.13": "2025-07"}


def family_of(row: dict) -> str:
    words = (row["framework"] + " " + row["group"]).lower()
    # torch.compile named in the framework: the compiled variant (model/stacks.py [compile])
    for needle, family in (("maxtext", "maxtext"), ("deepspeed", "deepspeed"), ("torch.compile", "fsdp_compiled"),
                           ("torchtitan", "fsdp"),
                           ("llm-foundry", "fsdp"), ("composer", "fsdp"), ("megatron-bridge", "nemo"),
                           ("nemo", "nemo"), ("megatron", "megatron")):
        if needle in words:
            return family
    raise Unexpressible(f"software stack '{row['framework']}' has no gclc equivalent")


def date_of(row: dict) -> str | None:
    """YYYY-MM the row's numbers were produced with, from what it cites (None: not stated)."""
    text = " ".join(row[k] for k in ("framework", "group", "source", "source_locator"))
    # a release month the row states outright wins over the paper's date (MT-NLG ran on a
    # DeepSpeed older than its arXiv preprint)
    stated = re.search(r"release of (\d{4})-(\d{2})", row["framework"])
    if stated:
        return f"{stated.group(1)}-{stated.group(2)}"
    core = re.search(r"(?:Megatron-Core|core)[ _]r?(\d+\.\d+)", text, re.IGNORECASE)
    if core and core.group(1) in CORE_RELEASES:
        return CORE_RELEASES[core.group(1)]
    container = re.search(r"(?:NeMo|Megatron-Bridge)[^0-9]{0,20}(\d{2})\.(\d{2})", text)
    if container:
        return f"20{container.group(1)}-{container.group(2)}"
    arxiv = re.search(r"arXiv:(\d{2})(\d{2})\.\d{4,5}", text)
    if arxiv:
        return f"20{arxiv.group(1)}-{arxiv.group(2)}"
    return None


def software_of(row: dict) -> str:
    family = family_of(row)
    eras = [e for e in ERAS if e.framework == family]
    date = date_of(row)
    if date is None:
        if len(eras) == 1:
            return eras[0].stack
        raise Unexpressible(f"the run of '{row['framework']}' states no date or release, and {family} changed "
                            f"behaviour between releases ({', '.join(e.stack for e in eras)})")
    try:
        return stack_for(family, date).stack
    except NoStack as error:
        raise Unexpressible(str(error)) from None
