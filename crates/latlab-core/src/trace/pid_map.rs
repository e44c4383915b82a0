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
