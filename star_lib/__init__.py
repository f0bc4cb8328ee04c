"""STAR lab kit."""
