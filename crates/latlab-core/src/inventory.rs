//! Machine inventory types (not written yet).
