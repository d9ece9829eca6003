"""Kubernetes client errors by class: temporary ones are retried, permanent ones reported."""

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.errors import KUBE_ERRORS, Forbidden, Permanent, Temporary, translate


def api_error(status, message="", reason=""):
    e = ApiException(status=status, reason="Reason")
    e.body = json.dumps({"message": message, "reason": reason})
    return e


@pytest.mark.parametrize("status", [408, 409, 410, 429, 500, 503])
def test_retryable_statuses_are_temporary(status):
    error = translate(api_error(status, "try again"))
    assert isinstance(error, Temporary) and error.temporary and error.status == status


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_client_errors_are_permanent_with_the_servers_words(status):
    error = translate(api_error(status, "managednodes is forbidden", "Forbidden"))
    assert isinstance(error, Permanent) and not error.temporary
    assert str(error) == f"{status} managednodes is forbidden" and error.reason == "Forbidden"
    assert isinstance(error, Forbidden) == (status == 403)


def test_no_answer_is_temporary_and_caught_by_name():
    e = urllib3.exceptions.MaxRetryError(None, "/api", "connection refused")
    assert isinstance(e, KUBE_ERRORS)
    error = translate(e)
    assert isinstance(error, Temporary) and error.status == 0 and "unreachable" in str(error)


def test_a_non_json_body_is_cut_short():
    e = ApiException(status=502, reason="Bad Gateway")
    e.body = "<html>" + "x" * 1000
    assert len(str(translate(e))) < 260
