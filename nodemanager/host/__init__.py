"""Observed state of this host: os-release, architecture, labels, interfaces, SSH host keys,
WireGuard. Reads the local system only; imports nothing from other nodemanager rooms.
"""
