"""The examples' tests: `tests/` on sys.path (for `services`), each example on a fresh database."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/services.py
sys.path.insert(0, str(HERE))  # browser.py
