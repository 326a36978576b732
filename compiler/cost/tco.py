"""Cost of ownership: capex from the bill of materials, energy and maintenance over the
lifetime in the cluster's `economics { }` block, discounted to today.

    annuity      = sum over years y = 1..Y of 1 / (1 + discount_rate)^y    (= Y at rate 0)
    energy/year  = facility power (IT at full load x PUE) x utilization x 8766 h x energy_price
    maint./year  = maintenance x capex
    TCO          = capex + annuity x (energy/year + maintenance/year)

Every row is a `Metric` with its formula, so `gclc explain` prints them and the rows add
up to the total (tests/compiler/test_tco.py checks the conservation).
"""

from __future__ import annotations


from .bom import DEFAULT_RACK_POWER, Bom, bill, usd
from ..design import Entity
from ..ir import ClusterGraph
from ..metrics import Metric, facility_power
from ...dsl.numbers import number, percent, quantity
from ...dsl.units import Quantity
from ...dsl.records import frozen

HOURS_PER_YEAR = 8766.0  # 365.25 days
SECONDS_PER_YEAR = HOURS_PER_YEAR * 3600


@frozen
class Economics:
    years: int
    energy_price: float          # USD per joule
    discount_rate: float = 0.0   # per year
    maintenance: float = 0.0     # share of capex per year
    utilization: float = 1.0     # share of the hours at full load
    rack_power: float = DEFAULT_RACK_POWER
    rack_price: float | None = None

    @property
    def annuity(self) -> float:
        return sum((1 + self.discount_rate) ** -y for y in range(1, self.years + 1))


def economics_of(cluster: Entity) -> Economics | None:
    block = cluster.get("economics")
    if block is None:
        return None

    def num(name: str, default):
        value = block.get(name)
        return float(value) if isinstance(value, (Quantity, int)) else default

    return Economics(int(block.get("years")), num("energy_price", 0.0), num("discount_rate", 0.0),
                     num("maintenance", 0.0), num("utilization", 1.0), num("rack_power", DEFAULT_RACK_POWER),
                     num("rack_price", None))


@frozen
class Tco:
    bom: Bom
    economics: Economics
    facility_power: float        # W
    capex: float
    energy: float                # present value over the lifetime, USD
    maintenance: float           # present value over the lifetime, USD

    @property
    def total(self) -> float:
        return self.capex + self.energy + self.maintenance

    @property
    def complete(self) -> bool:
        return not self.bom.missing

    @property
    def lifetime_seconds(self) -> float:
        """Seconds at load over the lifetime (undiscounted)."""
        return self.economics.years * SECONDS_PER_YEAR * self.economics.utilization

    def per_token(self, tokens_per_s: float) -> float:
        """USD per token at `tokens_per_s` on the whole cluster for its life at the stated utilization."""
        return self.total / (tokens_per_s * self.lifetime_seconds)


def tco(cluster: Entity, graph: ClusterGraph, economics: Economics | None = None,
        power: float | None = None) -> Tco | None:
    """The cost of ownership of `graph` (lowered from `cluster`, drawing `power` W at the
    facility, by default its full load); None without `economics`."""
    econ = economics or economics_of(cluster)
    if econ is None:
        return None
    bom = bill(cluster, graph, econ.rack_power, econ.rack_price)
    power = facility_power(graph) if power is None else power
    energy_year = power * econ.utilization * SECONDS_PER_YEAR * econ.energy_price
    return Tco(bom, econ, power, bom.capex, econ.annuity * energy_year,
               econ.annuity * econ.maintenance * bom.capex)


def bom_metrics(bom: Bom) -> tuple[Metric, ...]:
    rows = [Metric(f"bom.{line.key}.count", f"{line.label}", line.count, "", line.formula) for line in bom.lines]
    rows.append(Metric("bom.rack_power", "rated IT power per compute rack", bom.rack_it_power, "W",
                       "IT power of the compute racks / racks"))
    return tuple(rows)


def tco_metrics(t: Tco) -> tuple[Metric, ...]:
    e = t.economics
    rows = [Metric(f"capex.{line.key}", f"capex: {line.label}", line.cost, "USD", line.formula)
            for line in t.bom.lines if line.cost]
    rows.append(Metric("capex", "capex", t.capex, "USD", "sum of the capex rows"
                       + (f"; no price for {', '.join(t.bom.missing)} (a lower bound)" if t.bom.missing else "")))
    rate = percent(e.discount_rate)
    rows.append(Metric("tco.annuity", "annuity factor", e.annuity, "",
                       f"sum over {e.years} years of 1 / (1 + {rate})^year"))
    kwh = e.energy_price * 3.6e6
    rows.append(Metric("tco.energy", "energy (present value)", t.energy, "USD",
                       f"{quantity(t.facility_power, 'W')} facility x {percent(e.utilization)} x {number(HOURS_PER_YEAR)} h x "
                       f"{number(kwh)} USD/kWh x annuity {number(e.annuity)}"))
    rows.append(Metric("tco.maintenance", "maintenance (present value)", t.maintenance, "USD",
                       f"{percent(e.maintenance)} x capex {usd(t.capex)} x annuity {number(e.annuity)}"))
    rows.append(Metric("tco", "cost of ownership", t.total, "USD", "capex + energy + maintenance"))
    rows.append(Metric("tco.per_gpu_hour", "cost per GPU-hour at load", t.total / (t.bom.count("accelerators") or 1)
                       / (t.lifetime_seconds / 3600), "USD",
                       f"TCO / {number(t.bom.count('accelerators'))} GPUs / ({e.years} years x {number(HOURS_PER_YEAR)} h x "
                       f"{percent(e.utilization)})"))
    return tuple(rows)


def job_cluster(job: Entity) -> Entity | None:
    """The cluster a train or serve job runs on (the cluster of its partition)."""
    target = job.get("on")
    target = target[0] if isinstance(target, tuple) and len(target) == 1 else target
    target = getattr(target, "cluster", target)
    return target if isinstance(target, Entity) and target.kind == "cluster" else None


def job_cost(job: Entity, graph: ClusterGraph, tokens_per_s: float, tokens: float | None = None,
             power: float | None = None) -> dict | None:
    """Capex, TCO and USD per token (and to train `tokens`) of a job that keeps its cluster
    busy at `tokens_per_s` drawing `power` W at the facility (default: the cluster's full
    load); None when the cluster has no `economics`."""
    cluster = job_cluster(job)
    t = None if cluster is None else tco(cluster, graph, power=power)
    if t is None or tokens_per_s <= 0:
        return None
    out = {"capex_usd": t.capex, "tco_usd": t.total, "complete": t.complete,
           "cost_per_token_usd": t.per_token(tokens_per_s)}
    if tokens:
        out["cost_to_train_usd"] = out["cost_per_token_usd"] * tokens
    return out


def cost_rates(job: Entity, graph: ClusterGraph) -> tuple[float, float] | None:
    """(USD per second at load, USD per joule at the facility) of the job's cluster: capex and
    maintenance spread over the seconds at load of its life, and the present value of a joule
    at the energy price (annuity / years of it), so that a job at `T` tokens/s drawing `P` W
    costs (usd_per_s + usd_per_j x P) / T per token, as `job_cost` with that power says.
    None without `economics`."""
    cluster = job_cluster(job)
    t = None if cluster is None else tco(cluster, graph, power=0.0)
    if t is None:
        return None
    e = t.economics
    return (t.capex + t.maintenance) / t.lifetime_seconds, e.energy_price * e.annuity / e.years


def cost_metrics(cluster: Entity, graph: ClusterGraph) -> tuple[Metric, ...]:
    """The bill of materials and, with an `economics` block, the cost of ownership."""
    t = tco(cluster, graph)
    if t is None:
        return bom_metrics(bill(cluster, graph))
    return bom_metrics(t.bom) + tco_metrics(t)
