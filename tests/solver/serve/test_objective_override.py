"""`gclc plan --objective` reaches a serve plan, or is refused with the reason: it had been
accepted and ignored for serve jobs (every objective gave the same plan, `energy` included,
which `minimize = energy` plans) and for jobs split across partitions."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from gclc.cli.main import main
from gclc.compiler.driver import check_text
from gclc.model.job import JobError
from gclc.solver.serve import plan as serve_plan
from gclc.solver.serve.plan import plan_serve, serve_entity
from gclc.testing.model_texts import chat_serve

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = (ROOT / "tests" / "data" / "serve_cost.gcl").read_text().split("serve chat")[0]


def design(energy: bool):
    text = CLUSTER + chat_serve(("minimize = energy\n  " if energy else "") + "slo { tpot <= 60 ms }")
    result = check_text(text, str(ROOT / "tests" / "data" / "serve_objective.gcl"))
    assert result.design is not None, result.diagnostics
    return serve_entity(result.design)


def searched_for_energy(entity, objective) -> bool:
    seen = []
    real = serve_plan.SaturatedSearch

    def recording(*args, **kwargs):
        seen.append(kwargs["energy"])
        return real(*args, **kwargs)

    with mock.patch("gclc.solver.serve.plan.SaturatedSearch", recording):
        plan_serve(entity, objective=objective)
    (energy,) = seen
    return energy


@pytest.mark.parametrize("stated, objective, energy", [(False, None, False), (True, None, True),
                                                       (False, "energy", True), (True, "throughput", False)])
def test_the_objective_given_is_the_one_searched(stated, objective, energy):
    assert searched_for_energy(design(stated), objective) is energy


def test_an_objective_a_serve_plan_has_not_is_refused():
    with pytest.raises(JobError, match="`--objective mfu` does not apply to the serve job `chat`; it is planned "
                                       "for throughput or energy"):
        plan_serve(design(False), objective="mfu")


def test_the_cli_refuses_what_it_cannot_plan(capsys):
    assert main(["plan", "--objective", "mfu", str(ROOT / "examples" / "chat_serve_features.gcl")]) == 1
    assert "does not apply to the serve job `chat`" in capsys.readouterr().err
    assert main(["plan", "--objective", "energy", str(ROOT / "examples" / "hetero_h100_a100.gcl")]) == 1
    assert "a job split across partitions; it is planned for throughput" in capsys.readouterr().err


@pytest.mark.parametrize("objective, refused", [("maximize = throughput", False), ("minimize = time", False),
                                                ("minimize = energy", True), ("maximize = mfu", True),
                                                ("maximize = goodput", True)])
def test_a_split_jobs_objective_is_planned_or_refused_where_written(objective, refused):
    """`minimize = energy` on a train job `on` two partitions checked clean and was planned for
    throughput (solver/split/plan.py plans every split for throughput)."""
    from gclc.compiler.driver import check_file

    text = (ROOT / "examples" / "hetero_h100_a100.gcl").read_text()
    assert "  maximize = throughput\n" in text
    result = check_text(text.replace("  maximize = throughput\n", f"  {objective}\n"),
                        str(ROOT / "examples" / "hetero_objective.gcl"))
    errors = [d for d in result.diagnostics if d.is_error]
    assert bool(errors) == refused
    if refused:
        assert errors[0].code == "shape" and "is not planned for a job split across partitions" in errors[0].summary
    assert check_file(str(ROOT / "examples" / "hetero_h100_a100.gcl")).design is not None
