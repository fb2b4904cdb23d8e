"""Prefect tasks: thin wrappers over the tracerl library."""
