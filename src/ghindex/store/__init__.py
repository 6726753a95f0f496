"""The state database: schema migrations and saving fetched nodes (no network)."""
