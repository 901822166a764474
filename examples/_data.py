"""Not an example: where the examples keep the files they write, `examples/.data/`.

One git-ignored folder, never the repository root or the working directory, so running any
example leaves a checkout as it was. Each example still takes an environment variable to put
its data elsewhere.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent / ".data"


def data_path(name: str) -> Path:
    """`examples/.data/NAME`, the folder made on first use."""
    FOLDER.mkdir(exist_ok=True)
    return FOLDER / name


def sqlite_url(name: str) -> str:
    """A `sqlite:////absolute/path` URL for the database file NAME in the data folder."""
    return f"sqlite:///{data_path(name)}"
