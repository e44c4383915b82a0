//! Names for what the pages hold as numbers: pids (`saved_cmdlines` and the scheduler
//! events) and kernel text addresses (`/proc/kallsyms`).

use std::fmt::Write;

use crate::trace::pid_map::PidTable;

/// pid → comm for the TASK column: `saved_cmdlines` first (what the kernel's text shows),
/// then the comms the scheduler events name. pid 0 is `<idle>`, an unknown pid `<...>`.
#[derive(Debug, Clone, Default)]
pub struct Comms {
    /// Looked up for every event decoded: a pid hash, not SipHash.
    map: PidTable<String>,
}

impl Comms {
    /// The `saved_cmdlines` text (`PID COMM` lines; others are ignored).
    pub fn from_saved_cmdlines(text: &str) -> Comms {
        let mut c = Comms::default();
        for l in text.lines() {
            if let Some((pid, comm)) = l.split_once(' ') {
                if let Ok(pid) = pid.trim().parse::<i64>() {
                    c.map.insert(pid, comm.to_string());
                }
            }
        }
        c
    }

    /// Name `pid` as `comm` unless it has a name already.
    pub fn learn(&mut self, pid: i64, comm: &str) {
        if pid > 0 && !self.map.contains_key(&pid) {
            self.map.insert(pid, comm.to_string());
        }
    }

    /// Whether `pid` has a name already.
    pub fn has(&self, pid: i64) -> bool {
        self.map.contains_key(&pid)
    }

    #[inline]
    pub fn get(&self, pid: i64) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        self.map.get(&pid).map_or("<...>", |s| s.as_str())
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// The names as a `saved_cmdlines` text (`PID COMM` lines, by pid), what a trace.dat
    /// carries for trace-cmd. Names holding a newline are left out (the format is one per line).
    pub fn to_saved_cmdlines(&self) -> String {
        let mut v: Vec<(i64, &String)> = self.map.iter().collect();
        v.sort();
        let mut s = String::new();
        for (pid, comm) in v {
            if !comm.contains('\n') {
                let _ = writeln!(s, "{pid} {comm}");
            }
        }
        s
    }
}

/// The kernel's text symbols (address → name), for `%ps` fields: hrtimer callbacks
/// (`hrtimer_wakeup` opens a sleeper's window) and NMI handlers.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    addrs: Vec<u64>,
    /// (start, end) of each name in `names`, in the order of `addrs`.
    spans: Vec<(u32, u32)>,
    names: String,
}

impl Symbols {
    /// `/proc/kallsyms` (`ADDR TYPE NAME [module]` lines): the text symbols (`t`, `T`, `w`,
    /// `W`) at a nonzero address (an unprivileged reader sees zeros: then nothing is known).
    pub fn parse_kallsyms(text: &str) -> Symbols {
        let mut v: Vec<(u64, &str)> = Vec::new();
        for l in text.lines() {
            let mut it = l.split_ascii_whitespace();
            let (Some(a), Some(t), Some(n)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(t, "t" | "T" | "w" | "W") {
                continue;
            }
            match u64::from_str_radix(a, 16) {
                Ok(a) if a != 0 => v.push((a, n)),
                _ => {}
            }
        }
        v.sort_by_key(|&(a, _)| a);
        v.dedup_by_key(|&mut (a, _)| a);
        let mut s = Symbols::default();
        for (a, n) in v {
            let start = s.names.len() as u32;
            s.names.push_str(n);
            s.addrs.push(a);
            s.spans.push((start, s.names.len() as u32));
        }
        s
    }

    /// The symbol that starts at `addr`.
    pub fn get(&self, addr: u64) -> Option<&str> {
        let i = self.addrs.binary_search(&addr).ok()?;
        let (a, b) = self.spans[i];
        Some(&self.names[a as usize..b as usize])
    }

    /// The address of `name` (a linear search: for checks, not per event).
    pub fn addr_of(&self, name: &str) -> Option<u64> {
        self.spans
            .iter()
            .position(|&(a, b)| &self.names[a as usize..b as usize] == name)
            .map(|i| self.addrs[i])
    }

    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
}
