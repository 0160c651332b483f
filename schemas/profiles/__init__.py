"""Validation profiles (TOML data files); a package so setuptools ships them as package data."""
