"""From ConfigSets to this node's desired state: select, merge, render templates.

Pure functions over api dataclasses: no I/O, no Kubernetes, no Ansible. May import
nodemanager.api only.
"""
