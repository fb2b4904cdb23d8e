"""Raw logs -> a validated, labelled step table: schema, adapters, ingest, redaction,
validation, verifiers, relabel and coverage."""
