"""Fetching from GitHub's GraphQL API: network only, generators of pages."""
