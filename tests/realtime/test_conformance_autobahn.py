"""A sample of the Autobahn|Testsuite fuzzing client against our echo app, as a user runs it.

`python load_tests/autobahn.py --quick` starts `socketify run load_tests.apps.ws_echo:server`,
runs ~140 cases from groups 1-7, 10, 12 and 13 (compression on) and exits non-zero if any
case is not OK, NON-STRICT or INFORMATIONAL. It needs `wstest`, which runs on Python 2.7
only (`python load_tests/autobahn.py --setup` installs it into load_tests/.peers/); without
it this test is skipped and `test_conformance_raw.py`, which needs nothing outside the
project, checks the same rules over raw sockets. The full set: `python load_tests/autobahn.py`.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.serve import REPO

SCRIPT = REPO / "load_tests" / "autobahn.py"
WSTEST = REPO / "load_tests" / ".peers" / "autobahn" / "bin" / "wstest"


@pytest.mark.skipif(
    not WSTEST.exists(),
    reason="wstest (Python 2.7) not installed: python load_tests/autobahn.py --setup; "
    "test_conformance_raw.py covers the same groups without it",
)
@pytest.mark.timeout(110)
def test_autobahn_quick_sample_has_no_failed_case() -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--no-save", "--timeout", "100"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=105,
    )
    report = completed.stdout + completed.stderr
    assert completed.returncode == 0, report
    assert "FAILED" not in report and "UNIMPLEMENTED" not in report, report
    assert " cases in " in report, report  # the summary table was printed
