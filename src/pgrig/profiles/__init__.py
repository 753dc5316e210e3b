"""Shipped configuration profiles (plain .conf files)."""
