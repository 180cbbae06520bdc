"""Shared pytest fixtures: where the striker binary and shared/ folder are."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def striker_bin() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("STRIKER_BIN", ROOT / "build" / "striker"))
    if not path.exists():
        pytest.fail(f"striker binary not found at {path}: build first (scripts/test.sh)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("STRIKER_SHARED_DIR", ROOT.parent / "shared")).resolve()
