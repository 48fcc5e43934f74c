"""The reliability suite: CI-sized by default, long with ``BRAIN_RELIABILITY=long``.

``pytest tests/reliability --reliability long`` is the same as the environment
variable (the option exists when pytest starts in or below this directory).
Long mode multiplies trials, durations and fuzzed lines for benchmarking and
lifts the per-test timeout. Every test records its figures (trials, writes
acknowledged, lost, lines fuzzed, crashes) with the ``figures`` fixture; they
are printed at the end of the run and, with ``BRAIN_RELIABILITY_REPORT=FILE``,
written to FILE as JSON lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest

# Shared with the end-to-end suite: the real-process fixture and plain-SQL reads.
from tests.e2e.conftest import spawn, sql_rows  # noqa: F401

T = TypeVar("T")

_FIGURES: list[dict[str, Any]] = []
LONG_TIMEOUT_S = 3600


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reliability",
        choices=("ci", "long"),
        default=None,
        help="reliability suite size: ci (default) or long (also BRAIN_RELIABILITY=long)",
    )


def is_long(config: pytest.Config) -> bool:
    """Long mode: the --reliability option, else the BRAIN_RELIABILITY variable."""
    option = config.getoption("--reliability", default=None)
    return (option or os.environ.get("BRAIN_RELIABILITY", "ci")) == "long"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not is_long(config):
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(LONG_TIMEOUT_S))


@pytest.fixture
def long_mode(request: pytest.FixtureRequest) -> bool:
    return is_long(request.config)


@pytest.fixture
def size(long_mode: bool) -> Callable[[T, T], T]:
    """``size(ci_value, long_value)``: the value for the current mode."""

    def pick(ci: T, long: T) -> T:
        return long if long_mode else ci

    return pick


@pytest.fixture
def figures(request: pytest.FixtureRequest, long_mode: bool) -> Iterator[dict[str, Any]]:
    """A dict the test fills with its figures; reported at the end of the run."""
    record: dict[str, Any] = {}
    yield record
    if record:
        entry = {"test": request.node.name, "mode": "long" if long_mode else "ci", **record}
        _FIGURES.append(entry)
        out = os.environ.get("BRAIN_RELIABILITY_REPORT")
        if out:
            with Path(out).open("ab") as fh:
                fh.write(orjson.dumps(entry) + b"\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("reliability figures")
    for entry in _FIGURES:
        terminalreporter.write_line(orjson.dumps(entry).decode())
