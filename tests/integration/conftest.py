"""Fixtures shared by the integration tests: a conftest makes them visible without an import."""

from tests.integration.apk_repo import apk_env, apk_repo  # noqa: F401  (fixtures)
from tests.integration.pacman_repo import pacman_env, pacman_repo  # noqa: F401  (fixtures)
from tests.integration.pkg_repo import pkg_env, pkg_repo  # noqa: F401  (fixtures)
