"""The support desk's ten OPE candidates (benchmarks and tests): scripted variants with
known support, and the learners fitted on a log (BC, naive FQI, support-constrained FQI)."""

from __future__ import annotations

from tracerl.config.learning import MIN_BEHAVIOR_PROB
from tracerl.envs.support_desk.features import critic_features, policy_features
from tracerl.envs.support_desk.sim import SCRIPT, EscalateOnError, ScriptedPolicy
from tracerl.rl.bc import LogisticBC
from tracerl.rl.fqi import FittedQIteration
from tracerl.rl.policy import MixturePolicy
from tracerl.rl.transitions import Transitions


def behavior_model(tr: Transitions, *, max_rows: int | None = 300_000,
                   seed: int = 0) -> LogisticBC:
    """pi_hat_b: logistic BC on (a seeded sample of at most max_rows of) the log."""
    return LogisticBC(policy_features(), max_rows=max_rows, seed=seed).fit(tr)


def make_candidates(tr: Transitions, behavior: ScriptedPolicy, pi_hat_b: LogisticBC, *,
                    gamma: float, min_behavior_prob: float = MIN_BEHAVIOR_PROB,
                    epsilon: float = 0.1, fqi_iterations: int = 60,
                    seed: int = 0) -> dict[str, object]:
    """name -> policy with action_probs(states). `escalate_on_error` and (usually)
    `naive_fqi` put mass on actions the log never shows."""
    fqi = FittedQIteration(critic_features(), gamma=gamma, n_iterations=fqi_iterations,
                           alpha=1e-3, epsilon=epsilon, seed=seed).fit(tr)
    cfqi = FittedQIteration(critic_features(), gamma=gamma, n_iterations=fqi_iterations,
                            alpha=1e-3, support="behavior", behavior_model=pi_hat_b,
                            min_behavior_prob=min_behavior_prob, epsilon=epsilon,
                            seed=seed).fit(tr)
    return {
        "behavior": behavior,
        "bc": pi_hat_b,
        "no_skip_check": ScriptedPolicy(p_script=behavior.p_script, p_skip_check=0.0),
        "more_scripted": ScriptedPolicy(p_script=0.6, p_skip_check=behavior.p_skip_check),
        "mix_script_25": MixturePolicy((behavior, SCRIPT), (0.75, 0.25)),
        "mix_script_50": MixturePolicy((behavior, SCRIPT), (0.5, 0.5)),
        "naive_fqi": fqi,
        "constrained_fqi": cfqi,
        "mix_cfqi_50": MixturePolicy((behavior, cfqi), (0.5, 0.5)),
        "escalate_on_error": EscalateOnError(behavior, 0.5),
    }


def fixed_candidate(name: str, p_script: float = 0.4, p_skip_check: float = 0.3) -> object:
    """One of the candidates whose truth needs no training run, by name, around the logger
    ScriptedPolicy(p_script, p_skip_check): an import-path factory for external candidates
    (``tracerl.envs.support_desk.candidates:fixed_candidate``, params
    ``ope.candidates.external``). `escalate_on_error` puts mass on an action the logger
    never takes."""
    behavior = ScriptedPolicy(p_script=p_script, p_skip_check=p_skip_check)
    made = {
        "behavior": lambda: behavior,
        "no_skip_check": lambda: ScriptedPolicy(p_script=p_script, p_skip_check=0.0),
        "more_scripted": lambda: ScriptedPolicy(p_script=0.6, p_skip_check=p_skip_check),
        "mix_script_25": lambda: MixturePolicy((behavior, SCRIPT), (0.75, 0.25)),
        "mix_script_50": lambda: MixturePolicy((behavior, SCRIPT), (0.5, 0.5)),
        "escalate_on_error": lambda: EscalateOnError(behavior, 0.5),
    }
    if name not in made:
        raise ValueError(f"unknown support desk candidate {name!r}; known: {', '.join(made)}")
    return made[name]()
