"""Every registry of names params may use, with the built-in (generic) items.

Built-in items are declared by reference (imported when a stage first looks one up), so
checking a params file imports no implementation. A name not declared here is looked up in
the fixture it names (`calculator_critic` -> the calculator fixture's featurizers): see
`tracerl.config.fixtures`. The fixtures themselves: `tracerl.config.fixtures.FIXTURES`.
"""

from __future__ import annotations

from typing import Any

from tracerl.config.fixtures import fixture_fallback, instance
from tracerl.config.registry import Ref, Registry

# Tabular featurizers: a step -> discrete state and action keys (coverage, tabular learners).
FEATURIZERS: Registry[type] = Registry("featurizer", {
    "tool_signature": Ref("tracerl.features:ToolSignatureFeaturizer"),
    "dialogue": Ref("tracerl.features:DialogueFeaturizer"),
}, use="featurizers", **fixture_fallback("featurizers"))

# Step encoders: a step table -> integer state rows (feature-based learners and OPE).
ENCODERS: Registry[type] = Registry("step encoder", {
    "dialogue": Ref("tracerl.fa_encoders:DialogueStepEncoder"),
}, use="encoders", **fixture_fallback("encoders"))

# Versioned verifiers (`name@version`): one reward component each (relabel, OPE's verifier
# layer). A class declared here is instantiated with its defaults.
VERIFIERS: Registry[Any] = Registry("verifier", {
    "format_valid@1": Ref("tracerl.data.verifiers:FormatValid"),
    "tool_error_penalty@1": Ref("tracerl.data.verifiers:ToolErrorPenalty"),
    "cost_penalty@1": Ref("tracerl.data.verifiers:CostPenalty"),
    "tau2_action_match@1": Ref("tracerl.data.verifiers:Tau2ActionMatch"),
    "tau2_outcome@1": Ref("tracerl.data.verifiers:Tau2Outcome"),
}, use="verifiers", build=instance, **fixture_fallback("verifiers"))
