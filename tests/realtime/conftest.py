"""One `socketify run tests.realtime.realtime_app:server --workers 2`, shared by the folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.serve import Launcher, ServerProcess


@pytest.fixture(scope="package")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The realtime app on two workers, so hubs must cross processes to pass the tests."""
    with Launcher(tmp_path_factory.mktemp("realtime")) as launcher:
        yield launcher("tests.realtime.realtime_app:server", workers=2)
