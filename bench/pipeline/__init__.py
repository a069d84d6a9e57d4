"""The Spark pipeline: ingest rate and the availability job."""
