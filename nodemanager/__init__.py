"""nodemanager: keep a host's packages, files, services and commands as declared in Kubernetes.

Data flows one way: sources -> select -> merge -> templates -> playbook -> executor -> results ->
status. Each room below is one stage; see ARCHITECTURE.md.
"""

__version__ = "0.1.0"
