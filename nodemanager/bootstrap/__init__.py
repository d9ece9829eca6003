"""Getting a host connected: RBAC manifests, short-lived tokens, the node's kubeconfig."""
