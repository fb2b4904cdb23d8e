"""Fixtures: environments with a simulator. Importing this package registers what each
fixture brings (featurizers, verifiers) into the generic registries, which never import a
fixture themselves; flows and tasks import it and pick by params."""

from tracerl.envs import (  # noqa: F401  (importing registers them)
    calculator_features,
    calculator_table,
    calculator_verifiers,
)
