"""Check a task's parameters against an Ansible module's own argument spec, without running it.

Used where the module's real target cannot run on the test machine (Alpine's apk, FreeBSD's pkg,
sysrc and rc.d). The module file is imported with AnsibleModule replaced by a recorder that
captures the spec main() builds, then stops; ansible-core's ArgumentSpecValidator checks the
parameters the way the module itself would on the host.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from ansible.module_utils.basic import FILE_COMMON_ARGUMENTS
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

COLLECTIONS = Path(__file__).resolve().parents[3] / "collections" / "ansible_collections"


class _Captured(Exception):
    def __init__(self, kwargs):
        self.kwargs = kwargs


class _Recorder:
    def __init__(self, *args, **kwargs):
        if args:
            kwargs["argument_spec"] = args[0]
        raise _Captured(kwargs)


def module_spec(fqcn: str) -> dict:
    """The keyword arguments the module passes to AnsibleModule (argument_spec, ...)."""
    namespace, collection, name = fqcn.split(".")
    if (namespace, collection) == ("ansible", "builtin"):
        import ansible.modules

        path = Path(ansible.modules.__file__).parent / f"{name}.py"
    else:
        path = COLLECTIONS / namespace / collection / "plugins" / "modules" / f"{name}.py"
        if not path.exists():
            # A fresh clone has no collections: `make test-unit` still runs everything else.
            pytest.skip(f"{fqcn} is not installed here: run `make collections` to check it")
    if str(COLLECTIONS.parent) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS.parent))  # module_utils imports as ansible_collections.*
    spec = importlib.util.spec_from_file_location(f"_argspec_{namespace}_{collection}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # ModuleHelper-based modules (sysrc) declare their spec as a class attribute.
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and isinstance(getattr(value, "module", None), dict)
            and "argument_spec" in value.module
        ):
            return value.module
    module.AnsibleModule = _Recorder
    try:
        module.main()
    except _Captured as captured:
        return captured.kwargs
    raise AssertionError(f"{fqcn}: main() did not build an AnsibleModule")


def validate(fqcn: str, params: dict) -> list[str]:
    """Error messages for ``params`` under the module's own spec; empty when valid."""
    kwargs = module_spec(fqcn)
    argument_spec = dict(kwargs["argument_spec"])
    if kwargs.get("add_file_common_args"):
        argument_spec.update(FILE_COMMON_ARGUMENTS)
    validator = ArgumentSpecValidator(
        argument_spec,
        mutually_exclusive=kwargs.get("mutually_exclusive"),
        required_together=kwargs.get("required_together"),
        required_one_of=kwargs.get("required_one_of"),
        required_if=kwargs.get("required_if"),
        required_by=kwargs.get("required_by"),
    )
    result = validator.validate(dict(params))
    return [str(e) for e in result.errors]
