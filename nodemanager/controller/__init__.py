"""The fleet controller: what one host cannot see, computed from the API and written back.

One process per cluster (leader-elected). It reads ConfigSets, ManagedNodes and Leases and
writes ConfigSet status (summaries), a stale node's Ready condition and per-node Roles. It
never writes a host. The modules here are pure functions over raw API dicts except
``manager`` (the loop) and ``serve`` (endpoints); the API calls live in ``kube/``. May import
api, desired and kube.
"""
