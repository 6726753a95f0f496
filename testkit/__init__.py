"""What the tests and the benchmarks share: a local GitHub GraphQL server speaking GitHub's
published schema (github_server), state-database helpers (state), synthetic credentials
(secrets_corpus) and a counting proxy in front of a local S3 server (store_proxy).
Imported as `testkit.*` from the repository root: pytest puts the root on the path
(`pythonpath` in pyproject.toml), and benchmarks run as `python -m bench.NAME`."""
