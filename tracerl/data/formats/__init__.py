"""Log formats, one package each (see each package's docstring for its shape and mapping)."""
