"""Fair-share: decayed usage accounting and Slurm's Fair Tree, as tables of scenarios.

Trees are written compactly: accounts as ``{"parent/child": shares}`` paths, users as
``{"account:user": shares}`` and usage as ``{"account:user": usage}``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scheduler.core.fairshare import (
    AccountNode,
    FairShareTree,
    ShareRow,
    UsageInterval,
    UsageKey,
    UsagePolicy,
    accrued_usage,
    charge,
    decay_usage,
    decay_usage_map,
    fair_tree_factors,
    running_intervals,
    sshare,
    usage_as_of,
)
from scheduler.core.types import Allocation, RunningJob
from tests.builders import T0, node

DAY = timedelta(days=1)
WEEK = timedelta(days=7)
HOUR = 3600.0


def tree(accounts: dict[str, int], users: dict[str, int]) -> FairShareTree:
    """``{"a/b": 2}`` is account ``b`` under ``a`` with 2 shares; ``{"b:alice": 1}`` a user."""
    nodes = []
    for path, shares in accounts.items():
        *parents, name = path.split("/")
        nodes.append(AccountNode(name, parents[-1] if parents else None, shares))
    associations = []
    for spec, shares in users.items():
        account, user = spec.split(":")
        associations.append((account, user, shares))
    return FairShareTree.build(nodes, associations)


def usage_map(usage: dict[str, float]) -> dict[UsageKey, float]:
    return {(spec.split(":")[0], spec.split(":")[1]): value for spec, value in usage.items()}


def factors_by_spec(t: FairShareTree, usage: dict[str, float]) -> dict[str, float]:
    return {f"{a}:{u}": f for (a, u), f in fair_tree_factors(t, usage_map(usage)).items()}


# --- Usage accounting -------------------------------------------------------------------


@dataclass
class DecayCase:
    id: str
    usage: float
    elapsed: timedelta
    half_life: timedelta
    expected: float


DECAY_CASES = [
    DecayCase("one half-life halves usage", 1000.0, WEEK, WEEK, 500.0),
    DecayCase("two half-lives quarter it", 1000.0, 2 * WEEK, WEEK, 250.0),
    DecayCase("no time passed: unchanged", 1000.0, timedelta(0), WEEK, 1000.0),
    DecayCase("a one-day half-life after three days: an eighth", 800.0, 3 * DAY, DAY, 100.0),
    DecayCase("half a half-life: 1/sqrt(2)", 1.0, WEEK / 2, WEEK, 1 / math.sqrt(2)),
    DecayCase("zero usage stays zero", 0.0, 10 * WEEK, WEEK, 0.0),
]


@pytest.mark.parametrize("case", DECAY_CASES, ids=[c.id for c in DECAY_CASES])
def test_decay(case: DecayCase) -> None:
    assert decay_usage(case.usage, T0, T0 + case.elapsed, case.half_life) == pytest.approx(case.expected)


def test_decay_default_half_life_is_seven_days() -> None:
    assert decay_usage(10.0, T0, T0 + WEEK) == pytest.approx(5.0)
    assert UsagePolicy().half_life == WEEK


def test_decay_refuses_to_run_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        decay_usage(1.0, T0 + DAY, T0)


def test_decay_map_decays_every_value_and_leaves_the_input_alone() -> None:
    stored = {("lab", "alice"): 8.0, ("lab", "bob"): 2.0}
    assert decay_usage_map(stored, T0, T0 + 2 * WEEK) == {("lab", "alice"): 2.0, ("lab", "bob"): 0.5}
    assert stored == {("lab", "alice"): 8.0, ("lab", "bob"): 2.0}


NO_DECAY = UsagePolicy(half_life=timedelta(days=1e6))  # half-life so long the integral is ~ r * span


@dataclass
class AccrualCase:
    id: str
    interval: UsageInterval
    now_offset: float  # seconds after T0
    expected: float
    policy: UsagePolicy = NO_DECAY
    since_offset: float | None = None


def interval(start: float, end: float | None, gpus: int = 1, model: str = "", qos: str = "") -> UsageInterval:
    """An interval of ``lab:alice`` from ``T0 + start`` seconds to ``T0 + end`` (None: running)."""
    return UsageInterval(
        "lab",
        "alice",
        T0 + timedelta(seconds=start),
        None if end is None else T0 + timedelta(seconds=end),
        gpus,
        model,
        qos,
    )


WEIGHTED = UsagePolicy(
    half_life=timedelta(days=1e6), billing_weights={"H100-80GB": 2.0, "L4": 0.25}, qos_usage_factors={"scavenger": 0.5}
)
ONE_HOUR_HALF_LIFE = UsagePolicy(half_life=timedelta(hours=1))

ACCRUAL_CASES = [
    AccrualCase("1 GPU for 1 hour is 3600 GPU-seconds", interval(0, HOUR), HOUR, 3600.0),
    AccrualCase("8 GPUs for 1 hour", interval(0, HOUR, gpus=8), HOUR, 8 * 3600.0),
    AccrualCase("H100 bills double", interval(0, HOUR, model="H100-80GB"), HOUR, 7200.0, WEIGHTED),
    AccrualCase("L4 bills a quarter", interval(0, HOUR, gpus=4, model="L4"), HOUR, 3600.0, WEIGHTED),
    AccrualCase("scavenger QOS halves the charge", interval(0, HOUR, qos="scavenger"), HOUR, 1800.0, WEIGHTED),
    AccrualCase(
        "model weight and QOS factor multiply",
        interval(0, HOUR, model="H100-80GB", qos="scavenger"),
        HOUR,
        3600.0,
        WEIGHTED,
    ),
    AccrualCase(
        "unknown model and QOS cost 1.0", interval(0, HOUR, model="V100", qos="normal"), HOUR, 3600.0, WEIGHTED
    ),
    AccrualCase("a running job is charged up to now", interval(0, None), 600, 600.0),
    AccrualCase("a job that ends after now is charged up to now", interval(0, HOUR), 600, 600.0),
    AccrualCase("a job that starts after now is not charged", interval(HOUR, 2 * HOUR), 600, 0.0),
    AccrualCase("since clips the start", interval(0, HOUR), HOUR, 1800.0, since_offset=1800),
    AccrualCase("since after the end: nothing", interval(0, HOUR), 2 * HOUR, 0.0, since_offset=1.5 * HOUR),
    AccrualCase("zero GPUs: nothing", interval(0, HOUR, gpus=0), HOUR, 0.0),
    # Integral of 2^-(now-t)/h over one half-life ending now: h/ln2 * (1 - 1/2).
    AccrualCase(
        "a span of one half-life ending now: h / (2 ln 2)",
        interval(0, HOUR),
        HOUR,
        HOUR / (2 * math.log(2)),
        ONE_HOUR_HALF_LIFE,
    ),
    AccrualCase(
        "the same span seen one half-life later is worth half",
        interval(0, HOUR),
        2 * HOUR,
        HOUR / (4 * math.log(2)),
        ONE_HOUR_HALF_LIFE,
    ),
]


@pytest.mark.parametrize("case", ACCRUAL_CASES, ids=[c.id for c in ACCRUAL_CASES])
def test_accrued_usage(case: AccrualCase) -> None:
    now = T0 + timedelta(seconds=case.now_offset)
    since = None if case.since_offset is None else T0 + timedelta(seconds=case.since_offset)
    assert accrued_usage(case.interval, now, case.policy, since) == pytest.approx(case.expected, rel=1e-6)


def test_charge_adds_to_the_association_and_returns_a_new_map() -> None:
    usage = {("lab", "alice"): 100.0, ("lab", "bob"): 5.0}
    charged = charge(usage, interval(0, HOUR), T0 + timedelta(seconds=HOUR), NO_DECAY)
    assert charged == pytest.approx({("lab", "alice"): 3700.0, ("lab", "bob"): 5.0})
    assert usage == {("lab", "alice"): 100.0, ("lab", "bob"): 5.0}


def test_usage_as_of_sums_the_history_per_association() -> None:
    history = [
        interval(0, HOUR),
        interval(HOUR, 2 * HOUR, gpus=2),
        UsageInterval("lab", "bob", T0, T0 + timedelta(seconds=HOUR), 1),
    ]
    usage = usage_as_of(history, T0 + timedelta(seconds=2 * HOUR), NO_DECAY)
    assert usage == pytest.approx({("lab", "alice"): 3 * 3600.0, ("lab", "bob"): 3600.0})


def test_running_intervals_split_per_gpu_model() -> None:
    nodes = [node("h1", gpus=8), node("l1", gpus=4, model="L4")]
    jobs = [
        RunningJob(
            1,
            (Allocation("h1", (0, 1)), Allocation("l1", (0,))),
            started_at=T0,
            account="lab",
            user="alice",
            qos="normal",
        ),
        RunningJob(2, (Allocation("h1", (2,)),), started_at=None, account="lab", user="bob"),  # not started
    ]
    assert running_intervals(jobs, nodes, since=T0 + DAY) == [
        UsageInterval("lab", "alice", T0 + DAY, None, 2, "H100-80GB", "normal"),
        UsageInterval("lab", "alice", T0 + DAY, None, 1, "L4", "normal"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"half_life": timedelta(0)}, "half_life"),
        ({"billing_weights": {"H100": -1.0}}, "billing weight"),
        ({"qos_usage_factors": {"normal": math.nan}}, "QOS usage factor"),
    ],
    ids=["zero half-life", "negative billing weight", "NaN QOS factor"],
)
def test_usage_policy_rejects_nonsense(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        UsagePolicy(**kwargs)  # type: ignore[arg-type]


offsets = st.floats(0, 30 * 86400, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(offsets, offsets, offsets, offsets, st.integers(1, 16), st.sampled_from([HOUR, 86400.0, 7 * 86400.0]))
def test_charging_in_ticks_equals_charging_at_once(
    start: float, split: float, now: float, extra: float, gpus: int, half_life_s: float
) -> None:
    """Charging [a, c] at c == charging [a, b] at b, decaying to c, charging [b, c]."""
    start, split, now = sorted((start, split, now))
    policy = UsagePolicy(half_life=timedelta(seconds=half_life_s))
    job = interval(start, None if extra > 15 * 86400 else start + extra, gpus=gpus)
    t_split, t_now = T0 + timedelta(seconds=split), T0 + timedelta(seconds=now)

    at_once = charge({}, job, t_now, policy)
    first = charge({}, job, t_split, policy)
    in_ticks = charge(decay_usage_map(first, t_split, t_now, policy.half_life), job, t_now, policy, since=t_split)
    assert in_ticks.get(job.key, 0.0) == pytest.approx(at_once.get(job.key, 0.0), rel=1e-9, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e12), offsets, offsets)
def test_decay_composes(usage: float, first: float, second: float) -> None:
    t1, t2 = T0 + timedelta(seconds=first), T0 + timedelta(seconds=first + second)
    assert decay_usage(decay_usage(usage, T0, t1), t1, t2) == pytest.approx(decay_usage(usage, T0, t2), rel=1e-9)


# --- The tree ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accounts", "users", "match"),
    [
        ([AccountNode("a"), AccountNode("a")], [], "defined twice"),
        ([AccountNode("a", "ghost")], [], "unknown parent"),
        ([AccountNode("a", "b"), AccountNode("b", "a")], [], "cycle"),
        ([AccountNode("a", None, -1)], [], "negative shares"),
        ([AccountNode("a")], [("ghost", "alice")], "unknown account"),
        ([AccountNode("a")], [("a", "alice"), ("a", "alice")], "twice"),
        ([AccountNode("a")], [("a", "alice", -2)], "negative shares"),
    ],
    ids=[
        "duplicate account",
        "unknown parent",
        "cycle",
        "negative account shares",
        "user in unknown account",
        "duplicate association",
        "negative user shares",
    ],
)
def test_tree_validation(accounts: list[AccountNode], users: list[tuple[str, str]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FairShareTree.build(accounts, users)


# --- Fair Tree --------------------------------------------------------------------------


@dataclass
class FairTreeCase:
    id: str
    accounts: dict[str, int]
    users: dict[str, int]
    usage: dict[str, float]
    factors: dict[str, float]


FAIR_TREE_CASES = [
    FairTreeCase(
        "a single user gets 1.0",
        accounts={"lab": 1},
        users={"lab:alice": 1},
        usage={"lab:alice": 1e9},
        factors={"lab:alice": 1.0},
    ),
    FairTreeCase(
        "an account with no usage outranks a busy sibling",
        accounts={"idle": 1, "busy": 1},
        users={"idle:alice": 1, "busy:bob": 1},
        usage={"busy:bob": 10.0},
        factors={"idle:alice": 1.0, "busy:bob": 0.5},
    ),
    FairTreeCase(
        "users under a higher-LF account all rank above users under a lower-LF account, whatever their own usage",
        # physics: S=0.9, U=90/110 -> LF 1.1; chem: S=0.1, U=20/110 -> LF 0.55.
        accounts={"physics": 9, "chem": 1},
        users={"physics:p1": 1, "physics:p2": 1, "chem:c1": 1, "chem:c2": 1},
        usage={"physics:p1": 60.0, "physics:p2": 30.0, "chem:c1": 20.0},
        # chem:c2 has no usage at all and still ranks below physics:p1 and its 60.
        factors={"physics:p2": 1.0, "physics:p1": 0.75, "chem:c2": 0.5, "chem:c1": 0.25},
    ),
    FairTreeCase(
        "Slurm docs: UserA vs UserB is decided by Acct12 vs Acct16, the level below the common ancestor Acct1",
        accounts={"Acct1": 1, "Acct1/Acct12": 1, "Acct1/Acct16": 1},
        users={"Acct12:UserA": 1, "Acct16:UserB": 1},
        usage={"Acct12:UserA": 10.0, "Acct16:UserB": 5.0},
        factors={"Acct16:UserB": 1.0, "Acct12:UserA": 0.5},
    ),
    FairTreeCase(
        "more shares entitle an account to more usage",
        # big: S=2/3, U=20/35 -> LF 1.17; small: S=1/3, U=15/35 -> LF 0.78.
        accounts={"big": 2, "small": 1},
        users={"big:alice": 1, "small:bob": 1},
        usage={"big:alice": 20.0, "small:bob": 15.0},
        factors={"big:alice": 1.0, "small:bob": 0.5},
    ),
    FairTreeCase(
        "a user with zero shares gets 0 and is not counted in N",
        accounts={"lab": 1},
        users={"lab:alice": 1, "lab:guest": 0},
        usage={"lab:alice": 100.0},
        factors={"lab:alice": 1.0, "lab:guest": 0.0},
    ),
    FairTreeCase(
        "users of a zero-share account all get 0",
        accounts={"lab": 1, "frozen": 0},
        users={"lab:alice": 1, "frozen:bob": 1, "frozen:carol": 5},
        usage={"lab:alice": 100.0},
        factors={"lab:alice": 1.0, "frozen:bob": 0.0, "frozen:carol": 0.0},
    ),
    FairTreeCase(
        "sibling users with equal LF share a rank; the next is ranked as if there were no tie",
        accounts={"lab": 1},
        users={"lab:new1": 1, "lab:new2": 1, "lab:old": 1},
        usage={"lab:old": 5.0},
        factors={"lab:new1": 1.0, "lab:new2": 1.0, "lab:old": 1 / 3},
    ),
    FairTreeCase(
        "a user tied with a sibling account shares its rank with the account's highest user",
        accounts={"A": 1, "A/A1": 1, "B": 1},
        users={"A:u1": 1, "A:u2": 1, "A1:u4": 1, "B:u3": 1},
        usage={"A:u1": 10.0, "B:u3": 5.0},
        # Inside A, user u2 and account A1 both have LF = inf (no usage).
        factors={"B:u3": 1.0, "A:u2": 0.75, "A1:u4": 0.75, "A:u1": 0.25},
    ),
    FairTreeCase(
        "sibling accounts with equal LF have their children merged and sorted together",
        # A and B: same shares, same usage -> tied. Children by their own LF: a2 2.5, b1 = b2 1.0, a1 0.625.
        accounts={"A": 1, "B": 1},
        users={"A:a1": 1, "A:a2": 1, "B:b1": 1, "B:b2": 1},
        usage={"A:a1": 8.0, "A:a2": 2.0, "B:b1": 5.0, "B:b2": 5.0},
        factors={"A:a2": 1.0, "B:b1": 0.75, "B:b2": 0.75, "A:a1": 0.25},
    ),
    FairTreeCase(
        "ties are exact: 3 shares with 30 usage tie 1 share with 10",
        # LF = (3/11)/(30/43) = (1/11)/(10/43) = 43/110; in floating point the two may differ.
        accounts={"lab": 1},
        users={"lab:a": 3, "lab:b": 1, "lab:c": 7},
        usage={"lab:a": 30.0, "lab:b": 10.0, "lab:c": 3.0},
        factors={"lab:c": 1.0, "lab:a": 2 / 3, "lab:b": 2 / 3},
    ),
    FairTreeCase(
        "no usage anywhere: everyone ties at 1.0",
        accounts={"A": 1, "B": 3, "B/B1": 1},
        users={"A:a": 1, "B:b": 2, "B1:c": 1},
        usage={},
        factors={"A:a": 1.0, "B:b": 1.0, "B1:c": 1.0},
    ),
    FairTreeCase(
        "the same user in two accounts is two associations",
        accounts={"A": 1, "B": 1},
        users={"A:alice": 1, "B:alice": 1},
        usage={"A:alice": 10.0},
        factors={"B:alice": 1.0, "A:alice": 0.5},
    ),
    FairTreeCase(
        "usage of associations not in the tree is ignored",
        accounts={"lab": 1},
        users={"lab:alice": 1, "lab:bob": 1},
        usage={"lab:alice": 1.0, "gone:eve": 1e9, "lab:mallory": 1e9},
        factors={"lab:bob": 1.0, "lab:alice": 0.5},
    ),
    FairTreeCase(
        "depth first: a deep idle branch ranks all its users before the busy branch",
        accounts={"uni": 1, "uni/phys": 1, "uni/phys/astro": 1, "uni/chem": 1},
        users={"astro:ann": 1, "astro:art": 1, "phys:pat": 1, "chem:cid": 1},
        usage={"astro:art": 1.0, "phys:pat": 3.0, "chem:cid": 100.0},
        # in uni: phys U=4/104 (LF 13) beats chem (LF 0.52); in phys: astro (S .5, U .25: LF 2) beats pat (LF 2/3).
        factors={"astro:ann": 1.0, "astro:art": 0.75, "phys:pat": 0.5, "chem:cid": 0.25},
    ),
]


@pytest.mark.parametrize("case", FAIR_TREE_CASES, ids=[c.id for c in FAIR_TREE_CASES])
def test_fair_tree(case: FairTreeCase) -> None:
    factors = factors_by_spec(tree(case.accounts, case.users), case.usage)
    assert factors == pytest.approx(case.factors)


def test_sshare_rows_in_tree_order() -> None:
    t = tree({"uni": 1, "uni/phys": 3, "uni/chem": 1}, {"phys:ann": 1, "phys:bo": 1, "chem:cy": 1, "uni:dean": 1})
    usage = usage_map({"phys:ann": 60.0, "phys:bo": 20.0, "chem:cy": 20.0})

    rows = sshare(t, usage)

    # depth 0: uni; under uni its user first, then sub-accounts by name.
    assert [(r.depth, r.account, r.user) for r in rows] == [
        (0, "uni", ""),
        (1, "uni", "dean"),
        (1, "chem", ""),
        (2, "chem", "cy"),
        (1, "phys", ""),
        (2, "phys", "ann"),
        (2, "phys", "bo"),
    ]
    by = {(r.account, r.user): r for r in rows}
    # uni's children: dean (1 share), chem (1), phys (3): S = 1/5, 1/5, 3/5.
    assert asdict(by[("phys", "")]) == pytest.approx(
        asdict(
            ShareRow(
                account="phys",
                user="",
                depth=1,
                raw_shares=3,
                norm_shares_level=0.6,
                norm_shares=0.6,
                raw_usage=80.0,
                effective_usage=0.8,
                norm_usage=0.8,
                level_fs=0.75,
                fairshare=None,
                rank=None,
            )
        )
    )
    ann = by[("phys", "ann")]
    assert (ann.norm_shares_level, ann.norm_shares) == pytest.approx((0.5, 0.3))  # NormShares = 3/5 * 1/2
    assert (ann.effective_usage, ann.norm_usage, ann.level_fs) == pytest.approx((0.75, 0.6, 2 / 3))
    assert by[("uni", "dean")].level_fs == math.inf  # no usage
    assert by[("uni", "")].norm_shares == 1.0
    # dean (inf) > chem (LF 1.0) > phys (0.75); in phys bo (1.5) > ann.
    assert [(r.user, r.rank, r.fairshare) for r in rows if r.user] == [
        ("dean", 4, 1.0),
        ("cy", 3, 0.75),
        ("ann", 1, 0.25),
        ("bo", 2, 0.5),
    ]


def test_sshare_rejects_negative_usage() -> None:
    with pytest.raises(ValueError, match="usage"):
        sshare(tree({"lab": 1}, {"lab:alice": 1}), {("lab", "alice"): -1.0})


# --- Properties -------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> tuple[FairShareTree, dict[UsageKey, float]]:
    """A random tree (up to 3 levels), shares 0..4, and integer or real usage."""
    accounts: list[AccountNode] = []
    for i in range(draw(st.integers(1, 7))):
        parent = draw(st.sampled_from([None, *(a.name for a in accounts)]))
        accounts.append(AccountNode(f"a{i}", parent, draw(st.integers(0, 4))))
    users = []
    for j in range(draw(st.integers(1, 12))):
        account = draw(st.sampled_from([a.name for a in accounts]))
        users.append((account, f"u{j}", draw(st.integers(0, 4))))
    amounts = st.one_of(st.just(0.0), st.integers(0, 50).map(float), st.floats(0, 1e6, allow_nan=False))
    usage = {(a, u): draw(amounts) for a, u, _ in users}
    return FairShareTree.build(accounts, users), usage


def ranked_users_under(rows: list[ShareRow], index: int) -> list[ShareRow]:
    """Ranked user rows in the subtree of ``rows[index]`` (itself, if it is a user)."""
    top = rows[index]
    if top.user:
        return [top] if top.rank is not None else []
    found = []
    for row in rows[index + 1 :]:
        if row.depth <= top.depth:
            break
        if row.user and row.rank is not None:
            found.append(row)
    return found


def sibling_groups(rows: list[ShareRow]) -> list[list[int]]:
    """Indices of rows grouped by parent: top-level accounts, then each account's children."""
    groups: dict[int | None, list[int]] = {}
    stack: list[int] = []  # indices of open account rows, by depth
    for i, row in enumerate(rows):
        del stack[row.depth :]
        groups.setdefault(stack[-1] if stack else None, []).append(i)
        if not row.user:
            stack.append(i)
    return list(groups.values())


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_factors_are_in_unit_interval_and_zero_only_without_shares(world) -> None:  # type: ignore[no-untyped-def]
    t, usage = world
    rows = sshare(t, usage)
    factors = fair_tree_factors(t, usage)
    assert set(factors) == {u.key for u in t.users}
    for row in rows:
        if row.user:
            assert row.fairshare is not None and 0.0 <= row.fairshare <= 1.0
            assert (row.fairshare == 0.0) == (row.norm_shares == 0.0)


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_ranks_form_a_competition_ranking(world) -> None:  # type: ignore[no-untyped-def]
    """Top rank is N; a rank shared by k users is followed by one exactly k lower."""
    t, usage = world
    ranks = sorted((r.rank for r in sshare(t, usage) if r.rank is not None), reverse=True)
    for rank in ranks:
        users_ahead = ranks.index(rank)  # users ranked strictly higher
        assert rank == len(ranks) - users_ahead


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_without_level_fs_ties_users_with_shares_get_distinct_factors(world) -> None:  # type: ignore[no-untyped-def]
    t, usage = world
    rows = sshare(t, usage)
    for group in sibling_groups(rows):
        lfs = [rows[i].level_fs for i in group if rows[i].norm_shares > 0]
        assume(len(lfs) == len(set(lfs)))
    ranked = [r.fairshare for r in rows if r.user and r.norm_shares > 0]
    assert len(ranked) == len(set(ranked))


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_a_higher_level_fs_sibling_outranks_every_user_of_a_lower_one(world) -> None:  # type: ignore[no-untyped-def]
    """Fair Tree's promise: LF(X) > LF(Y) for siblings => every user under X > every user under Y."""
    t, usage = world
    rows = sshare(t, usage)
    for group in sibling_groups(rows):
        for x in group:
            for y in group:
                if rows[x].norm_shares == 0 or rows[y].norm_shares == 0 or not rows[x].level_fs > rows[y].level_fs:
                    continue
                under_x, under_y = ranked_users_under(rows, x), ranked_users_under(rows, y)
                if under_x and under_y:
                    assert min(r.fairshare or 0.0 for r in under_x) > max(r.fairshare or 0.0 for r in under_y)


@settings(max_examples=200, deadline=None)
@given(worlds(), st.data())
def test_more_usage_never_raises_a_users_factor(world, data) -> None:  # type: ignore[no-untyped-def]
    t, usage = world
    key = data.draw(st.sampled_from(sorted(usage)))
    extra = data.draw(st.one_of(st.integers(1, 100).map(float), st.floats(1.0, 1e6)))
    before = fair_tree_factors(t, usage)[key]
    after = fair_tree_factors(t, {**usage, key: usage[key] + extra})[key]
    assert after <= before
