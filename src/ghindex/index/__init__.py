"""The index: documents derived from the state, chunked, embedded and written to the
Lance `chunks` table (vectors plus a full-text index); `build` runs these stages and
`merge` joins workdirs built apart."""
