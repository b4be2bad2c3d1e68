"""Owns the evaluation harness (`netbox-chat eval`); nothing in the product imports it."""
