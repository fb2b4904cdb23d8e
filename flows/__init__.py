"""Prefect flows: one per pipeline stage (see dvc.yaml)."""
