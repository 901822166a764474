"""TechEmpower's six test types, ours and the peers', verified and measured side by side.

    python -m load_tests.tfb setup        # create and seed `world` and `fortune`
    python -m load_tests.tfb verify       # check every implementation's answers
    python -m load_tests.tfb bench        # verify, measure, print one table, draw one chart

See `load_tests/tfb/__main__.py` for the options and `spec.py` for the rules every
implementation follows.
"""
