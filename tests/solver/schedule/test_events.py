"""List-Watch: every state change reaches the scheduler once, in order, and the cache
the informer builds equals the state replayed from the log."""

import importlib.util
from pathlib import Path

from gclc.solver.schedule.events import ApiServer, Informer, Timeline, Timer
from gclc.solver.schedule.catalog import POLICIES
from gclc.solver.schedule.simulate import Simulation

_spec = importlib.util.spec_from_file_location("schedule_cluster", Path(__file__).with_name("_cluster.py"))
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def test_watch_delivers_each_change_once_in_order():
    api, seen = ApiServer(), []
    api.commit(0.0, "submitted", "before-list")          # part of the List, not watched
    informer = Informer(api, {"submitted": seen.append, "bound": seen.append})
    for i in range(5):
        api.commit(float(i), "submitted" if i % 2 else "bound", f"job{i}")
        if i == 2:
            assert informer.sync() == 3
    informer.sync()
    informer.sync()                                       # nothing new: nothing delivered again
    assert [c.subject for c in seen] == [f"job{i}" for i in range(5)]
    assert [c.version for c in seen] == [2, 3, 4, 5, 6]
    assert informer.delivered == 5


def test_timeline_orders_by_time_then_insertion():
    line = Timeline()
    for t, name in ((2.0, "late"), (1.0, "first"), (1.0, "second")):
        line.push(Timer(t, "arrive", name))
    assert [line.pop().subject for _ in range(3)] == ["first", "second", "late"]


def test_simulation_cache_equals_the_log_replayed():
    jobs = [fx.job(f"j{i}", gpus, hours=1 + i % 3, priority=1 + i % 3, submit=i * 0.3)
            for i, gpus in enumerate((4, 8, 16, 4, 32, 8, 12))]
    checks = []

    def replay(sim: Simulation) -> None:
        held: dict[str, int] = {}
        for change in sim.api.log:
            if change.kind == "bound":
                held[change.subject] = change.data[0].gpus
            elif change.kind == "released":
                held.pop(change.subject)
        assert sim.informer.seen == sim.api.version       # nothing left undelivered after a cycle
        assert held == {n: a.gpus for n, a in sim.state.allocations.items()}
        checks.append(1)

    outcome = Simulation(fx.workload(jobs), POLICIES["priority"], seed=3, check=replay).run()
    assert checks and outcome.changes == outcome.delivered
    assert all(run.phase == "done" for run in outcome.runs)
