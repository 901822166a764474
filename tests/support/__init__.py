"""Helpers shared by the test folders: import them as `tests.support.<module>`."""
