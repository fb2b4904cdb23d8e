"""Fixtures: environments with a simulator. Importing this package registers what each
fixture brings (featurizers, step encoders, verifiers, the fixture entry with its replay
adapter, behaviour policy and truth) into the generic registries, which never import a
fixture themselves; flows and tasks import it and pick by params."""

from tracerl.envs.calculator import encoder, fixture, table, verifiers  # noqa: F401  (importing registers them)
from tracerl.envs.support_desk import registry  # noqa: F401  (importing registers it)
