"""A failed resource is logged at WARNING with its ConfigSet, resource and message."""

from __future__ import annotations

import json
import logging

from nodemanager.agent.report import log_outcomes
from nodemanager.cli.logs import JsonFormatter
from nodemanager.executor.summary import ConfigSetResult, Failure


def test_a_failed_resource_is_a_warning_naming_configset_resource_and_message(caplog):
    outcome = ConfigSetResult(
        "web", "42", failures=[Failure("file:/etc/x.conf", "Destination directory missing")]
    )
    with caplog.at_level(logging.INFO, logger="nodemanager.agent.report"):
        log_outcomes([outcome])
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "warning"
    assert (line["configset"], line["resource"]) == ("web", "file:/etc/x.conf")
    assert line["msg"] == (
        "ConfigSet web@42: resource file:/etc/x.conf failed: Destination directory missing"
    )
