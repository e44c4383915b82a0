//! procfs activity snapshots (not written yet).
