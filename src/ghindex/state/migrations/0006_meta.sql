-- Facts about how the state was written that a later run must know: which redaction
-- rules the stored text went through ('redaction:github', 'redaction:git').
CREATE TABLE ghindex_meta (
    key         VARCHAR PRIMARY KEY,   -- what the fact is about
    value       VARCHAR NOT NULL,      -- e.g. 'v2' (redaction rules version 2) or 'off'
    updated_at  TIMESTAMPTZ NOT NULL   -- when it was last set
);
