"""The test suite; run it from the repository root with `python -m pytest`.

Folders mirror the packages: `protocol/`, `core/`, `middleware/`, `state/`, `realtime/`,
`db/`, `server/` (the IO layer), `workers/`, `tools/` (cli, testing, systemd units); tests of
a top-level module sit at the top (`test_config.py` for `socketify/config.py`).
`integration/` runs the real `socketify run` end to end, `examples/` the shipped examples,
`faults/` the fault experiments of `load_tests/`. Shared helpers live in `support/`.
"""
