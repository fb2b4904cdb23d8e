"""OPE that stays honest at small samples: widened intervals, one support, replay bounds,
cross-fitted DR, and a selection that skips every flagged candidate."""

from __future__ import annotations

import numpy as np
import pytest

from tests.calculator_ope import POLICY_FEATURES, prepared, settings, steps_of
from tracerl.envs.calculator.behavior import BehaviorPolicy, scripted_optimal_policy
from tracerl.envs.calculator.exact import exact_value
from tracerl.ope.estimate import Estimate
from tracerl.ope.evaluate import evaluate_policy
from tracerl.ope.select import select
from tracerl.rl.bellman import BellmanBackup, evaluate
from tracerl.rl.policy import MixturePolicy

_steps = steps_of
# Calculator returns from any step lie in [-1.049, 0.98] (params.yaml ope.return_range).
RANGE = (-1.05, 0.98)


def honest(n: int, **ope):
    return settings(n, **{"return_range": RANGE, "n_boot": 500, **ope})


def _by_estimator(estimates: list[Estimate]) -> dict[str, Estimate]:
    return {e.estimator: e for e in estimates}


def _unreliable(e: Estimate) -> bool:
    return any(f.startswith("interval_unreliable: n_eff=") for f in e.flags)


def test_zero_variance_contributions_get_a_non_zero_width_from_the_prior_atom():
    # 40 identical episodes: the bootstrap alone says [0.5, 0.5].
    plain = Estimate.from_contributions("x", "mean", np.full(40, 0.5), support=1.0, seed=0,
                                        n_boot=400)
    assert plain.ci_low == plain.ci_high == 0.5
    widened = Estimate.from_contributions("x", "mean", np.full(40, 0.5), support=1.0, seed=0,
                                          n_boot=400, value_range=(0.0, 1.0))
    # One unseen episode among 41 at the worst / best value: share Beta(1, 40), whose
    # 97.5% quantile is 1 - 0.025^(1/40) = 0.088, so each end moves by about 0.5 * 0.088.
    assert widened.ci_low == pytest.approx(0.5 - 0.5 * (1 - 0.025 ** (1 / 40)), abs=0.01)
    assert widened.ci_high == pytest.approx(0.5 + 0.5 * (1 - 0.025 ** (1 / 40)), abs=0.01)
    assert widened.details["bootstrap_interval"] == [0.5, 0.5]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_critic_on_a_rare_unseen_branch_is_flagged_and_widened_and_covers(seed):
    """At 300 episodes the branch x = y = 2 (the wrong op gives the right answer) is
    usually absent: the critic's refits all agree, yet the truth lies off them."""
    steps = _steps("good_coverage", 300, seed)
    s = honest(300, layers=["critic", "importance"])
    mixture = MixturePolicy([BehaviorPolicy("good_coverage"), scripted_optimal_policy()],
                            [0.5, 0.5])
    truth = exact_value(mixture)["return"]
    est = _by_estimator(evaluate_policy(prepared(steps, s, replay=False), mixture, s,
                                        seed=seed))
    fqe = est["fqe"]
    assert _unreliable(fqe), fqe.flags
    assert fqe.details["n_eff"] < 30
    assert fqe.ci_high - fqe.ci_low > 0.01
    assert fqe.ci_low <= truth <= fqe.ci_high
    for name in ("dr", "wdr"):  # the DR family is widened by the same prior: never 0 wide
        assert est[name].ci_high - est[name].ci_low > 1e-3
        assert est[name].ci_low <= truth <= est[name].ci_high


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_replay_counts_what_it_cannot_replay_as_bounds_that_contain_the_truth(seed):
    # no_mul_support never recorded mul(x, y): the optimal policy's mul episodes stop there.
    steps = _steps("no_mul_support", 300, seed)
    s = honest(300)
    optimal = scripted_optimal_policy()
    truth = exact_value(optimal)
    est = _by_estimator(evaluate_policy(prepared(steps, s), optimal, s, seed=seed))
    replay, verifier = est["return"], est["success"]
    share = replay.details["replayed_share"]
    assert share == pytest.approx(2 / 3, abs=0.1)
    for e, t in ((replay, truth["return"]), (verifier, truth["success"])):
        assert e.value is None  # replayed share < min_support: bounds only, no survivor mean
        assert e.ci_low <= t <= e.ci_high, (e.estimator, e.ci_low, t, e.ci_high)
        assert "low_support" in e.flags and "unsupported_actions" in e.flags
    # The bounds count the unreplayed third at the worst return: the lower end is far
    # below the survivors' mean (which is the truth here: 0.8915 on every replayed task).
    assert replay.ci_low < truth["return"] - 0.5 * (1 - share)
    # One notion of support: replay's record carries the critic's and IS's support.
    assert replay.support == pytest.approx(est["fqe"].support) == pytest.approx(est["wis"].support)
    assert replay.support == pytest.approx(2 / 3, abs=0.1)


@pytest.mark.parametrize("seed", [7, 8])
def test_replay_of_a_stochastic_target_at_300_episodes_brackets_the_truth(seed):
    """The behaviour policy's rare ops (op(x, y) never recorded) cannot all be replayed;
    the survivors answer right more often than the target does."""
    steps = _steps("good_coverage", 300, seed)
    s = honest(300)
    behaviour = BehaviorPolicy("good_coverage")
    truth = exact_value(behaviour)["return"]
    replay = _by_estimator(evaluate_policy(prepared(steps, s), behaviour, s,
                                           seed=seed))["return"]
    assert replay.details["replayed_share"] < 0.95 and replay.value is None
    assert replay.ci_low <= truth <= replay.ci_high
    assert replay.support == 1.0  # every (state, action) was logged: only calls are missing


def test_dr_disagrees_with_a_deliberately_wrong_critic():
    """A critic on the policy's coarse state (right and wrong results mixed, in the
    behaviour's proportions) undervalues the optimal policy; cross-fitted DR, corrected by
    the logged propensities, stays on the truth, and the disagreement is flagged."""
    steps = _steps("good_coverage", 1000, seed=2)
    s = honest(1000, layers=["critic", "importance"])
    optimal = scripted_optimal_policy()
    truth = exact_value(optimal)["return"]
    data = prepared(steps, s, features=POLICY_FEATURES, replay=False)
    est = _by_estimator(evaluate_policy(data, optimal, s, seed=0))
    assert est["fqe"].value < truth - 0.1  # the wrong critic
    for name in ("dr", "wdr"):
        assert est[name].value == pytest.approx(truth, abs=0.02)
        assert est[name].ci_low <= truth <= est[name].ci_high
        assert "disagrees_with:critic/fqe" in est[name].flags
    assert "disagrees_with:importance/dr" in est["fqe"].flags


def test_cross_fitted_dr_is_not_the_critic_again():
    # With the critic fitted on the same episodes, tabular DR equalled FQE to 1e-13 here.
    steps = _steps("good_coverage", 1000, seed=3)
    s = honest(1000, layers=["critic", "importance"], n_boot=1)
    target = MixturePolicy([BehaviorPolicy("good_coverage"), scripted_optimal_policy()],
                           [0.7, 0.3])
    est = _by_estimator(evaluate_policy(prepared(steps, s, replay=False), target, s, seed=0))
    assert abs(est["dr"].value - est["fqe"].value) > 1e-6
    assert est["dr"].details["critic"].startswith("cross-fitted: 2 folds")


def _record(policy: str, value: float | None, flags: list[str], support: float = 1.0,
            truth: float = 0.5, ci_high: float | None = None) -> dict:
    return {"dataset": "d", "layer": "critic", "estimator": "fqe", "policy": policy,
            "value": value, "support": support, "flags": flags, "truth": truth,
            "ci_high": ci_high}


def test_selection_skips_every_flagged_candidate_whatever_its_support():
    records = [
        _record("unsupported", 0.9, ["unsupported_actions"], support=0.99),
        _record("thin", 0.8, ["interval_unreliable: n_eff=11.0"]),
        _record("low", 0.7, ["unsupported_actions", "low_support"], support=0.6),
        _record("bounds_only", None, ["unreplayed_calls: replayed_share=0.80"], ci_high=0.95),
        _record("clean", 0.6, ["disagrees_with:importance/dr"], truth=0.6),
        _record("worse", 0.4, [], truth=0.4),
    ]
    (row,) = select(records, min_support=0.95)
    assert row["pick"] == "clean"
    for name, why in (("unsupported", "unsupported_actions"), ("thin", "interval_unreliable"),
                      ("low", "low_support"), ("bounds_only", "no point estimate")):
        assert f"{name} " in row["note"] and why in row["note"], name
    assert "worse" not in row["note"]
    assert row["regret_at_1"] == pytest.approx(0.0)  # truth max 0.6 among all five


def test_selection_ranks_none_when_every_candidate_is_flagged():
    records = [_record("a", 0.9, ["interval_unreliable: n_eff=3.0"]),
               _record("b", 0.2, ["low_support"], support=0.5)]
    (row,) = select(records, min_support=0.95)
    assert row["pick"] is None and "none ranked first" in row["note"]


def test_one_bellman_backup_weighted_equals_repeated_transitions():
    rng = np.random.default_rng(0)
    n, n_s, n_a = 60, 4, 2
    s, a = rng.integers(0, n_s, n), rng.integers(0, n_a, n)
    r, s_next = rng.normal(size=n), rng.integers(-1, n_s, n)
    done = rng.random(n) < 0.3
    pi = rng.dirichlet(np.ones(n_a), size=n_s)
    counts = rng.integers(0, 4, n)
    rows = np.repeat(np.arange(n), counts)
    weighted, _, _ = evaluate(BellmanBackup(s, a, r, s_next, done, n_s, n_a, 0.8,
                                            weights=counts[None, :].astype(float)), pi, 200)
    repeated, _, _ = evaluate(BellmanBackup(s[rows], a[rows], r[rows], s_next[rows],
                                            done[rows], n_s, n_a, 0.8), pi, 200)
    np.testing.assert_allclose(weighted[0], repeated, atol=1e-12)


def test_an_estimate_outside_the_value_range_is_projected_flagged_and_never_picked():
    from tracerl.ope.intervals import widen

    # A critic extrapolating to 2.3 on a success rate: value and interval are kept in [0, 1].
    wild = Estimate(layer="critic", estimator="fqe", value=2.3, ci_low=0.4, ci_high=4.2,
                    ci_level=0.95, support=1.0, n=200)
    widen(wild, n_eff=None, value_range=(0.0, 1.0), min_ess_fraction=0.1, level=0.95)
    assert (wild.value, wild.ci_low, wild.ci_high) == (1.0, 0.4, 1.0)
    assert wild.details["unclipped_value"] == 2.3
    assert any(f.startswith("out_of_range") for f in wild.flags)
    sane = Estimate(layer="critic", estimator="fqe", value=0.6, ci_low=-0.2, ci_high=0.9,
                    ci_level=0.95, support=1.0, n=200)
    widen(sane, n_eff=None, value_range=(0.0, 1.0), min_ess_fraction=0.1, level=0.95)
    assert (sane.value, sane.ci_low, sane.ci_high, sane.flags) == (0.6, 0.0, 0.9, [])
    records = [{"dataset": "d", "policy": name, "layer": "critic", "estimator": "fqe",
                "value": e.value, "support": 1.0, "flags": e.flags, "truth": None}
               for name, e in (("wild", wild), ("sane", sane))]
    (row,) = select(records, min_support=0.5)
    assert row["pick"] == "sane"


def test_the_dr_correction_bounds_a_biased_linear_critic_by_the_decision_it_serves():
    """The coarse critic of the test above, on the linear path (delta interval): the
    cross-fitted DR correction measures its bias (about truth - critic, significant). Its
    bound is over 5% of the range but under the critic's gap to the logged value, so it
    cannot change the decision: the interval is widened by it (and covers the truth), not
    blocked."""
    steps = _steps("good_coverage", 1000, seed=2)
    s = honest(1000, layers=["critic", "importance"], critic={"interval": "delta"})
    optimal = scripted_optimal_policy()
    truth = exact_value(optimal)["return"]
    data = prepared(steps, s, features=POLICY_FEATURES, replay=False)
    fqe = _by_estimator(evaluate_policy(data, optimal, s, seed=0))["fqe"]
    credibility = fqe.details["credibility"]
    check = credibility["dr_correction"]
    assert check["checked"] and check["significant"]
    assert check["correction"] == pytest.approx(truth - fqe.value, abs=3 * check["se"] + 0.02)
    assert check["bias_bound"] >= abs(check["correction"]) + check["z"] * check["se"]
    width = RANGE[1] - RANGE[0]
    assert 0.05 * width < check["bias_bound"] < credibility["decision_gap"]
    assert credibility["decision_gap"] == pytest.approx(abs(fqe.value - data.logged_return))
    assert not any(f.startswith(("critic_biased", "uncorroborated")) for f in fqe.flags)
    assert "bias_bound" in fqe.details["interval_widened"]
    assert fqe.ci_low <= truth <= fqe.ci_high
    assert fqe.ci_low > data.logged_return  # still decisive: the bound cannot flip it


@pytest.mark.parametrize("seed", [4, 5])
def test_a_linear_critic_passes_the_dr_correction_or_is_widened_by_its_bound(seed):
    """The full one-hot critic on the linear path: its correction is recorded, small, and
    the interval is widened by its bound (rule bias_bound) whether or not it is significant
    (a test that does not reject "no bias" does not make the bias 0); the reported interval
    covers the exact value."""
    steps = _steps("good_coverage", 1000, seed=seed)
    s = honest(1000, layers=["critic", "importance"], critic={"interval": "delta"})
    target = MixturePolicy([BehaviorPolicy("good_coverage"), scripted_optimal_policy()],
                           [0.7, 0.3])
    truth = exact_value(target)["return"]
    fqe = _by_estimator(evaluate_policy(prepared(steps, s, replay=False), target, s,
                                        seed=0))["fqe"]
    check = fqe.details["credibility"]["dr_correction"]
    assert check["checked"] and not any(f.startswith("critic_biased") for f in fqe.flags)
    assert "bias_bound" in fqe.details["interval_widened"]
    assert fqe.details["credibility"]["bias_widening"] >= check["bias_bound"] > 0
    low, high = fqe.details["interval_unwidened"]
    assert fqe.ci_low == pytest.approx(low - fqe.details["credibility"]["bias_widening"])
    assert fqe.ci_high == pytest.approx(high + fqe.details["credibility"]["bias_widening"])
    assert fqe.ci_low <= truth <= fqe.ci_high
