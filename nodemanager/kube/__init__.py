"""The Kubernetes side: client configuration, informers, ManagedNode registration, status
writes, leases. The only room that imports the ``kubernetes`` client.
"""
