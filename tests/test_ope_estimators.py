"""OPE estimators against values worked out by hand on tiny datasets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tracerl.ope import estimate as estimate_module
from tracerl.ope.critic import Critic
from tracerl.ope.estimate import (
    LOW_SUPPORT,
    UNSUPPORTED_ACTIONS,
    Estimate,
    bootstrap_sums,
    flag_disagreements,
)
from tracerl.ope.importance import (
    EpisodeBatch,
    dr_contributions,
    estimate_is_family,
    wis_contributions,
)
from tracerl.ope.intervals import LOW_ESS
from tracerl.ope.support import episode_support, support_flags
from tracerl.rl.features import OneHot
from tracerl.rl.transitions import Transitions

GAMMA = 0.9

# Three episodes of lengths 1, 2, 3, listed out of order (from_steps accepts any order).
#            episode t   reward pi_b  pi_e  q_hat v_hat
STEPS = [
    (2, 2, -1.0, 0.25, 0.75, -0.9, -0.6),
    (0, 0, 1.0, 0.5, 0.25, 0.8, 0.6),
    (1, 1, 2.0, 0.25, 0.5, 1.5, 1.0),
    (2, 0, 1.0, 0.8, 0.4, 0.2, 0.3),
    (1, 0, 0.0, 0.5, 1.0, 0.5, 0.4),
    (2, 1, 0.0, 0.5, 0.5, -0.5, -0.4),
]
# By hand, w_{0:t} = prod rho: episode 0: [0.25/0.5] = [0.5];
# episode 1: [1.0/0.5, 2 * 0.5/0.25] = [2, 4]; episode 2: [0.4/0.8, 0.5 * 1, 0.5 * 3] =
# [0.5, 0.5, 1.5]. Returns: G0 = 1.0, G1 = 0 + 0.9 * 2 = 1.8, G2 = 1 + 0 + 0.81 * -1 = 0.19.


def make_batch(steps=STEPS, critic: bool = True, gamma: float = GAMMA) -> EpisodeBatch:
    cols = list(zip(*steps, strict=True))
    episode, t = np.array(cols[0]), np.array(cols[1])
    reward, pi_b, pi_e, q_hat, v_hat = (np.array(c, dtype=float) for c in cols[2:])
    return EpisodeBatch.from_steps(episode, t, reward, pi_b, pi_e,
                                   q_hat=q_hat if critic else None,
                                   v_hat=v_hat if critic else None, gamma=gamma)


def family(batch: EpisodeBatch, support: float = 1.0, unsupported: bool = False,
           **kwargs) -> dict[str, Estimate]:
    kwargs = {"seed": 0, "n_boot": 200, "level": 0.95, "min_ess_fraction": 0.1,
              "min_n_eff": 30.0, "value_range": None,
              "flags": support_flags(support, min_support=0.95, unsupported=unsupported),
              **kwargs}
    return {e.estimator: e for e in estimate_is_family(batch, support=support, **kwargs)}


def test_episode_batch_pads_in_any_order():
    batch = make_batch()
    assert (batch.n_episodes, batch.horizon) == (3, 3)
    np.testing.assert_array_equal(batch.mask, [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_array_equal(batch.reward, [[1, 0, 0], [0, 2, 0], [1, 0, -1]])
    np.testing.assert_array_equal(batch.pi_b[2], [0.8, 0.5, 0.25])
    assert batch.v_hat[1, 1] == 1.0 and batch.gamma == GAMMA


@pytest.mark.parametrize("steps, message", [
    ([(0, 0, 1, .5, .5, 0, 0), (0, 0, 1, .5, .5, 0, 0)], "duplicate"),
    ([(0, 0, 1, .5, .5, 0, 0), (0, 2, 1, .5, .5, 0, 0)], "missing"),
    ([(1, 0, 1, .5, .5, 0, 0)], "every code used"),
    ([(0, 0, 1, .5, 1.5, 0, 0)], "target_prob"),
])
def test_episode_batch_rejects_bad_steps(steps, message):
    with pytest.raises(ValueError, match=message):
        make_batch(steps)


def test_is_family_against_hand_computed_values():
    est = family(make_batch())
    expected = {
        "is": (0.5 * 1.0 + 4.0 * (0.0 + 0.9 * 2.0) + 1.5 * (1.0 + 0.9 * 0.0 + 0.81 * -1.0)) / 3,
        "pdis": (0.5 * 1.0
                 + (2.0 * 0.0 + 0.9 * 4.0 * 2.0)
                 + (0.5 * 1.0 + 0.9 * 0.5 * 0.0 + 0.81 * 1.5 * -1.0)) / 3,
        "wis": (0.5 * 1.0 + 4.0 * 1.8 + 1.5 * 0.19) / (0.5 + 4.0 + 1.5),
        # per t over all episodes; an ended episode keeps its weight with reward 0
        "pdwis": ((0.5 * 1.0 + 2.0 * 0.0 + 0.5 * 1.0) / (0.5 + 2.0 + 0.5)
                  + 0.9 * (0.5 * 0.0 + 4.0 * 2.0 + 0.5 * 0.0) / (0.5 + 4.0 + 0.5)
                  + 0.81 * (0.5 * 0.0 + 4.0 * 0.0 + 1.5 * -1.0) / (0.5 + 4.0 + 1.5)),
        # sum_t g^t [w_t (r_t - q_t) + w_{t-1} v_t], per episode
        "dr": ((0.5 * (1.0 - 0.8) + 1.0 * 0.6)
               + (2.0 * (0.0 - 0.5) + 1.0 * 0.4 + 0.9 * (4.0 * (2.0 - 1.5) + 2.0 * 1.0))
               + (0.5 * (1.0 - 0.2) + 1.0 * 0.3
                  + 0.9 * (0.5 * (0.0 + 0.5) + 0.5 * -0.4)
                  + 0.81 * (1.5 * (-1.0 + 0.9) + 0.5 * -0.6))) / 3,
        # the same with weights normalised per t (w_{-1} normalised = 1/3)
        "wdr": ((0.5 * (1.0 - 0.8) + 2.0 * (0.0 - 0.5) + 0.5 * (1.0 - 0.2)) / 3
                + (0.6 + 0.4 + 0.3) / 3
                + 0.9 * ((4.0 * (2.0 - 1.5) + 0.5 * (0.0 + 0.5)) / (0.5 + 4.0 + 0.5)
                         + (2.0 * 1.0 + 0.5 * -0.4) / (0.5 + 2.0 + 0.5))
                + 0.81 * ((1.5 * (-1.0 + 0.9)) / (0.5 + 4.0 + 1.5)
                          + (0.5 * -0.6) / (0.5 + 4.0 + 0.5))),
    }
    for name, value in expected.items():
        assert est[name].value == pytest.approx(value, abs=1e-12), name
        # Three episodes of ESS 36 / 18.5 = 1.9: fewer than 30 effective observations.
        assert est[name].n == 3 and est[name].support == 1.0
        assert est[name].flags == ["interval_unreliable: n_eff=1.9"], name
    assert est["is"].ess == pytest.approx((0.5 + 4.0 + 1.5) ** 2 / (0.25 + 16.0 + 2.25))


def test_weighted_equals_unweighted_when_all_weights_are_one():
    on_policy = [(e, t, r, pb, pb, q, v) for e, t, r, pb, _, q, v in STEPS]
    est = family(make_batch(on_policy))
    mean_return = (1.0 + 1.8 + 0.19) / 3
    for name in ("is", "pdis", "wis", "pdwis"):
        assert est[name].value == pytest.approx(mean_return, abs=1e-12), name
    assert est["dr"].value == pytest.approx(est["wdr"].value, abs=1e-12)
    assert est["is"].ess == pytest.approx(3.0)


def test_missing_behaviour_probs_make_every_record_not_applicable():
    steps = [s if i != 3 else (*s[:3], np.nan, *s[4:]) for i, s in enumerate(STEPS)]
    records = list(family(make_batch(steps), support=0.8, unsupported=True).values())
    assert [e.estimator for e in records] == ["is", "pdis", "wis", "pdwis", "dr", "wdr"]
    for e in records:
        assert e.value is None and e.ci_low is None
        assert "not_applicable: behaviour log-probs missing" in e.flags
        assert UNSUPPORTED_ACTIONS in e.flags and e.support == 0.8
    json.dumps([e.to_dict() for e in records])


def test_dr_without_critic_is_not_applicable_others_run():
    est = family(make_batch(critic=False))
    assert est["dr"].value is None and est["wdr"].value is None
    assert est["is"].value is not None


def test_unsupported_actions_are_flagged_on_every_record():
    # the logged data look fine, yet the target puts 30% of its mass on unlogged actions
    for e in family(make_batch(), support=0.7, unsupported=True).values():
        assert UNSUPPORTED_ACTIONS in e.flags and LOW_SUPPORT in e.flags and e.support == 0.7
    for e in family(make_batch(), support=1.0, unsupported=True).values():
        assert UNSUPPORTED_ACTIONS in e.flags and LOW_SUPPORT not in e.flags


def test_self_normalised_luck_still_carries_the_unsupported_flag():
    # one-step bandit: the target plays a0 and a2 half each, both pay 1 (true value 1);
    # the behaviour logged a0 (pays 1) and a1 (pays 0) but never a2: support = 0.5
    steps = [(0, 0, 1.0, 0.5, 0.5, 0.0, 0.0), (1, 0, 0.0, 0.5, 0.0, 0.0, 0.0)]
    est = family(make_batch(steps), support=0.5, unsupported=True)
    assert est["wis"].value == pytest.approx(1.0)  # right by luck: a1's weight is 0
    assert est["is"].value == pytest.approx(0.5)
    for e in est.values():
        assert UNSUPPORTED_ACTIONS in e.flags and LOW_SUPPORT in e.flags and e.support == 0.5


def test_all_zero_weights_are_flagged():
    steps = [(i, 0, 1.0, 0.5, 0.0, 0.0, 0.0) for i in range(3)]
    est = family(make_batch(steps), n_boot=0)
    # ESS 0: no point value ("no estimate: ESS 0"), not a 0.0 that reads as an estimate
    for e in est.values():
        assert e.value is None and e.ci_low is None and e.ess == 0.0
        assert any(f.startswith("no estimate: ESS 0") for f in e.flags)


def test_low_ess_flag():
    steps = [(i, 0, 1.0, 0.5, 1.0 if i == 0 else 0.01, 0.0, 0.0) for i in range(20)]
    est = family(make_batch(steps), min_ess_fraction=0.5, value_range=(0.0, 1.0))
    assert LOW_ESS in est["is"].flags and est["is"].ess < 10
    # widened to the Hoeffding half-width with the ESS, kept inside the value's range
    assert est["is"].details["interval_widened"] == ["hoeffding_ess"]
    assert 0.0 <= est["is"].ci_low < est["is"].ci_high <= 1.0


# Deterministic toy: s0 --a--> s1 --a--> end. Rewards r(s0, 0) = 1, r(s0, 1) = 0,
# r(s1, 0) = 2, r(s1, 1) = -1. pi_b uniform; pi_e(s0) = (0.8, 0.2), pi_e(s1) = (0.3, 0.7).
PI_E = np.array([[0.8, 0.2], [0.3, 0.7]])
V1 = 0.3 * 2.0 + 0.7 * -1.0  # = -0.1
Q_TRUE = np.array([[1.0 + GAMMA * V1, 0.0 + GAMMA * V1], [2.0, -1.0]])
V0 = 0.8 * Q_TRUE[0, 0] + 0.2 * Q_TRUE[0, 1]


def toy_steps() -> dict[str, np.ndarray]:
    a0 = np.array([0, 0, 1, 1, 0, 1])  # six episodes, every action path, some twice
    a1 = np.array([0, 1, 0, 1, 1, 0])
    n = len(a0)
    return {
        "episode": np.repeat(np.arange(n), 2), "t": np.tile([0, 1], n),
        "s": np.tile([0, 1], n), "a": np.column_stack([a0, a1]).ravel(),
        "r": np.column_stack([1.0 - a0, np.where(a1 == 0, 2.0, -1.0)]).ravel(),
        "s_next": np.tile([1, -1], n), "done": np.tile([False, True], n),
    }


def toy_batch(q_table: np.ndarray, v_table: np.ndarray) -> EpisodeBatch:
    d = toy_steps()
    return EpisodeBatch.from_steps(
        d["episode"], d["t"], d["r"], np.full(len(d["s"]), 0.5), PI_E[d["s"], d["a"]],
        q_hat=q_table[d["s"], d["a"]], v_hat=v_table[d["s"]], gamma=GAMMA)


def test_dr_with_a_perfect_model_has_zero_variance():
    batch = toy_batch(Q_TRUE, np.sum(PI_E * Q_TRUE, axis=1))
    np.testing.assert_allclose(dr_contributions(batch), V0, atol=1e-12)
    est = family(batch)
    for name in ("dr", "wdr"):
        assert est[name].value == pytest.approx(V0, abs=1e-12)
        assert est[name].ci_high - est[name].ci_low == pytest.approx(0.0, abs=1e-12)


def one_hot_transitions(s, a, r, done, n_states, n_actions, episode=None, t=None):
    """Transitions over states 0..n_states-1 (one variable), steps in episode order."""
    s = np.asarray(s)
    episode = np.zeros(len(s), int) if episode is None else np.asarray(episode)
    t = np.arange(len(s)) if t is None else np.asarray(t)
    return Transitions.build(episode=episode, t=t, rows=s[:, None], a=np.asarray(a),
                             r=np.asarray(r, float), done=np.asarray(done),
                             actions=tuple(f"a{i}" for i in range(n_actions)),
                             variables=("s",))


def critic(tr, pi, gamma=GAMMA):
    features = OneHot((int(tr.rows.max()) + 1,), tr.n_actions)
    return Critic(features, gamma).fit(tr, pi[tr.rows[:, 0]])


def test_dr_with_fqe_critic_on_the_toy():
    d = toy_steps()
    tr = one_hot_transitions(d["s"], d["a"], d["r"], d["done"], 2, 2, d["episode"], d["t"])
    fqe = critic(tr, PI_E)
    np.testing.assert_allclose(fqe.q_, Q_TRUE, atol=1e-12)
    assert fqe.value_ == pytest.approx(V0, abs=1e-12)
    q_hat, v_hat = fqe.step_values()
    np.testing.assert_allclose(q_hat, Q_TRUE[d["s"], d["a"]], atol=1e-12)
    batch = EpisodeBatch.from_steps(d["episode"], d["t"], d["r"], np.full(12, 0.5),
                                    PI_E[d["s"], d["a"]], q_hat=q_hat, v_hat=v_hat,
                                    gamma=GAMMA)
    np.testing.assert_allclose(dr_contributions(batch), V0, atol=1e-12)


def test_bootstrap_is_deterministic_and_contains_the_value():
    rng = np.random.default_rng(3)
    contributions = rng.normal(1.0, 1.0, size=200)
    runs = [Estimate.from_contributions("importance", "is", contributions, support=1.0,
                                        seed=7, n_boot=500) for _ in range(2)]
    assert runs[0].to_dict() == runs[1].to_dict()
    e = runs[0]
    assert e.value == pytest.approx(np.mean(contributions), abs=1e-12)
    assert e.ci_low < e.value < e.ci_high and e.ci_level == 0.95
    other = Estimate.from_contributions("importance", "is", contributions, support=1.0,
                                        seed=8, n_boot=500)
    assert (other.ci_low, other.ci_high) != (e.ci_low, e.ci_high)


def test_ratio_bootstrap_recomputes_the_ratio_per_resample():
    num, den = wis_contributions(make_batch())
    e = Estimate.from_contributions("importance", "wis", num, support=1.0, seed=11,
                                    n_boot=300, ratio_denominators=den)
    idx = np.random.default_rng(11).integers(0, 3, size=(300, 3))  # the same draws
    values = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    lo, hi = np.quantile(values, [0.025, 0.975])
    assert (e.ci_low, e.ci_high) == pytest.approx((lo, hi), abs=1e-12)


def test_bootstrap_draws_do_not_depend_on_chunking(monkeypatch):
    cols = np.random.default_rng(0).normal(size=(50, 3))
    whole = bootstrap_sums(cols, n_boot=40, seed=5)
    monkeypatch.setattr(estimate_module, "BOOT_CHUNK_BYTES", 8 * 50 * 3)  # 3 resamples a chunk
    np.testing.assert_allclose(bootstrap_sums(cols, n_boot=40, seed=5), whole, rtol=1e-12)


@pytest.mark.parametrize("multiplicity", [None, "counts"])
def test_per_step_ratios_beyond_the_budget_are_resampled_linearised(monkeypatch, multiplicity):
    # PDWIS-like per-step ratios over 4,000 episodes: the exact ratio recomputed per resample
    # and the linearised terms give the same value and, at this size, the same interval.
    rng = np.random.default_rng(3)
    den = rng.lognormal(0.0, 0.5, size=(4000, 6))
    num = den * rng.normal(1.0, 1.0, size=(4000, 6))
    weights = None if multiplicity is None else rng.integers(1, 4, size=4000).astype(float)

    def estimate():
        return Estimate.from_contributions("importance", "pdwis", num, support=1.0, seed=2,
                                           n_boot=400, ratio_denominators=den,
                                           multiplicity=weights)

    exact = estimate()
    monkeypatch.setattr(estimate_module, "EXACT_RATIO_BUDGET", 0)
    linear = estimate()
    assert "ratio_bootstrap" not in exact.details
    assert linear.details["ratio_bootstrap"].startswith("linearised")
    assert linear.value == pytest.approx(exact.value, abs=1e-12)
    width = exact.ci_high - exact.ci_low
    assert abs(linear.ci_low - exact.ci_low) < 0.05 * width
    assert abs(linear.ci_high - exact.ci_high) < 0.05 * width


def test_family_bootstrapped_together_equals_one_at_a_time():
    batch = make_batch()
    est = family(batch, n_boot=300, seed=4)
    alone = Estimate.from_contributions("importance", "wis", wis_contributions(batch)[0],
                                        ratio_denominators=wis_contributions(batch)[1],
                                        support=1.0, seed=4, n_boot=300)
    assert (est["wis"].ci_low, est["wis"].ci_high) == pytest.approx(
        (alone.ci_low, alone.ci_high), abs=1e-12)


def test_flag_disagreements_and_to_dict():
    a = Estimate("importance", "wis", 1.0, 0.9, 1.1, 0.95, 1.0, 10)
    b = Estimate("critic", "fqe", 2.0, 1.8, 2.2, 0.95, 1.0, 10)
    c = Estimate("importance", "is", 1.5, 0.95, 2.0, 0.95, 1.0, 10)
    na = Estimate.not_applicable("replay", "sandbox", "no fixtures")
    flag_disagreements([a, b, c, na])
    assert a.flags == ["disagrees_with:critic/fqe"]
    assert b.flags == ["disagrees_with:importance/wis"]
    assert c.flags == [] and na.flags == ["not_applicable: no fixtures"]
    d = na.to_dict()
    assert d["value"] is None and d["support"] is None  # NaN support becomes null
    assert list(d) == ["layer", "estimator", "value", "ci_low", "ci_high", "ci_level",
                       "support", "n", "ess", "flags", "details"]
    json.dumps(b.to_dict())


# FQE on s0 --(a0, r=1)--> s1 --(r, done). Closed forms with gamma = 0.9.
def test_fqe_two_state_chain_closed_form():
    tr = one_hot_transitions([0, 1], [0, 0], [1.0, 2.0], [False, True], 2, 2)
    fqe = critic(tr, np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert fqe.q_[1, 0] == pytest.approx(2.0, abs=1e-12)
    assert fqe.q_[0, 0] == pytest.approx(1.0 + 0.9 * 2.0, abs=1e-12)
    assert fqe.value_ == pytest.approx(2.8, abs=1e-12)
    assert fqe.converged_ and fqe.share_on_logged() == 1.0


def test_fqe_uses_the_target_expectation_not_the_max():
    # at s1 both actions are logged: a0 pays 2, a1 pays 0; pi_e(s1) = (0.25, 0.75)
    tr = one_hot_transitions([0, 1, 1, 1], [0, 0, 1, 0], [1.0, 2.0, 0.0, 2.0],
                             [False, True, True, True], 2, 2, [0, 0, 1, 2], [0, 1, 0, 0])
    fqe = critic(tr, np.array([[1.0, 0.0], [0.25, 0.75]]))
    assert fqe.v_[1] == pytest.approx(0.25 * 2.0 + 0.75 * 0.0, abs=1e-12)
    assert fqe.q_[0, 0] == pytest.approx(1.0 + 0.9 * 0.5, abs=1e-12)  # the max gives 2.8


def test_fqe_and_the_support_with_an_unlogged_action():
    tr = one_hot_transitions([0, 1], [0, 0], [1.0, 2.0], [False, True], 2, 2)
    pi = np.array([[1.0, 0.0], [0.4, 0.6]])  # the target takes unlogged (s1, a1) 60%
    fqe = critic(tr, pi)
    np.testing.assert_array_equal(fqe.counts_ > 0, [[True, False], [True, False]])
    assert fqe.q_[1, 1] == 0.0  # no data: kept at 0, and reported below
    assert fqe.share_on_logged() == pytest.approx((1.0 + 0.4) / 2)
    assert fqe.value_ == pytest.approx(1.0 + 0.9 * (0.4 * 2.0), abs=1e-12)
    # One notion of support: the target's episodes that stay on covered pairs, 1 x 0.4.
    frequencies = np.array([[1.0, 0.0], [1.0, 0.0]])
    cover = (frequencies > 0) & (frequencies >= 0.05 * pi)
    features = OneHot((2,), 2)
    assert episode_support(tr, pi, cover, features) == pytest.approx(0.4)


def test_bootstrap_on_repeated_rows_resamples_like_drawing_rows():
    """Many identical episodes take the distinct-row path; its resampled sums must have
    the mean n·mean and the spread sqrt(n)·sd of drawing n rows with replacement."""
    rng = np.random.default_rng(5)
    distinct = rng.normal(size=(30, 2))
    columns = distinct[rng.integers(0, 30, size=20_000)]
    sums = bootstrap_sums(columns, n_boot=4000, seed=9)
    n = len(columns)
    expected_mean = n * columns.mean(axis=0)
    expected_sd = np.sqrt(n) * columns.std(axis=0)
    assert np.allclose(sums.mean(axis=0), expected_mean, atol=4 * expected_sd / np.sqrt(4000))
    assert np.allclose(sums.std(axis=0), expected_sd, rtol=0.05)
    assert np.array_equal(sums, bootstrap_sums(columns, n_boot=4000, seed=9))


def test_pareto_khat_recovers_the_tail_index_of_pareto_weights():
    from tracerl.ope.importance import pareto_khat

    rng = np.random.default_rng(0)
    for k in (0.2, 0.5, 1.2):  # generalized Pareto draws with shape k
        x = (rng.random(4000) ** -k - 1.0) / k
        assert pareto_khat(x) == pytest.approx(k, abs=0.15)
    assert pareto_khat(np.ones(100)) is None  # bounded weights: no tail
    assert pareto_khat(rng.random(1000)) < 0
