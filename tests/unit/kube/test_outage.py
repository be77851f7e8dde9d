import logging

import pytest

from toposched.kube.outage import Outage


@pytest.mark.parametrize(
    ("attempts", "lines"),
    [
        pytest.param("ok ok", [], id="no-outage"),
        pytest.param("fail fail fail ok", ["WARNING thing failed (down)", "INFO thing works again"], id="one-outage"),
        pytest.param(
            "fail ok fail fail ok",
            ["WARNING thing failed (down)", "INFO thing works again"] * 2,
            id="two-outages",
        ),
        pytest.param("fail fail", ["WARNING thing failed (down)"], id="still-down"),
    ],
)
def test_one_line_when_it_fails_and_one_when_it_is_back(
    attempts: str, lines: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage(logging.getLogger("test.outage"), "thing")
    with caplog.at_level("DEBUG", logger="test.outage"):
        for attempt in attempts.split():
            if attempt == "fail":
                outage.failed(ConnectionError("down"))
            else:
                outage.ok()
    said = [f"{r.levelname} {r.getMessage()}" for r in caplog.records if r.levelno > logging.DEBUG]
    assert [line.split(" after")[0] for line in said] == lines
    assert not any(r.exc_info for r in caplog.records)
