"""The resource model: ConfigSet and ManagedNode as frozen dataclasses parsed from raw dicts.

No I/O and no imports from other nodemanager rooms. Parsing collects every problem and reports
each with the path of the field it concerns (``spec.files[2].mode``).
"""

from nodemanager.api.configset import (
    ConfigSet,
    Execution,
    File,
    Notify,
    Package,
    Ref,
    Service,
)
from nodemanager.api.duration import parse_duration
from nodemanager.api.errors import FieldError, InvalidObject
from nodemanager.api.labels import LabelSelector, Requirement
from nodemanager.api.node import Node

__all__ = [
    "ConfigSet",
    "Execution",
    "Node",
    "File",
    "FieldError",
    "InvalidObject",
    "LabelSelector",
    "Notify",
    "Package",
    "Ref",
    "Requirement",
    "Service",
    "parse_duration",
]
