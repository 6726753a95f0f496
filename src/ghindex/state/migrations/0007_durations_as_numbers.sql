-- The analysis views give durations as plain numbers (DOUBLE), never as INTERVALs, which
-- print as '3699 days, 1:49:24.189635' and sort, chart and average badly: the time to a
-- response, a review, a close or a merge in hours (two decimals), how long an item has
-- waited in days (one decimal). The items people act on carry their URL.
DROP VIEW open_prs_awaiting_review;
DROP VIEW stale_issues;
DROP VIEW issue_response_times;
DROP VIEW pr_review_times;

-- Time to first response and to close, per issue, in hours (NULL until it happens). The
-- first response is the first comment by someone other than the issue's author (bots
-- excluded).
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
    round(epoch(first_response.moment - i.created_at) / 3600, 2) AS hours_to_first_response,
    i.closed_at,
    round(epoch(i.closed_at - i.created_at) / 3600, 2) AS hours_to_close
FROM issues i
LEFT JOIN LATERAL (
    SELECT min(c.created_at) AS moment
    FROM comments c
    WHERE c.parent_handle = i.handle
      AND c.author IS DISTINCT FROM i.author
      AND coalesce(c.author_type, '') <> 'Bot'
      AND NOT ends_with(coalesce(c.author, ''), '[bot]')
) first_response ON true;

-- Time to first review and to merge, per pull request, in hours (NULL until it happens).
-- A review by the PR's author (a self-comment) does not count.
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
    round(epoch(first_review.moment - p.created_at) / 3600, 2) AS hours_to_first_review,
    p.merged_at,
    round(epoch(p.merged_at - p.created_at) / 3600, 2) AS hours_to_merge
FROM pull_requests p
LEFT JOIN LATERAL (
    SELECT min(coalesce(r.submitted_at, r.created_at)) AS moment
    FROM reviews r
    WHERE r.parent_handle = p.handle
      AND r.author IS DISTINCT FROM p.author
      AND r.state <> 'PENDING'
) first_review ON true;

-- Open, non-draft pull requests nobody but their author has reviewed yet, oldest first;
-- `days_waiting` is the days since it was opened.
CREATE VIEW open_prs_awaiting_review AS
SELECT t.handle, t.repo, t.number, t.title, t.author, t.created_at,
       round(epoch(now() - t.created_at) / 86400, 1) AS days_waiting, p.url
FROM pr_review_times t
JOIN pull_requests p USING (handle)
WHERE t.state = 'OPEN' AND NOT coalesce(t.is_draft, false) AND t.first_review_at IS NULL
ORDER BY t.created_at, t.handle;

-- Open issues with no activity for 90 days, longest idle first; `days_idle` is the days
-- since GitHub last saw the issue change.
CREATE VIEW stale_issues AS
SELECT handle, repo, number, title, author, updated_at,
       round(epoch(now() - updated_at) / 86400, 1) AS days_idle, url
FROM issues
WHERE state = 'OPEN' AND updated_at < now() - INTERVAL 90 DAY
ORDER BY updated_at, handle;
