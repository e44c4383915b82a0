//! The inventory's reader: files below the root, each missing, unreadable or invalid one
//! noted once, and the typed reads (a line, a number, a 0/1 flag, a CPU list) built on them.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use latlab_core::cpulist::parse_cpu_list;
use latlab_core::inventory::Invalid;

pub(super) struct Reader {
    pub(super) root: PathBuf,
    pub(super) live: bool,
    pub(super) unreadable: BTreeSet<String>,
    pub(super) invalid: Vec<Invalid>,
}

/// How much a missing file matters.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Need {
    /// Every Linux kernel has it: missing is reported.
    Required,
    /// Absent on some kernels or machines: missing is silent.
    Optional,
}
use Need::*;

impl Reader {
    pub(super) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub(super) fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// The file's text; None (and a note in `unreadable` when it matters) when it cannot be read.
    pub(super) fn read(&mut self, rel: &str, need: Need) -> Option<String> {
        match fs::read(self.path(rel)) {
            Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            Err(e) if e.kind() == io::ErrorKind::NotFound && need == Optional => None,
            Err(_) => {
                self.unreadable.insert(format!("/{rel}"));
                None
            }
        }
    }

    /// The trimmed first line, or None when empty.
    pub(super) fn line(&mut self, rel: &str, need: Need) -> Option<String> {
        let s = self.read(rel, need)?;
        let l = s.lines().next().unwrap_or("").trim().to_string();
        (!l.is_empty()).then_some(l)
    }

    pub(super) fn bad(&mut self, rel: &str, value: &str, expected: &str) {
        // One finding per file: its id is `invalid:<path>`.
        if self.invalid.iter().any(|i| i.path[1..] == *rel) {
            return;
        }
        self.invalid.push(Invalid {
            path: format!("/{rel}"),
            value: value.chars().take(80).collect(),
            expected: expected.into(),
        });
    }

    pub(super) fn num<T: FromStr>(&mut self, rel: &str, need: Need) -> Option<T> {
        let s = self.read(rel, need)?;
        match s.trim().parse() {
            Ok(v) => Some(v),
            Err(_) => {
                self.bad(rel, s.trim(), "a number");
                None
            }
        }
    }

    pub(super) fn flag(&mut self, rel: &str, need: Need) -> Option<bool> {
        match self.num::<i64>(rel, need)? {
            0 => Some(false),
            1 => Some(true),
            v => {
                self.bad(rel, &v.to_string(), "0 or 1");
                None
            }
        }
    }

    pub(super) fn cpulist(&mut self, rel: &str, need: Need) -> Option<Vec<u32>> {
        let s = self.read(rel, need)?;
        Some(self.parse_cpulist(rel, &s))
    }

    /// The CPUs of a CPU-list file's text; none (and a note in `invalid`) when it is not one.
    pub(super) fn parse_cpulist(&mut self, rel: &str, s: &str) -> Vec<u32> {
        parse_cpu_list(s.trim()).unwrap_or_else(|_| {
            self.bad(rel, s.trim(), "a CPU list such as 0-3,6");
            vec![]
        })
    }
}
