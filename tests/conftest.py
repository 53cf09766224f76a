"""Shared fixtures: the repository root and the real-transcript folder (skips when absent)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from chatserver import ChatServer, Reply

REPO_ROOT = Path(__file__).resolve().parents[1]
REALDATA = REPO_ROOT.parent / "shared" / "realdata"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root directory."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def realdata() -> Path:
    """`../shared/realdata` (real transcripts); the test is skipped when the folder is absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not found at {REALDATA}")
    return REALDATA


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[int], Reply]], ChatServer]]:
    servers: list[ChatServer] = []

    def start(script: Callable[[int], Reply]) -> ChatServer:
        server = ChatServer(script).__enter__()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.__exit__(None, None, None)
