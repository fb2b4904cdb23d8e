"""Every registry of names params may use, with the built-in (generic) items.

Built-in items are declared by reference (imported when a stage first looks one up), so
checking a params file imports no implementation. A name not declared here is looked up in
the fixture it names (`support_desk` -> the support desk fixture's encoders): see
`tracerl.config.fixtures`. The fixtures themselves: `tracerl.config.fixtures.FIXTURES`.
"""

from __future__ import annotations

from typing import Any

from tracerl.config.fixtures import fixture_fallback, instance
from tracerl.config.registry import Ref, Registry

# State encoders: a step table -> integer state rows (tracerl.rl.encoding: the learners,
# OPE and coverage).
ENCODERS: Registry[type] = Registry("state encoder", {
    "dialogue": Ref("tracerl.rl.encoding:DialogueEncoder"),
}, use="encoders", **fixture_fallback("encoders"))

# Versioned verifiers (`name@version`): one reward component each (relabel, OPE's verifier
# layer). A class declared here is instantiated with its defaults.
VERIFIERS: Registry[Any] = Registry("verifier", {
    "format_valid@1": Ref("tracerl.data.verifiers:FormatValid"),
    "tool_error_penalty@1": Ref("tracerl.data.verifiers:ToolErrorPenalty"),
    "cost_penalty@1": Ref("tracerl.data.verifiers:CostPenalty"),
    "tau2_action_match@1": Ref("tracerl.data.verifiers:Tau2ActionMatch"),
    "tau2_outcome@1": Ref("tracerl.data.verifiers:Tau2Outcome"),
    "command_exit_status@1": Ref("tracerl.data.verifiers:CommandExitStatus"),
    "user_feedback@1": Ref("tracerl.data.verifiers:UserFeedback"),
}, use="verifiers", build=instance, plugin=Ref("tracerl.data.verifiers:from_plugin"),
   **fixture_fallback("verifiers"))
