"""From a node's desired state to an Ansible playbook, as data.

No I/O beyond reading the skeletons in playbook_templates/ once. May import nodemanager.api and
nodemanager.desired. The playbook is serialised only by ``dump.to_yaml``.
"""
