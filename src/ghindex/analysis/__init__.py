"""Analysis for people: Parquet export, the HTML report, and the schema's documentation."""
