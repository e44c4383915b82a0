//! Trace parsing and attribution (not written yet).
