//! The tracefs flight recorder (not written yet).
