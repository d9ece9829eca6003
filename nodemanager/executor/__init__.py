"""Run a plan on this host with ansible-runner and turn its event stream into results.

Three files: config.py (private data dir, environment, collections), run.py (the one
``ansible_runner.run`` call), events.py (event dict -> TaskResult). May import api, desired and
playbook; knows nothing of Kubernetes.
"""
