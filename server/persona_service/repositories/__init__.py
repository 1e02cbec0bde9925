"""Repositories: all SQL lives here. Each takes the unit of work's connection
and speaks SQLAlchemy Core (lean statements for hot reads)."""
