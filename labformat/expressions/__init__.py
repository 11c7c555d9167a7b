"""Expressions: the predicates a query filters by, and their evaluation against column statistics (data skipping)."""
