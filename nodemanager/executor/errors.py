"""Errors of the executor room."""


class ExecutorError(Exception):
    pass


class MissingModules(ExecutorError):
    def __init__(self, modules: list[str], collections_path: str):
        self.modules = modules
        super().__init__(
            f"Ansible modules not installed: {', '.join(modules)} (looked in {collections_path}); "
            "run `make collections` or set NODEMANAGER_COLLECTIONS_PATH"
        )
