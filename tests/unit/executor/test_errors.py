from nodemanager.executor.errors import MissingModules


def test_missing_modules_hint_is_a_command_a_pip_user_has():
    """After `pip install` there is no Makefile: the hint names ansible-galaxy and the
    collections to install, never `make collections`."""
    message = str(
        MissingModules(
            [
                "community.general.pacman",
                "community.general.apk",
                "community.docker.docker_container",
            ],
            "/x",
        )
    )
    assert "make collections" not in message
    assert "`ansible-galaxy collection install community.docker community.general`" in message
    assert "NODEMANAGER_COLLECTIONS_PATH" in message
