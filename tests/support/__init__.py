"""Helpers shared by mlopt's tests (imported as ``tests.support.*``; pytest
puts the repository root on sys.path because ``tests`` is a package)."""
