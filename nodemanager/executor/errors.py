"""Errors of the executor room."""


class ExecutorError(Exception):
    pass


class MissingModules(ExecutorError):
    """Modules the playbook needs that no collection on the search path has. The hint is a
    command every install has (a pip user has no Makefile): ansible-galaxy comes with ansible,
    and installs into ~/.ansible/collections, which is on the path."""

    def __init__(self, modules: list[str], collections_path: str):
        self.modules = modules
        collections = sorted({".".join(m.split(".")[:2]) for m in modules if m.count(".") >= 2})
        install = (
            f"install with `ansible-galaxy collection install {' '.join(collections)}`, or"
            if collections
            else "install their collections, or"
        )
        super().__init__(
            f"Ansible modules not installed: {', '.join(modules)} (looked in {collections_path}); "
            f"{install} set NODEMANAGER_COLLECTIONS_PATH to a directory that has them"
        )


class AnsibleMissing(ExecutorError):
    """ansible-playbook is not where nodemanager runs it from."""

    def __init__(self, directory: str):
        super().__init__(
            f"ansible-playbook not found in {directory}: install ansible-core beside nodemanager "
            "(pip install nodemanager brings it), or set NODEMANAGER_ANSIBLE_BIN to its directory"
        )
