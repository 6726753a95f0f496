"""What comes from GitHub's GraphQL API: the client (rate limits, retries, partial
answers), the `.graphql` documents, paging generators, and `ingest`, which saves what
they yield into the state database."""
