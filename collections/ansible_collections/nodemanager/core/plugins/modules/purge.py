#!/usr/bin/python
# Apache-2.0
"""Remove the entries of a directory that no ConfigSet declares."""

from __future__ import annotations

DOCUMENTATION = r"""
module: purge
short_description: Remove undeclared entries below a directory
description:
  - Removes every entry below I(path) that is neither listed in I(keep) nor a parent directory
    of a listed path. Used by nodemanager for C(files[].purge) on directories.
options:
  path:
    description: The managed directory (absolute).
    type: path
    required: true
  keep:
    description: Absolute paths below I(path) that are declared and must stay.
    type: list
    elements: path
    default: []
supports_check_mode: true
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule


def undeclared(path, keep):
    keep = {os.path.normpath(p) for p in keep}
    parents = set()
    for p in keep:
        while p not in ("/", path):
            p = os.path.dirname(p)
            parents.add(p)
    doomed = []
    for root, dirs, files in os.walk(path):
        for name in sorted(dirs + files):
            full = os.path.join(root, name)
            if full in keep:
                if name in dirs:
                    dirs.remove(name)  # a declared directory is managed by its own declaration
            elif full not in parents:
                doomed.append(full)
                if name in dirs:
                    dirs.remove(name)
    return doomed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            keep=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    path = os.path.normpath(module.params["path"])
    if not os.path.isdir(path):
        module.exit_json(changed=False, removed=[])
    doomed = undeclared(path, module.params["keep"])
    if not module.check_mode:
        for full in doomed:
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
    module.exit_json(
        changed=bool(doomed),
        removed=doomed,
        diff={"before": "\n".join(doomed) + ("\n" if doomed else ""), "after": ""},
    )


if __name__ == "__main__":
    main()
