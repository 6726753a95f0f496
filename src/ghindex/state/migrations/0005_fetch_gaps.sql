-- What a fetch could not read, and why (see docs/github-behaviour.md). One row per
-- item GitHub answered with an error (read again by node id on the next run, and
-- removed once read or confirmed gone) or per surface the token may not read
-- (node_id ''; removed once the surface is read again).
CREATE TABLE fetch_gaps (
    repo        VARCHAR NOT NULL,      -- 'owner/name'
    surface     VARCHAR NOT NULL,      -- issues | pull_requests | discussions | releases
    node_id     VARCHAR NOT NULL,      -- GitHub's node id; '' for the whole surface
    handle      VARCHAR,               -- 'owner/name#N' when known
    reason      VARCHAR NOT NULL,      -- GitHub's error type, where and message
    first_seen  TIMESTAMPTZ NOT NULL,  -- when a run first met it
    last_seen   TIMESTAMPTZ NOT NULL,  -- when a run last met it
    attempts    INTEGER NOT NULL,      -- runs that met it
    PRIMARY KEY (repo, surface, node_id)
);
