"""Shared fixtures. Tests import the packages from the checkout (tokenbeam is installed -e)."""
