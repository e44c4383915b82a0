//! Machine inventory readers (not written yet).
