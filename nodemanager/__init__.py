"""nodemanager: keep a host's packages, files, services and commands as declared in Kubernetes.

Data flows one way: sources -> select -> merge -> templates -> playbook -> executor -> results ->
status. Each room below is one stage; see ARCHITECTURE.md.
"""

# The next release: a checkout past no tag is a development build of it (0.2.0.devN,
# nodemanager/versionscheme.py). 0.2.0, not 0.1.0: builds before the scheme were 0.1.0+g<hash>,
# which every distribution ranks above any 0.1.0 development build.
__version__ = "0.2.0"
