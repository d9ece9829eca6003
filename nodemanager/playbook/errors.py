"""Errors of the playbook room."""


class PlaybookError(Exception):
    pass


class UnsupportedPlatform(PlaybookError):
    def __init__(self, os_id: str):
        self.os_id = os_id
        super().__init__(
            f"unsupported OS {os_id!r}: nodemanager knows arch, alpine, freebsd, "
            "debian/ubuntu and fedora/rhel families"
        )
