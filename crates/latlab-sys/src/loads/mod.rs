//! Load profiles and supervision (not written yet).
