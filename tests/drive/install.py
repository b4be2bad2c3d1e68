"""netbox-chat installed elsewhere: a copy of the package, with or without pyproject, or a wheel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.doubles import ROOT


def installation(where: Path, *, checkout: bool) -> Path:
    """A copy of the package at `where`, with the project file when `checkout`."""
    where.mkdir(parents=True)
    shutil.copytree(
        ROOT / "netbox_chat", where / "netbox_chat", ignore=shutil.ignore_patterns("__pycache__")
    )
    if checkout:
        shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


def as_installed_from_a_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test in this process (which runs from a checkout): as a user who
    installed netbox-chat with pipx, whose default store is the per-user
    folder. The tests below run both kinds of installation for real."""
    from netbox_chat import config

    monkeypatch.setattr(config, "installed_checkout", lambda package=None: None)
