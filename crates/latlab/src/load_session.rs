//! Glue between `latlab run` and the load supervisor (not written yet).
