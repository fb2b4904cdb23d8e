"""Environments with a simulator (fixtures): the calculator."""
