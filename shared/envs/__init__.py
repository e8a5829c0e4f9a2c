"""Environments as every service builds them (`build.make_env`): the env section's wrappers, gymnasium's spaces
as rlfleet's, env seeds, and the two-player games with their self-play opponents.

One package, so collectors, the evaluator and the preflight build the same env from the same section. Only its
modules import gymnasium, each when it needs it; this package itself imports nothing.
"""
