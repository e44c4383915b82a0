//! The tables a run adds beyond the latency statistics — a mode's (wakeup pairs, execution
//! time, audio deadlines: the `modes` module) and a scenario's (fairness, io-read: the
//! `scenario` module), gathered by `extra` — as plain cells, so text, markdown and html lay
//! out the same tables with one function each and none of them reads the record's details
//! itself. This module is the leaf the others build on: it names them without a path, so it
//! depends on none of them.

/// One table: a title, a header, rows, and an optional sentence below it. Cells are plain
/// text; each renderer escapes them for its format.
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub note: Option<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            note: None,
        }
    }
}
