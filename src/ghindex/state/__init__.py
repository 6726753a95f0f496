"""The state database: schema migrations, saving fetched nodes and git objects as rows
(redacted on the way in), cursors, gaps and renames. No network."""
