#!/usr/bin/python
# Apache-2.0
"""Remove the plain files of a directory that no ConfigSet declares (upstream nodemanager's
purge: the directory's own entries only; subdirectories and what they hold are never touched)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: purge
short_description: Remove undeclared plain files directly in a directory
version_added: "0.1.0"
author: nodemanager
description:
  - Removes every entry directly in O(path) that is not a directory and not listed in O(keep)
    (files, symlinks, sockets). Subdirectories and their contents are never removed, as in
    upstream nodemanager. Used by nodemanager for C(files[].purge) on directories.
  - A missing O(path) is not an error; nothing is removed.
options:
  path:
    description: The managed directory (absolute).
    type: path
    required: true
  keep:
    description: Absolute paths below O(path) that are declared and must stay.
    type: list
    elements: path
    default: []
  only:
    description:
      - Consider these entries of I(path) alone (absolute paths directly in it); the others
        stay whatever they are. Lets each entry a subscription names be purged by a task of
        its own, which notifies that subscription (upstream counts a purged entry as changed).
    type: list
    elements: path
attributes:
  check_mode:
    description: Reports what it would remove, removes nothing.
    support: full
  diff_mode:
    description: The diff lists the removed paths, one per line, as before.
    support: full
"""

EXAMPLES = r"""
- name: Keep only the declared files of /etc/app/conf.d
  nodemanager.core.purge:
    path: /etc/app/conf.d
    keep:
      - /etc/app/conf.d/main.conf
      - /etc/app/conf.d/tls.conf
"""

RETURN = r"""
removed:
  description: The paths removed (in check mode, those that would be), sorted.
  returned: always
  type: list
  elements: str
  sample: ["/etc/app/conf.d/stray.conf"]
"""

import os

from ansible.module_utils.basic import AnsibleModule


def undeclared(path, keep, only=None):
    keep = {os.path.normpath(p) for p in keep}
    only = None if only is None else {os.path.normpath(p) for p in only}
    with os.scandir(path) as entries:
        return sorted(
            entry.path
            for entry in entries
            if not entry.is_dir(follow_symlinks=False)
            and entry.path not in keep
            and (only is None or entry.path in only)
        )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            keep=dict(type="list", elements="path", default=[]),
            only=dict(type="list", elements="path"),
        ),
        supports_check_mode=True,
    )
    path = os.path.normpath(module.params["path"])
    if not os.path.isdir(path):
        module.exit_json(changed=False, removed=[])
    doomed = undeclared(path, module.params["keep"], module.params["only"])
    if not module.check_mode:
        for full in doomed:
            os.unlink(full)
    module.exit_json(
        changed=bool(doomed),
        removed=doomed,
        diff={"before": "\n".join(doomed) + ("\n" if doomed else ""), "after": ""},
    )


if __name__ == "__main__":
    main()
