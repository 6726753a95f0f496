-- Every GitHub surface beyond issues and pull requests, the raw reference graph,
-- and richer bookkeeping for sync cursors and runs.

-- A text cursor beside the time mark: a git commit sha for git sources, or the
-- page cursor of an interrupted pass so the next run resumes inside it.
ALTER TABLE sync_state ADD COLUMN cursor VARCHAR;

ALTER TABLE runs ADD COLUMN requests BIGINT;
ALTER TABLE runs ADD COLUMN cost BIGINT;          -- GraphQL rate-limit points spent

-- Comments on issues, pull requests (the conversation tab) and discussions.
CREATE TABLE comments (
    handle              VARCHAR PRIMARY KEY,  -- 'owner/name#12/comment/<databaseId>'
    repo                VARCHAR NOT NULL,
    number              INTEGER NOT NULL,     -- number of the item commented on
    parent_handle       VARCHAR NOT NULL,     -- 'owner/name#12'
    parent_type         VARCHAR NOT NULL,     -- issue | pull_request | discussion
    node_id             VARCHAR,
    database_id         BIGINT,
    reply_to            VARCHAR,              -- discussion replies: handle of the comment replied to
    is_answer           BOOLEAN,              -- discussion comments: chosen as the answer
    author              VARCHAR,
    author_type         VARCHAR,
    author_association  VARCHAR,
    body                VARCHAR,
    url                 VARCHAR,
    reactions_count     INTEGER,
    is_minimized        BOOLEAN,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    fetched_at          TIMESTAMPTZ NOT NULL
);

-- Pull request reviews (approve / request changes / comment).
CREATE TABLE reviews (
    handle              VARCHAR PRIMARY KEY,  -- 'owner/name#12/review/<databaseId>'
    repo                VARCHAR NOT NULL,
    number              INTEGER NOT NULL,
    parent_handle       VARCHAR NOT NULL,
    node_id             VARCHAR,
    database_id         BIGINT,
    state               VARCHAR NOT NULL,     -- APPROVED | CHANGES_REQUESTED | COMMENTED | DISMISSED | PENDING
    author              VARCHAR,
    author_type         VARCHAR,
    author_association  VARCHAR,
    body                VARCHAR,
    url                 VARCHAR,
    commit_oid          VARCHAR,
    submitted_at        TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    fetched_at          TIMESTAMPTZ NOT NULL
);

-- Comments on lines of a pull request's diff, with their thread's state.
CREATE TABLE review_comments (
    handle              VARCHAR PRIMARY KEY,  -- 'owner/name#12/review-comment/<databaseId>'
    repo                VARCHAR NOT NULL,
    number              INTEGER NOT NULL,
    parent_handle       VARCHAR NOT NULL,
    review_handle       VARCHAR,              -- the review the comment was submitted with
    thread_id           VARCHAR,              -- node id of the review thread
    reply_to            VARCHAR,              -- handle of the comment this one answers
    node_id             VARCHAR,
    database_id         BIGINT,
    author              VARCHAR,
    author_type         VARCHAR,
    author_association  VARCHAR,
    body                VARCHAR,
    path                VARCHAR,
    line                INTEGER,
    original_line       INTEGER,
    start_line          INTEGER,
    diff_hunk           VARCHAR,
    commit_oid          VARCHAR,
    original_commit_oid VARCHAR,
    is_resolved         BOOLEAN,              -- the thread is resolved
    is_outdated         BOOLEAN,              -- the thread's lines changed since
    resolved_by         VARCHAR,
    url                 VARCHAR,
    reactions_count     INTEGER,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    fetched_at          TIMESTAMPTZ NOT NULL
);

-- Releases, newest state; a release deleted on GitHub leaves on the next fetch.
CREATE TABLE releases (
    handle          VARCHAR PRIMARY KEY,      -- 'owner/name@release/<tag>'
    repo            VARCHAR NOT NULL,
    tag             VARCHAR NOT NULL,
    name            VARCHAR,
    body            VARCHAR,
    url             VARCHAR,
    node_id         VARCHAR,
    database_id     BIGINT,
    author          VARCHAR,
    is_draft        BOOLEAN,
    is_prerelease   BOOLEAN,
    is_latest       BOOLEAN,
    tag_commit      VARCHAR,                  -- sha the tag points at
    created_at      TIMESTAMPTZ NOT NULL,
    published_at    TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL,
    fetched_at      TIMESTAMPTZ NOT NULL
);

-- Discussions, one row each; their comments and replies are in `comments`.
CREATE TABLE discussions (
    handle              VARCHAR PRIMARY KEY,  -- 'owner/name#12'
    repo                VARCHAR NOT NULL,
    number              INTEGER NOT NULL,
    node_id             VARCHAR,
    title               VARCHAR NOT NULL,
    body                VARCHAR,
    url                 VARCHAR NOT NULL,
    category            VARCHAR,
    is_answerable       BOOLEAN,              -- the category takes answers (Q&A)
    answer_handle       VARCHAR,              -- handle of the answer comment
    answer_chosen_at    TIMESTAMPTZ,
    answer_chosen_by    VARCHAR,
    state               VARCHAR NOT NULL,     -- OPEN | CLOSED
    state_reason        VARCHAR,              -- RESOLVED | OUTDATED | DUPLICATE | REOPENED
    locked              BOOLEAN,
    author              VARCHAR,
    author_type         VARCHAR,
    author_association  VARCHAR,
    comments_count      INTEGER,
    reactions_count     INTEGER,
    upvote_count        INTEGER,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    closed_at           TIMESTAMPTZ,
    fetched_at          TIMESTAMPTZ NOT NULL
);

-- The reference graph, raw: one row per link seen, with where it was seen.
-- Both ends are handles; the other end may belong to a repository that is not
-- indexed. Kinds: see "Edge kinds" in docs/schema.md.
CREATE TABLE edges (
    src             VARCHAR NOT NULL,
    dst             VARCHAR NOT NULL,
    kind            VARCHAR NOT NULL,
    source_handle   VARCHAR NOT NULL,         -- the item whose data holds the link
    source_field    VARCHAR NOT NULL,         -- body | comment | closingIssuesReferences | timeline:<EventType> | parent | ...
    repo            VARCHAR NOT NULL,         -- repo of source_handle (links are replaced per source)
    created_at      TIMESTAMPTZ,              -- when the link was made, when GitHub says
    fetched_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (src, dst, kind, source_handle, source_field)
);
