//! Findings about the machine (not written yet).
