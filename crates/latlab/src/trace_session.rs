//! Glue between `latlab run` and the tracefs recorder (not written yet).
