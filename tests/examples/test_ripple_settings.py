"""examples/ripple without a server: settings precedence, password hashes, upload names."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.ripple import passwords
from examples.ripple.settings import SettingsError, from_environment, parse_args
from socketify.config import Config


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str]:
    cert, key = tmp_path / "site.crt", tmp_path / "site.key"
    cert.write_text("certificate")
    key.write_text("private key")
    return str(cert), str(key)


def test_flags_beat_the_environment_which_beats_dot_env(
    tmp_path: Path, pair: tuple[str, str]
) -> None:
    cert, key = pair
    (tmp_path / ".env").write_text(
        f"RIPPLE_CERT={cert}\nRIPPLE_KEY={key}\nRIPPLE_PORT=9000\nRIPPLE_DB=sqlite:///file.db\n"
    )
    config = Config.load(tmp_path / ".env", environ={"RIPPLE_PORT": "9100"})
    settings = parse_args(["--db", "sqlite:///flag.db"], config)
    assert (settings.cert, settings.key) == (cert, key)
    assert settings.port == 9100  # the environment over .env
    assert settings.db == "sqlite:///flag.db"  # the flag over both
    assert (settings.host, settings.workers, settings.log) == ("127.0.0.1", 2, "info")
    # What the launcher hands its workers gives the same settings back.
    assert from_environment(Config(settings.environment())) == settings


def test_the_session_secret_is_derived_from_the_key_unless_given(pair: tuple[str, str]) -> None:
    cert, key = pair
    derived = from_environment(Config({"RIPPLE_CERT": cert, "RIPPLE_KEY": key}))
    assert len(derived.secret) == 64 and "private key" not in derived.secret
    assert from_environment(Config({"RIPPLE_CERT": cert, "RIPPLE_KEY": key})) == derived
    given = Config({"RIPPLE_CERT": cert, "RIPPLE_KEY": key, "RIPPLE_SECRET": "s" * 40})
    assert from_environment(given).secret == "s" * 40


def test_missing_certificates_and_bad_numbers_are_clear_errors(
    tmp_path: Path, pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ripple.crt here
    with pytest.raises(SettingsError, match=r"HTTPS only and --cert ripple\.crt is no file"):
        from_environment(Config({}))
    cert, key = pair
    with pytest.raises(SettingsError, match=r"--key .*nope\.key is no file"):
        from_environment(Config({"RIPPLE_CERT": cert, "RIPPLE_KEY": str(tmp_path / "nope.key")}))
    with pytest.raises(SettingsError, match="RIPPLE_PORT must be a whole number, not 'http'"):
        from_environment(Config({"RIPPLE_CERT": cert, "RIPPLE_KEY": key, "RIPPLE_PORT": "http"}))


def test_password_hashes_verify_and_refuse() -> None:
    stored = passwords.hash_password("correct horse")
    assert stored.startswith("scrypt$16384$8$1$")
    assert passwords.verify_password("correct horse", stored)
    assert not passwords.verify_password("correct horsE", stored)
    assert passwords.hash_password("correct horse") != stored  # salted
    for broken in ("", "md5$x", stored.replace("scrypt", "bcrypt"), stored[:-2] + "zz"):
        assert not passwords.verify_password("correct horse", broken)


def test_only_stored_upload_names_are_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.ripple import uploads

    monkeypatch.setattr(uploads, "FOLDER", tmp_path)
    saved = uploads.save(b"GIF89a", "image/gif; charset=binary", "a%2Fb.gif")
    assert saved["name"] == "a_b.gif" and saved["mime"] == "image/gif" and saved["size"] == 6
    assert uploads.checked_file({"url": saved["url"], "name": "shown"})["name"] == "shown"
    exe = uploads.save(b"MZ", "application/x-msdownload", "run.exe")
    assert exe["url"].endswith(".bin") and exe["mime"] == "application/octet-stream"
    for url in ("/uploads/../ripple.db", "/uploads/" + "0" * 32 + ".png", "/etc/passwd", 5):
        assert uploads.checked_file({"url": url}) is None
    assert uploads.path_of(".." + saved["url"][len("/uploads/") :]) is None
