//! The watched threads (latlab's measuring threads): their wake-up and switch-in intervals
//! and run-queue waits, each kind over the whole profile and per bucket of time.

use super::record::MeasuringKind;
use super::wait_hist::WaitHist;
use super::{Profiler, MAX_TIME_BUCKETS, MAX_WATCHED};

/// One kind of a watched thread's values: all of them, the current time bucket's, and the
/// finished buckets' max and p99.
pub(super) struct KindAcc {
    pub(super) all: WaitHist,
    pub(super) cur: WaitHist,
    pub(super) cur_bucket: u64,
    pub(super) max: Vec<Option<u64>>,
    p99: Vec<Option<u64>>,
}

impl KindAcc {
    pub(super) fn new() -> KindAcc {
        KindAcc {
            all: WaitHist::new(),
            cur: WaitHist::new(),
            cur_bucket: 0,
            max: Vec::new(),
            p99: Vec::new(),
        }
    }

    /// Close the current bucket (its values go to position `cur_bucket`).
    pub(super) fn flush(&mut self) {
        if self.cur.n == 0 {
            return;
        }
        let i = self.cur_bucket as usize;
        if self.max.len() <= i {
            self.max.resize(i + 1, None);
            self.p99.resize(i + 1, None);
        }
        // The slot may hold a merged bucket's values already (after a halving).
        self.max[i] = self.max[i].max(Some(self.cur.max));
        self.p99[i] = self.p99[i].max(self.cur.quantile(0.99));
        self.cur.clear();
    }

    /// Two buckets become one (the larger max and p99).
    pub(super) fn halve(&mut self) {
        fn pairs(v: &[Option<u64>]) -> Vec<Option<u64>> {
            v.chunks(2)
                .map(|p| p.iter().flatten().copied().max())
                .collect()
        }
        self.max = pairs(&self.max);
        self.p99 = pairs(&self.p99);
        self.cur_bucket /= 2;
    }

    pub(super) fn record(&self) -> MeasuringKind {
        MeasuringKind {
            count: self.all.n,
            p50_ns: self.all.quantile(0.5),
            p99_ns: self.all.quantile(0.99),
            max_ns: (self.all.n > 0).then_some(self.all.max),
            hist: self.all.nonempty(),
            max_over_time: self.max.clone(),
            p99_over_time: self.p99.clone(),
        }
    }
}

pub(super) const K_WAKE: usize = 0;
pub(super) const K_SWITCH: usize = 1;
pub(super) const K_RQ: usize = 2;

pub(super) struct Watched {
    pub(super) cpu: u32,
    pub(super) tid: i64,
    pub(super) last_wake: Option<u64>,
    pub(super) last_in: Option<u64>,
    pub(super) wakeups: u64,
    pub(super) switch_ins: u64,
    pub(super) preemptions: u64,
    /// The task switched to at each preemption: pid → count.
    pub(super) preemptors: std::collections::HashMap<i64, u64>,
    pub(super) kinds: [KindAcc; 3],
}

impl Profiler {
    /// Watch thread `tid` (latlab's measuring thread of `cpu`) from its next event on: the
    /// time between its wake-ups, between its switch-ins, and its run-queue waits. Ignored
    /// past [`MAX_WATCHED`] or when already watched.
    pub fn watch(&mut self, tid: i64, cpu: u32) {
        if tid <= 0 || self.watch_of.contains_key(&tid) || self.watched.len() >= MAX_WATCHED {
            return;
        }
        self.watch_of.insert(tid, self.watched.len());
        self.watched.push(Watched {
            cpu,
            tid,
            last_wake: None,
            last_in: None,
            wakeups: 0,
            switch_ins: 0,
            preemptions: 0,
            preemptors: std::collections::HashMap::new(),
            kinds: [KindAcc::new(), KindAcc::new(), KindAcc::new()],
        });
    }

    /// Add `v` at time `ts` to kind `k` of watched thread `w`.
    pub(super) fn watch_add(&mut self, w: usize, k: usize, ts: u64, v: u64) {
        let mut b = ts.saturating_sub(self.start_ns) / self.bucket_ns;
        while b >= MAX_TIME_BUCKETS as u64 {
            self.bucket_ns *= 2;
            b /= 2;
            for x in &mut self.watched {
                for k in &mut x.kinds {
                    k.flush();
                    k.halve();
                }
            }
        }
        let k = &mut self.watched[w].kinds[k];
        if b != k.cur_bucket {
            k.flush();
            k.cur_bucket = b;
        }
        k.all.add(v);
        k.cur.add(v);
    }
}
