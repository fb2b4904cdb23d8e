"""Off-policy evaluation: every layer returns the same `Estimate` record
(`tracerl.ope.estimate`); `tracerl.ope.evaluate` runs them for any candidate.

Importing this package imports none of its modules."""
