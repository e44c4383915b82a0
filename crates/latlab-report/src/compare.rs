//! Comparison of runs (not written yet).
