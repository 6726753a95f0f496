-- Views for the questions maintainers ask. Each is plain SQL over the tables above;
-- docs/analysis.md shows one query per view. Durations are INTERVALs; `hours` columns
-- are the same durations as numbers, for charts and percentiles.

-- Time to first response and to close, per issue. The first response is the first
-- comment by someone other than the issue's author (bots excluded).
CREATE VIEW issue_response_times AS
SELECT
    i.handle,
    i.repo,
    i.number,
    i.title,
    i.state,
    i.author,
    i.created_at,
    first_response.moment AS first_response_at,
    first_response.moment - i.created_at AS time_to_first_response,
    epoch(first_response.moment - i.created_at) / 3600.0 AS hours_to_first_response,
    i.closed_at,
    i.closed_at - i.created_at AS time_to_close,
    epoch(i.closed_at - i.created_at) / 3600.0 AS hours_to_close
FROM issues i
LEFT JOIN LATERAL (
    SELECT min(c.created_at) AS moment
    FROM comments c
    WHERE c.parent_handle = i.handle
      AND c.author IS DISTINCT FROM i.author
      AND coalesce(c.author_type, '') <> 'Bot'
      AND NOT ends_with(coalesce(c.author, ''), '[bot]')
) first_response ON true;

-- Time to first review and to merge, per pull request. A review by the PR's author
-- (a self-comment) does not count.
CREATE VIEW pr_review_times AS
SELECT
    p.handle,
    p.repo,
    p.number,
    p.title,
    p.state,
    p.author,
    p.is_draft,
    p.created_at,
    first_review.moment AS first_review_at,
    first_review.moment - p.created_at AS time_to_first_review,
    epoch(first_review.moment - p.created_at) / 3600.0 AS hours_to_first_review,
    p.merged_at,
    p.merged_at - p.created_at AS time_to_merge,
    epoch(p.merged_at - p.created_at) / 3600.0 AS hours_to_merge
FROM pull_requests p
LEFT JOIN LATERAL (
    SELECT min(coalesce(r.submitted_at, r.created_at)) AS moment
    FROM reviews r
    WHERE r.parent_handle = p.handle
      AND r.author IS DISTINCT FROM p.author
      AND r.state <> 'PENDING'
) first_review ON true;

-- Open, non-draft pull requests nobody but their author has reviewed yet, oldest first.
CREATE VIEW open_prs_awaiting_review AS
SELECT handle, repo, number, title, author, created_at, now() - created_at AS waiting
FROM pr_review_times
WHERE state = 'OPEN' AND NOT coalesce(is_draft, false) AND first_review_at IS NULL
ORDER BY created_at;

-- Open issues with no activity for 90 days.
CREATE VIEW stale_issues AS
SELECT handle, repo, number, title, author, updated_at, now() - updated_at AS idle
FROM issues
WHERE state = 'OPEN' AND updated_at < now() - INTERVAL 90 DAY
ORDER BY updated_at;

-- Per repository and ISO week (Monday): issues and pull requests opened, closed and
-- merged, and comments written.
CREATE VIEW weekly_activity AS
WITH events AS (
    SELECT repo, created_at AS happened, 'issues_opened' AS what FROM issues
    UNION ALL SELECT repo, closed_at, 'issues_closed' FROM issues WHERE closed_at IS NOT NULL
    UNION ALL SELECT repo, created_at, 'prs_opened' FROM pull_requests
    UNION ALL SELECT repo, merged_at, 'prs_merged' FROM pull_requests WHERE merged_at IS NOT NULL
    UNION ALL SELECT repo, created_at, 'comments' FROM comments
)
SELECT
    repo,
    CAST(date_trunc('week', happened) AS DATE) AS week,
    count(*) FILTER (WHERE what = 'issues_opened') AS issues_opened,
    count(*) FILTER (WHERE what = 'issues_closed') AS issues_closed,
    count(*) FILTER (WHERE what = 'prs_opened') AS prs_opened,
    count(*) FILTER (WHERE what = 'prs_merged') AS prs_merged,
    count(*) FILTER (WHERE what = 'comments') AS comments
FROM events
GROUP BY ALL
ORDER BY repo, week;

-- How many open and closed issues and pull requests carry each label.
CREATE VIEW label_distribution AS
WITH items AS (
    SELECT handle, repo, 'issue' AS type, state FROM issues
    UNION ALL SELECT handle, repo, 'pull_request', state FROM pull_requests
)
SELECT
    l.repo,
    l.label,
    count(*) FILTER (WHERE i.type = 'issue' AND i.state = 'OPEN') AS open_issues,
    count(*) FILTER (WHERE i.type = 'issue' AND i.state <> 'OPEN') AS closed_issues,
    count(*) FILTER (WHERE i.type = 'pull_request' AND i.state = 'OPEN') AS open_prs,
    count(*) FILTER (WHERE i.type = 'pull_request' AND i.state <> 'OPEN') AS closed_prs,
    count(*) AS total
FROM issue_labels l
JOIN items i USING (handle)
GROUP BY ALL
ORDER BY l.repo, total DESC, l.label;

-- Who writes comments, per repository (bots excluded).
CREATE VIEW top_commenters AS
SELECT repo, author, count(*) AS comments, count(DISTINCT parent_handle) AS threads,
       min(created_at) AS first_comment, max(created_at) AS last_comment
FROM comments
WHERE author IS NOT NULL AND coalesce(author_type, '') <> 'Bot'
  AND NOT ends_with(author, '[bot]')
GROUP BY ALL
ORDER BY repo, comments DESC, author;

-- Who reviews pull requests, per repository, and with which verdicts.
CREATE VIEW top_reviewers AS
SELECT repo, author,
       count(*) AS reviews,
       count(DISTINCT parent_handle) AS pull_requests,
       count(*) FILTER (WHERE state = 'APPROVED') AS approvals,
       count(*) FILTER (WHERE state = 'CHANGES_REQUESTED') AS changes_requested,
       count(*) FILTER (WHERE state = 'COMMENTED') AS comments_only
FROM reviews
WHERE author IS NOT NULL AND state <> 'PENDING'
GROUP BY ALL
ORDER BY repo, reviews DESC, author;

-- Which pull requests (or commits) closed which issues, from the reference graph:
-- closing references, close events and cross-references that closed their target.
CREATE VIEW issues_closed_by AS
SELECT DISTINCT
    e.dst AS issue,
    i.title AS issue_title,
    i.state AS issue_state,
    e.src AS closed_by,
    CASE WHEN contains(e.src, '#') THEN 'pull_request' ELSE 'commit' END AS closer_type,
    p.title AS closer_title,
    p.merged_at
FROM edges e
JOIN issues i ON i.handle = e.dst
LEFT JOIN pull_requests p ON p.handle = e.src
WHERE e.kind = 'closes'
ORDER BY e.dst, e.src;
