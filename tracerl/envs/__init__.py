"""Fixtures: environments with a simulator, one package each (`tracerl/envs/<name>/`).

A package declares what its fixture brings in one `Fixture` (`FIXTURE` in its
`__init__.py`); a pipeline's params name the fixture (`fixture: <name>`) and the stages
load it by that name (`tracerl.config.fixtures.get_fixture`). Importing this package
loads none of them.
"""
