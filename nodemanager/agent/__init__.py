"""The agent: wires sources (files or the cluster) through the pipeline to the executor and
status. May import every room below it (api, desired, playbook, executor, host, kube).
"""
