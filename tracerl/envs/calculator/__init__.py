"""The calculator agent of the book chapter: environment, behaviour, simulator, exact
truth, logs, featurizers, replay, verifiers and the chapter table."""
