"""Alembic migrations of the registry schema, applied by ``SqlRegistry.open``."""
