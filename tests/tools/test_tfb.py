"""The TechEmpower test types of load_tests/tfb: our app passes the verifier, both variants.

A small copy of the tables (600 worlds, the twelve fortunes) is seeded in a schema of this
module's own on the machine's PostgreSQL; `socketify run load_tests.tfb.app:server` serves it
and the verifier checks every test type as TechEmpower's would. The peers are not run here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from load_tests.tfb.spec import MAX_QUERIES, queries_count
from load_tests.tfb.verify import DATABASE_TESTS, TEST_TYPES, Target, verify
from tests.support.serve import Launcher, ServerProcess
from tests.support.services import require_module, require_service

PG = ("127.0.0.1", 5432)
WORLD_ROWS = 600  # enough for `queries=500`, small enough to seed in a blink


@pytest.fixture(scope="module")
def tfb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_service("PostgreSQL", *PG)
    require_module("psycopg2", "pip install psycopg2-binary")
    require_module("jinja2", "pip install jinja2")
    from load_tests.tfb import schema

    name = f"tfb_test_{uuid.uuid4().hex[:12]}"
    url = f"postgres://postgres@{PG[0]}:{PG[1]}/test?schema={name}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TFB_DATABASE_URL", url)  # the verifier reads the tables here too
        schema.seed(world_rows=WORLD_ROWS)
        try:
            with Launcher(tmp_path_factory.mktemp("tfb")) as launcher:
                yield launcher(
                    "load_tests.tfb.app:server",
                    env={"TFB_DATABASE_URL": url, "TFB_WORLD_ROWS": str(WORLD_ROWS)},
                )
        finally:
            schema.drop()


def test_pony_variant_answers_every_test_type_as_techempower_requires(
    tfb_server: ServerProcess,
) -> None:
    assert verify(Target("ours-pony", tfb_server.url), TEST_TYPES) == []


def test_raw_variant_answers_the_database_test_types_as_techempower_requires(
    tfb_server: ServerProcess,
) -> None:
    assert verify(Target("ours-raw", tfb_server.url, "/raw"), DATABASE_TESTS, date=False) == []


def test_verifier_reports_a_missing_implementation(tfb_server: ServerProcess) -> None:
    problems = verify(Target("nowhere", tfb_server.url, "/nowhere"), ("json",), date=False)
    assert any("status 404" in problem for problem in problems)


@pytest.mark.parametrize(
    ("value", "count"),
    [("2", 2), ("0", 1), ("-3", 1), ("foo", 1), ("", 1), (None, 1), ("501", MAX_QUERIES)],
)
def test_queries_parameter_is_clamped_and_defaults_to_one(value: str | None, count: int) -> None:
    assert queries_count(value) == count
