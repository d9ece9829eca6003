"""Log handlers: the one place that installs them (JSON for daemons, text for people)."""

from __future__ import annotations

import datetime
import json
import logging


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 with the zone, so lines from hosts in different zones sort and compare."""
    return (
        datetime.datetime.fromtimestamp(record.created)
        .astimezone()
        .isoformat(timespec="milliseconds")
    )


FIELDS = ("node", "configset", "resource")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: what log collectors on hosts ingest best."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in FIELDS:  # bound by the logger (extra=), so collectors can filter on them
            value = getattr(record, key, None)
            if value:
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "warning": logging.WARNING, "error": logging.ERROR}  # fmt: skip


def setup_logging(log_format: str, log_level: str) -> None:
    """Install the one handler. urllib3 logs a WARNING per retried request while the API server
    is away (most of the lines of an outage); the client's own error says the same once, so
    urllib3 speaks only at debug level."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    level = LOG_LEVELS[log_level.lower()]
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("urllib3").setLevel(
        logging.DEBUG if level <= logging.DEBUG else logging.ERROR
    )
