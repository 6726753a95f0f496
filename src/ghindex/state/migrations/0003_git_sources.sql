-- Git sources: docs and wiki pages read from a commit, and the default branch's
-- commits with one row per changed file. Written by ghindex.gitsource from a local
-- clone; their cursors are sync_state rows with surface git_docs, git_commits and
-- git_wiki, whose `cursor` is the indexed commit's sha (see docs/git-sources.md).

-- Markdown / MDX / reStructuredText files of the indexed commit, and wiki pages.
CREATE TABLE docs (
    handle          VARCHAR PRIMARY KEY,  -- 'owner/name:path/to/file.md' | 'owner/name:wiki/Page-Name'
    repo            VARCHAR NOT NULL,
    kind            VARCHAR NOT NULL,     -- doc | wiki
    path            VARCHAR NOT NULL,     -- path in the repository (in the wiki repository for pages)
    title           VARCHAR NOT NULL,     -- docs: first heading, else the file name; wiki: the page name
    body            VARCHAR NOT NULL,     -- the file's text as committed (UTF-8, invalid bytes replaced)
    commit_sha      VARCHAR NOT NULL,     -- commit the body was read at; the file is identical at the source's cursor
    blob_sha        VARCHAR NOT NULL,     -- git blob of the body
    size            BIGINT NOT NULL,      -- bytes
    last_commit_sha VARCHAR,              -- newest non-merge commit that changed the file; NULL if not in the clone's history
    last_changed_at TIMESTAMPTZ,          -- committer time of last_commit_sha
    url             VARCHAR NOT NULL,     -- blob URL at commit_sha, or the wiki page URL
    fetched_at      TIMESTAMPTZ NOT NULL
);

-- Commits of the default branch: everything `git log` shows from the indexed commit.
-- Author emails are not stored; a GitHub noreply address gives author_login.
CREATE TABLE commits (
    handle          VARCHAR PRIMARY KEY,  -- 'owner/name@<full sha>'
    repo            VARCHAR NOT NULL,
    sha             VARCHAR NOT NULL,
    parents         VARCHAR[] NOT NULL,   -- in order; diffs are against the first
    author_name     VARCHAR,
    author_login    VARCHAR,              -- from a '<id>+<login>@users.noreply.<host>' address, else NULL
    committer_name  VARCHAR,
    committer_login VARCHAR,
    authored_at     TIMESTAMPTZ,
    committed_at    TIMESTAMPTZ,
    subject         VARCHAR NOT NULL,     -- first line of the message
    message         VARCHAR NOT NULL,     -- full message, trailers included
    url             VARCHAR NOT NULL,
    files_changed   INTEGER,              -- NULL: the diff is unknown (a shallow clone's boundary commit)
    additions       INTEGER,              -- lines, text files only
    deletions       INTEGER,
    fetched_at      TIMESTAMPTZ NOT NULL
);

-- One file's change in a commit, against the commit's first parent.
CREATE TABLE commit_files (
    handle          VARCHAR PRIMARY KEY,  -- 'owner/name@<full sha>:path/to/file'
    repo            VARCHAR NOT NULL,
    sha             VARCHAR NOT NULL,
    commit_handle   VARCHAR NOT NULL,     -- 'owner/name@<full sha>'
    path            VARCHAR NOT NULL,     -- the path after the change (before it, for a deletion)
    old_path        VARCHAR,              -- renames and copies: the path before
    status          VARCHAR NOT NULL,     -- A added | M modified | D deleted | R renamed | C copied | T type changed
    similarity      INTEGER,              -- renames and copies: percent similar
    additions       INTEGER,              -- NULL for binary files
    deletions       INTEGER,
    is_binary       BOOLEAN NOT NULL,
    patch           VARCHAR,              -- git's unified diff of the file; NULL past the commit's patch budget
    patch_truncated BOOLEAN NOT NULL,     -- patch cut at 100 KB, or dropped past 1 MB per commit
    fetched_at      TIMESTAMPTZ NOT NULL
);
