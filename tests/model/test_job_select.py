"""One function says what kind of job a design asks for (model/job.py `select_job`): every
command that plans dispatches on it, so that only that kind's solver loads."""

from pathlib import Path

import pytest

from gclc.compiler.driver import check_file
from gclc.model.job import JobError, UnknownJob, select_job, train_job

ROOT = Path(__file__).resolve().parents[2]


def design(path: str):
    return check_file(str(ROOT / path)).design


@pytest.mark.parametrize("path, kind, name", [
    ("tests/data/train.gcl", "train", "job"),
    ("examples/hetero_h100_a100.gcl", "hetero", "llama3_70b_hetero"),
    ("examples/deepseek_v3_serve.gcl", "serve", "chat"),
])
def test_the_kind_of_job_a_design_asks_for(path, kind, name):
    chosen, entity = select_job(design(path))
    assert (chosen, entity.name) == (kind, name)
    assert select_job(design(path), name) == (chosen, entity)     # named, the same job


def test_a_train_job_selected_is_the_job_the_model_evaluates():
    d = design("tests/data/train.gcl")
    kind, entity = select_job(d)
    assert kind == "train" and train_job(d).entity is entity


def test_no_job_or_an_unknown_name_is_an_error_that_says_so():
    with pytest.raises(UnknownJob, match="no train job `nope`"):
        select_job(design("tests/data/train.gcl"), "nope")
    with pytest.raises(JobError, match=r"no job to plan: declare a `train`, `serve` or `rl` job") as raised:
        select_job(design("tests/data/pod.gcl"))
    assert not raised.value.usage          # no name given: not a usage error
