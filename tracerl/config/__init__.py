"""The params model (typed sections, defaults, messages) and reading params files."""
