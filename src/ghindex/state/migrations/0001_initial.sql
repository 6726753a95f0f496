-- The state database: GitHub's working state, one table per entity.
-- Every entity row carries `handle` (see the contract's handle table) and `repo`
-- ('owner/name'). Times are TIMESTAMPTZ. Rows are upserted by handle, so running
-- the same fetch twice leaves the same rows.

-- Repositories ghindex fetched, with what GitHub says about them.
CREATE TABLE repos (
    repo            VARCHAR PRIMARY KEY,      -- 'owner/name', as GitHub spells it
    handle          VARCHAR NOT NULL,         -- same as repo
    node_id         VARCHAR,
    owner           VARCHAR NOT NULL,
    name            VARCHAR NOT NULL,
    description     VARCHAR,
    url             VARCHAR,
    default_branch  VARCHAR,
    is_private      BOOLEAN,
    is_archived     BOOLEAN,
    is_fork         BOOLEAN,
    created_at      TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ,
    pushed_at       TIMESTAMPTZ,
    fetched_at      TIMESTAMPTZ NOT NULL
);

-- Issues (not pull requests), one row each, as last fetched.
CREATE TABLE issues (
    handle              VARCHAR PRIMARY KEY,  -- 'owner/name#123'
    repo                VARCHAR NOT NULL,
    number              INTEGER NOT NULL,
    node_id             VARCHAR,
    title               VARCHAR NOT NULL,
    body                VARCHAR,
    state               VARCHAR NOT NULL,     -- OPEN | CLOSED
    state_reason        VARCHAR,              -- COMPLETED | NOT_PLANNED | REOPENED | DUPLICATE
    locked              BOOLEAN,
    author              VARCHAR,              -- login; NULL for a deleted account
    author_type         VARCHAR,              -- User | Bot | Organization | Mannequin | EnterpriseUserAccount
    author_association  VARCHAR,              -- OWNER | MEMBER | COLLABORATOR | CONTRIBUTOR | NONE | ...
    milestone_number    INTEGER,
    milestone           VARCHAR,              -- milestone title
    comments_count      INTEGER,
    reactions_count     INTEGER,
    url                 VARCHAR NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    closed_at           TIMESTAMPTZ,
    fetched_at          TIMESTAMPTZ NOT NULL
);

-- Pull requests, one row each, as last fetched.
CREATE TABLE pull_requests (
    handle              VARCHAR PRIMARY KEY,  -- 'owner/name#123'
    repo                VARCHAR NOT NULL,
    number              INTEGER NOT NULL,
    node_id             VARCHAR,
    title               VARCHAR NOT NULL,
    body                VARCHAR,
    state               VARCHAR NOT NULL,     -- OPEN | CLOSED | MERGED
    is_draft            BOOLEAN,
    merged              BOOLEAN,
    merged_at           TIMESTAMPTZ,
    locked              BOOLEAN,
    author              VARCHAR,
    author_type         VARCHAR,
    author_association  VARCHAR,
    milestone_number    INTEGER,
    milestone           VARCHAR,
    base_ref            VARCHAR,
    head_ref            VARCHAR,
    additions           INTEGER,
    deletions           INTEGER,
    changed_files       INTEGER,
    comments_count      INTEGER,
    reactions_count     INTEGER,
    url                 VARCHAR NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    closed_at           TIMESTAMPTZ,
    fetched_at          TIMESTAMPTZ NOT NULL
);

-- Labels defined in a repository, as last seen on an item.
CREATE TABLE labels (
    repo        VARCHAR NOT NULL,
    name        VARCHAR NOT NULL,
    color       VARCHAR,
    description VARCHAR,
    PRIMARY KEY (repo, name)
);

-- Which labels an issue or pull request carries now (handle of the item).
CREATE TABLE issue_labels (
    handle  VARCHAR NOT NULL,
    repo    VARCHAR NOT NULL,
    label   VARCHAR NOT NULL,
    PRIMARY KEY (handle, label)
);

-- Who an issue or pull request is assigned to now.
CREATE TABLE assignees (
    handle  VARCHAR NOT NULL,
    repo    VARCHAR NOT NULL,
    login   VARCHAR NOT NULL,
    PRIMARY KEY (handle, login)
);

-- Milestones, as last seen on an item.
CREATE TABLE milestones (
    repo    VARCHAR NOT NULL,
    number  INTEGER NOT NULL,
    title   VARCHAR NOT NULL,
    state   VARCHAR,                  -- OPEN | CLOSED
    due_on  TIMESTAMPTZ,
    url     VARCHAR,
    PRIMARY KEY (repo, number)
);

-- High-water marks: per repo and surface, the newest updatedAt whose items are
-- all stored. It moves in the same transaction as the rows it covers.
CREATE TABLE sync_state (
    repo            VARCHAR NOT NULL,
    surface         VARCHAR NOT NULL,  -- issues | pull_requests
    high_water_mark TIMESTAMPTZ,
    items_seen      BIGINT NOT NULL DEFAULT 0,
    updated_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (repo, surface)
);

-- One row per fetch or build, successful or not.
CREATE TABLE runs (
    run_id       VARCHAR PRIMARY KEY,
    command      VARCHAR NOT NULL,     -- fetch | build | demo
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    status       VARCHAR NOT NULL,     -- ok | failed
    repos        VARCHAR[],
    stats        JSON,
    error        VARCHAR,
    ghindex_version VARCHAR
);
