"""The support desk's ten OPE candidates: scripted variants with known support, and the
FA learners fitted on the log (BC, naive FQI, support-constrained FQI)."""

from __future__ import annotations

from tracerl.envs.support_desk.features import critic_featurizer, policy_featurizer
from tracerl.envs.support_desk.sim import SCRIPT, EscalateOnError, MixturePolicy, ScriptedPolicy
from tracerl.ope.fa_data import FATransitions
from tracerl.policies.sklearn_policies import FittedQRegressor, LogisticBC


def behavior_model(tr: FATransitions, *, max_rows: int | None = 300_000,
                   seed: int = 0) -> LogisticBC:
    """pi_hat_b: logistic BC on (a seeded sample of at most max_rows of) the log."""
    return LogisticBC(policy_featurizer(), max_rows=max_rows, seed=seed).fit(tr)


def make_candidates(tr: FATransitions, behavior: ScriptedPolicy, pi_hat_b: LogisticBC, *,
                    gamma: float, min_behavior_prob: float = 0.01, epsilon: float = 0.1,
                    fqi_iterations: int = 60, seed: int = 0) -> dict[str, object]:
    """name -> policy with action_probs(states). `escalate_on_error` and (usually)
    `fqi_naive` put mass on actions the log never shows."""
    fqi = FittedQRegressor(critic_featurizer(), gamma=gamma, n_iterations=fqi_iterations,
                           epsilon=epsilon, seed=seed).fit(tr)
    cfqi = FittedQRegressor(critic_featurizer(), gamma=gamma, n_iterations=fqi_iterations,
                            support="behavior", behavior_model=pi_hat_b,
                            min_behavior_prob=min_behavior_prob, epsilon=epsilon,
                            seed=seed).fit(tr)
    return {
        "behavior": behavior,
        "bc": pi_hat_b,
        "no_skip_check": ScriptedPolicy(p_script=behavior.p_script, p_skip_check=0.0),
        "more_scripted": ScriptedPolicy(p_script=0.6, p_skip_check=behavior.p_skip_check),
        "mix_script_25": MixturePolicy((behavior, SCRIPT), (0.75, 0.25)),
        "mix_script_50": MixturePolicy((behavior, SCRIPT), (0.5, 0.5)),
        "fqi_naive": fqi,
        "fqi_constrained": cfqi,
        "mix_cfqi_50": MixturePolicy((behavior, cfqi), (0.5, 0.5)),
        "escalate_on_error": EscalateOnError(behavior, 0.5),
    }
