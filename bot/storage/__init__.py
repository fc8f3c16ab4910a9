"""Storage: SQLAlchemy models, the database and the repository functions services call."""
