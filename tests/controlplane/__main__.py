"""python -m tests.controlplane build|start|stop — the project's own Kubernetes control plane."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "build"
    if command == "build":
        from tests.controlplane.build import build_components, check_etcd

        check_etcd()
        for path in build_components().values():
            print(path)
        return 0
    if command in ("start", "stop"):
        from tests.controlplane import dev

        return getattr(dev, command)()
    print(
        f"usage: python -m tests.controlplane build|start|stop (not {command!r})", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
