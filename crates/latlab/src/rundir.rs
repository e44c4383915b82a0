//! The run directory.
