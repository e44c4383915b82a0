//! Maps keyed by pid, with a hash fit for them: the analyzer and its naming rules look a pid
//! up for almost every event.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Multiplicative hash for pid keys: the analyzer looks a pid up for almost every event, and
/// SipHash's DoS resistance buys nothing for a trace file.
#[derive(Default)]
pub(super) struct PidHasher(u64);

impl std::hash::Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_i64(&mut self, n: i64) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(super) type PidMap<V> = HashMap<i64, V, BuildHasherDefault<PidHasher>>;

/// pid → value for the maps looked up for nearly every event (the analyzer's names and
/// priorities, the decoder's TASK column): pids below [`PidTable::NEAR`] (the kernel's
/// largest `pid_max`) index pages of [`PidTable::PAGE`] slots, made when first written, so a
/// look-up is two loads and no hash; other keys (negative, or beyond: a damaged trace) go to
/// a [`PidMap`]. Not iterable: no result depends on an order.
pub(super) struct PidTable<V> {
    pages: Vec<Option<Box<[Option<V>]>>>,
    far: PidMap<V>,
    len: usize,
}

impl<V> Default for PidTable<V> {
    fn default() -> Self {
        PidTable {
            pages: Vec::new(),
            far: PidMap::default(),
            len: 0,
        }
    }
}

impl<V: Clone + std::fmt::Debug> std::fmt::Debug for PidTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PidTable").field("len", &self.len).finish()
    }
}

impl<V: Clone> Clone for PidTable<V> {
    fn clone(&self) -> Self {
        PidTable {
            pages: self.pages.clone(),
            far: self.far.clone(),
            len: self.len,
        }
    }
}

impl<V> PidTable<V> {
    const NEAR: i64 = 1 << 22;
    const PAGE: usize = 1 << 10;

    /// The page and slot of a near pid.
    #[inline]
    fn at(pid: i64) -> Option<(usize, usize)> {
        (0..Self::NEAR).contains(&pid).then(|| {
            let p = pid as usize;
            (p / Self::PAGE, p % Self::PAGE)
        })
    }

    #[inline]
    pub(super) fn get(&self, pid: &i64) -> Option<&V> {
        match Self::at(*pid) {
            Some((p, s)) => self.pages.get(p)?.as_ref()?[s].as_ref(),
            None => self.far.get(pid),
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, pid: &i64) -> Option<&mut V> {
        match Self::at(*pid) {
            Some((p, s)) => self.pages.get_mut(p)?.as_mut()?[s].as_mut(),
            None => self.far.get_mut(pid),
        }
    }

    #[inline]
    pub(super) fn contains_key(&self, pid: &i64) -> bool {
        self.get(pid).is_some()
    }

    /// Set `pid`'s value; the value it had.
    pub(super) fn insert(&mut self, pid: i64, v: V) -> Option<V> {
        let old = match Self::at(pid) {
            Some((p, s)) => {
                if p >= self.pages.len() {
                    self.pages.resize_with(p + 1, || None);
                }
                let page =
                    self.pages[p].get_or_insert_with(|| (0..Self::PAGE).map(|_| None).collect());
                page[s].replace(v)
            }
            None => self.far.insert(pid, v),
        };
        self.len += usize::from(old.is_none());
        old
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Every (pid, value), in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (i64, &V)> {
        let near = self.pages.iter().enumerate().flat_map(|(p, page)| {
            page.iter().flat_map(move |slots| {
                slots
                    .iter()
                    .enumerate()
                    .filter_map(move |(s, v)| Some(((p * Self::PAGE + s) as i64, v.as_ref()?)))
            })
        });
        near.chain(self.far.iter().map(|(k, v)| (*k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table answers as a map does, near and far pids alike.
    #[test]
    fn pid_table_is_a_map() {
        let mut t: PidTable<u32> = PidTable::default();
        let mut m: PidMap<u32> = PidMap::default();
        let pids = [
            0,
            1,
            1023,
            1024,
            32768,
            (1 << 22) - 1,
            1 << 22,
            -1,
            i64::MAX,
            5,
            1,
        ];
        for (i, &p) in pids.iter().enumerate() {
            assert_eq!(t.insert(p, i as u32), m.insert(p, i as u32), "{p}");
            assert_eq!(t.len(), m.len());
        }
        for p in pids.iter().chain(&[2, 1025, 40000, -2]) {
            assert_eq!(t.get(p), m.get(p), "{p}");
            assert_eq!(t.contains_key(p), m.contains_key(p));
        }
        *t.get_mut(&1024).unwrap() += 1;
        *m.get_mut(&1024).unwrap() += 1;
        let mut a: Vec<_> = t.iter().map(|(k, v)| (k, *v)).collect();
        let mut b: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}
