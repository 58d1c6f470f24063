"""Ansible: the inventory and each host's configuration files a topology makes."""
