//! An event body's fields: `key=value` lookups (in the kernel's order first), a comm between
//! two keys, trace-cmd's compact task.

use std::borrow::Cow;

use crate::trace::bytes::{eq_short, find_byte, parse_i64, parse_u64, rfind_sub, strip};

use super::TaskRef;

/// `key=value` lookup in a body where values have no spaces (tokens split on spaces; a
/// leading `[` as in `[action=SCHED]` is allowed).
pub(super) fn kv<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    // Same answer as splitting on ' ' and taking the first token `key=…` (or `[key=…`), found
    // from the '=' signs instead: no per-token work.
    let (b, k) = (body.as_bytes(), key.as_bytes());
    // Bodies are short: a plain loop beats memchr's set-up here.
    for eq in (0..b.len()).filter(|&i| b[i] == b'=') {
        let Some(at) = eq.checked_sub(k.len()) else {
            continue;
        };
        if !eq_short(&b[at..eq], k) {
            continue;
        }
        let boundary =
            at == 0 || b[at - 1] == b' ' || (b[at - 1] == b'[' && (at == 1 || b[at - 2] == b' '));
        if !boundary {
            continue;
        }
        let end = b[eq + 1..]
            .iter()
            .position(|&c| c == b' ')
            .map_or(b.len(), |p| eq + 1 + p);
        let v = &body[eq + 1..end];
        return Some(v.strip_suffix(']').unwrap_or(v));
    }
    None
}

/// Reads a body's `key=value` fields in the order the kernel prints them (the fast path), and
/// answers exactly as [`kv`] on the whole body whenever the next token is not the key asked
/// for. Values have no spaces, so a key found as the next token is also its first occurrence.
pub(super) struct Fields<'a> {
    whole: &'a str,
    rest: &'a str,
}

impl<'a> Fields<'a> {
    pub(super) fn new(body: &'a str) -> Fields<'a> {
        Fields {
            whole: body,
            rest: body,
        }
    }

    pub(super) fn get(&mut self, key: &str) -> Option<&'a str> {
        let r = self.rest.strip_prefix('[').unwrap_or(self.rest);
        if let Some(v) = strip(r, key).and_then(|v| v.strip_prefix('=')) {
            let end = find_byte(v.as_bytes(), b' ').unwrap_or(v.len());
            self.rest = &v[end..];
            self.rest = self.rest.strip_prefix(' ').unwrap_or(self.rest);
            let v = &v[..end];
            return Some(v.strip_suffix(']').unwrap_or(v));
        }
        kv(self.whole, key)
    }

    pub(super) fn str(&mut self, key: &str) -> Result<&'a str, String> {
        self.get(key).ok_or_else(|| format!("no {key}= field"))
    }

    pub(super) fn i(&mut self, key: &str) -> Result<i64, String> {
        let v = self.str(key)?;
        parse_i64(v).ok_or_else(|| format!("{key}={v:?} is not an integer"))
    }

    pub(super) fn u(&mut self, key: &str) -> Result<u64, String> {
        let v = self.str(key)?;
        parse_u64(v).ok_or_else(|| format!("{key}={v:?} is not an integer"))
    }
}

/// `prev_comm=A B prev_pid=…`: the comm is what lies between `X=` and the LAST ` next_key=`.
pub(super) fn comm_between<'a>(
    s: &'a str,
    start_key: &str,
    end_key: &str,
) -> Result<(&'a str, &'a str), String> {
    let v = strip(s, start_key).ok_or_else(|| format!("expected {start_key}"))?;
    let p = rfind_sub(v, end_key).ok_or_else(|| format!("no{end_key}field"))?;
    Ok((&v[..p], &v[p + 1..]))
}

/// trace-cmd's compact task: `comm:pid [prio]` (comm may hold ':').
pub(super) fn compact_task(s: &str) -> Result<TaskRef<'_>, String> {
    let s = s.trim();
    let open = rfind_sub(s, " [").ok_or("expected 'comm:pid [prio]'")?;
    let prio = s[open + 2..]
        .trim_end()
        .strip_suffix(']')
        .and_then(parse_i64)
        .ok_or("bad [prio]")?;
    let cp = &s[..open];
    let colon = cp.rfind(':').ok_or("expected comm:pid")?;
    let pid = parse_i64(&cp[colon + 1..]).ok_or("bad pid")?;
    Ok(TaskRef {
        comm: Cow::Borrowed(&cp[..colon]),
        pid,
        prio,
    })
}

pub(super) fn strip_fn(f: &str) -> &str {
    f.split('/').next().unwrap_or(f)
}

/// `find_sub(body, " ==> ")`, searching for the rare '>' instead of the many spaces.
pub(super) fn find_arrow(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'>', &b[i..]) {
        let gt = i + p;
        if gt >= 3 && b.get(gt - 3..gt + 2) == Some(b" ==> ") {
            return Some(gt - 3);
        }
        i = gt + 1;
    }
    None
}
