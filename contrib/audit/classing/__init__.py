"""Classing: what lifting an excluding gate takes (needs kernel work, gate-only, ...)."""
