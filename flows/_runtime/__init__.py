"""The Prefect runtime a stage runs on: the local server, its watchdog, the worker, the
task runner, and the UI check."""
