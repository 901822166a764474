"""config.Config: snapshots, .env dialect, precedence, typed getters, errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from socketify.config import Config, Error, parse_env


def write(tmp_path: Path, text: str | bytes, name: str = ".env") -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


# -- building -------------------------------------------------------------------------------


def test_from_env_takes_a_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOCKETIFY_TEST_SNAPSHOT", "before")
    config = Config.from_env()
    monkeypatch.setenv("SOCKETIFY_TEST_SNAPSHOT", "after")
    assert config.get("SOCKETIFY_TEST_SNAPSHOT") == "before"
    config.set("SOCKETIFY_TEST_SNAPSHOT", "mine")
    assert os.environ["SOCKETIFY_TEST_SNAPSHOT"] == "after"  # the environment is not touched


def test_from_env_accepts_an_explicit_mapping() -> None:
    assert Config.from_env({"A": "1"}).all() == {"A": "1"}


def test_from_file_reads_a_dotenv_file(tmp_path: Path) -> None:
    assert Config.from_file(write(tmp_path, "A=1\nB=two\n")).all() == {"A": "1", "B": "two"}


def test_missing_file_gives_an_empty_config(tmp_path: Path) -> None:
    assert Config.from_file(tmp_path / "nope.env").all() == {}
    assert Config({"A": "1"}).merge_file(tmp_path / "nope.env").all() == {"A": "1"}


def test_unreadable_env_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        Config.from_file(tmp_path)  # a directory


def test_merge_file_keeps_existing_keys_by_default(tmp_path: Path) -> None:
    path = write(tmp_path, "A=file\nB=file\n")
    config = Config({"A": "env"}).merge_file(path)
    assert config.all() == {"A": "env", "B": "file"}


def test_merge_file_with_overrides_lets_the_file_win(tmp_path: Path) -> None:
    path = write(tmp_path, "A=file\n")
    assert Config({"A": "env"}).merge_file(path, overrides=True).get("A") == "file"


def test_load_gives_the_environment_precedence_over_dotenv(tmp_path: Path) -> None:
    path = write(tmp_path, "PORT=8000\nDEBUG=1\n")
    config = Config.load(path, environ={"PORT": "9000"})
    assert config.get("PORT") == "9000"
    assert config.get("DEBUG") == "1"


def test_load_reads_dotenv_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "SOCKETIFY_TEST_CWD=yes\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SOCKETIFY_TEST_CWD", raising=False)
    assert Config.load().get("SOCKETIFY_TEST_CWD") == "yes"


def test_set_contains_and_all() -> None:
    config = Config().set("A", "1").set("EMPTY", "")
    assert config.contains("A") and "A" in config
    assert config.contains("EMPTY")
    assert not config.contains("B") and "B" not in config
    snapshot = config.all()
    snapshot["A"] = "changed"
    assert config.get("A") == "1"  # all() is a copy


def test_repr_shows_keys_but_not_values() -> None:
    text = repr(Config({"SECRET_KEY": "hunter2"}))
    assert "SECRET_KEY" in text and "hunter2" not in text


# -- .env syntax ----------------------------------------------------------------------------


def test_lf_and_crlf_lines() -> None:
    assert parse_env("A=1\r\nB=2\nC=3") == {"A": "1", "B": "2", "C": "3"}


def test_blank_and_comment_lines_are_skipped() -> None:
    assert parse_env("\n   \n# A=1\n  # B=2\nC=3\n") == {"C": "3"}


def test_leading_export_is_stripped() -> None:
    assert parse_env("export A=1\nexport   B = 2\n") == {"A": "1", "B": "2"}


def test_key_and_value_are_trimmed() -> None:
    assert parse_env("  KEY  =   some value  \t\n") == {"KEY": "some value"}


def test_unquoted_inline_comment_is_dropped() -> None:
    assert parse_env("A=value # a comment\nB=x#y\nC=#z\n") == {"A": "value", "B": "x#y", "C": "#z"}


def test_one_layer_of_matching_quotes_is_removed() -> None:
    text = 'A="double"\nB=\'single\'\nC="\'nested\'"\nD=""\nE="mismatch\'\nF="\nG=it\'s\n'
    assert parse_env(text) == {
        "A": "double",
        "B": "single",
        "C": "'nested'",
        "D": "",
        "E": "\"mismatch'",
        "F": '"',
        "G": "it's",
    }


def test_quoted_value_keeps_hash_and_spaces() -> None:
    assert parse_env("A=\"x # not a comment\"\nB='  padded  '\n") == {
        "A": "x # not a comment",
        "B": "  padded  ",
    }


def test_quoted_value_followed_by_a_comment_is_unquoted() -> None:
    assert parse_env('A="a b" # note\n') == {"A": "a b"}


def test_no_escape_sequences_multiline_values_or_expansion() -> None:
    text = 'A="line\\nbreak"\nB="first\nsecond"\nHOME_DIR=${HOME}/x\nC=\\t\n'
    assert parse_env(text) == {
        "A": "line\\nbreak",
        "B": '"first',  # the next line has no "=" and is skipped
        "HOME_DIR": "${HOME}/x",
        "C": "\\t",
    }


def test_lines_without_equals_or_with_empty_key_are_skipped() -> None:
    assert parse_env("JUSTAKEY\n=value\n  = x\nexport\nOK=1\n") == {"OK": "1"}


def test_value_may_contain_equals_and_be_empty() -> None:
    assert parse_env("URL=postgres://u:p@h/db?a=b\nEMPTY=\n") == {
        "URL": "postgres://u:p@h/db?a=b",
        "EMPTY": "",
    }


def test_later_duplicate_key_wins_within_a_file() -> None:
    assert parse_env("A=1\nA=2\n") == {"A": "2"}


def test_utf8_bom_does_not_become_part_of_the_first_key(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufeffA=1\nNAME=Zoë\n".encode())
    assert Config.from_file(path).all() == {"A": "1", "NAME": "Zoë"}


# -- typed getters --------------------------------------------------------------------------

VALUES = {
    "INT": "42",
    "NEG": "-7",
    "PLUS": "+3",
    "FLOAT": "2.5",
    "EXP": "1e3",
    "SPACE_INT": " 42",
    "TRAIL": "42abc",
    "UNDERSCORE": "1_000",
    "ARABIC": "\u0661\u0662",
    "HEX": "0x10",
    "EMPTY": "",
}
config = Config(VALUES)


def test_get_and_get_or() -> None:
    assert config.get("INT") == "42"
    assert config.get("NOPE") is None
    assert config.get_or("NOPE", "dflt") == "dflt"
    assert config.get_or("EMPTY", "dflt") == ""


@pytest.mark.parametrize(("key", "expected"), [("INT", 42), ("NEG", -7), ("PLUS", 3)])
def test_get_int_parses_whole_base10_strings(key: str, expected: int) -> None:
    assert config.get_int(key) == expected


@pytest.mark.parametrize(
    "key", ["FLOAT", "SPACE_INT", "TRAIL", "UNDERSCORE", "ARABIC", "HEX", "EMPTY", "NOPE"]
)
def test_get_int_refuses_anything_else(key: str) -> None:
    assert config.get_int(key) is None


@pytest.mark.parametrize(
    ("key", "expected"), [("INT", 42.0), ("FLOAT", 2.5), ("EXP", 1000.0), ("NEG", -7.0)]
)
def test_get_float_parses_whole_numbers(key: str, expected: float) -> None:
    assert config.get_float(key) == expected


@pytest.mark.parametrize("key", ["TRAIL", "SPACE_INT", "UNDERSCORE", "ARABIC", "EMPTY", "NOPE"])
def test_get_float_refuses_partial_numbers(key: str) -> None:
    assert config.get_float(key) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *((v, True) for v in ["1", "true", "TRUE", "Yes", "on", "ON"]),
        *((v, False) for v in ["0", "false", "False", "no", "NO", "off", ""]),
        *((v, None) for v in ["2", "y", "enabled", " true", "truthy"]),
    ],
)
def test_get_bool(value: str, expected: bool | None) -> None:
    assert Config({"B": value}).get_bool("B") is expected


def test_get_bool_of_missing_key_is_none() -> None:
    assert Config().get_bool("B") is None


def test_require_returns_or_raises_with_the_spec_message() -> None:
    assert config.require("INT") == "42"
    assert config.require("EMPTY") == ""
    with pytest.raises(Error) as caught:
        config.require("NOPE")
    assert str(caught.value) == "missing required config key 'NOPE'"
    assert caught.value.key == "NOPE"


def test_require_int_raises_the_same_error_for_missing_and_unparsable() -> None:
    assert config.require_int("NEG") == -7
    for key in ("NOPE", "TRAIL"):
        with pytest.raises(Error, match=f"missing required config key '{key}'"):
            config.require_int(key)


def test_config_error_is_a_lookup_error() -> None:
    assert issubclass(Error, LookupError)
