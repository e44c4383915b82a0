//! The load profiles, as data: one table, [`PROFILES`], maps each seed's workload to the
//! commands that reproduce it today (see `notes/loads.md` for how each was verified).
//!
//! A profile is a list of *parts*; each part is one shell script that the supervisor runs in
//! its own process group and restarts whenever it exits, so the scripts themselves do not loop.
//! Scripts are templates: `{N}` is the number of online CPUs (or of `--load-cpus`), `{N1}` is
//! N+1, `{N2}` 2N, `{N4}` 4N, `{DIR}` the part's scratch directory, `{SRC}` the C tree to
//! compile, `{T}` a stress-ng timeout in seconds (0 = none: the supervisor stops it), `{PORT}`
//! a per-run TCP/UDP port base, `{WMB}`/`{RMB}` write/read file sizes in MiB scaled to the free
//! space, `{DDMB}` the M02 `dd` size, `{DBT}` a dbench run time.

/// An executable a profile needs, and the Debian package that provides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub bin: &'static str,
    pub package: &'static str,
}

/// Where a part's throughput (the record's `ops`) comes from: the most honest source for
/// each tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The tool's own report in the part's log: stress-ng `--metrics-brief` bogo-ops/s,
    /// hackbench s/iteration, dbench MB/s.
    Log,
    /// Storage bytes written per second, as the kernel accounted them to the part's processes
    /// (`/proc/<pid>/io` and wait4's rusage): dd is stopped with SIGTERM and reports nothing.
    IoWrite,
    /// Storage bytes read per second, as [`Metric::IoWrite`].
    IoRead,
    /// Iterations that ran to the end (exit 0) per second: a build + clean, a whole script.
    Iterations,
}

impl Metric {
    /// Name in the record (`details.ops_source`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Metric::Log => "log",
            Metric::IoWrite => "kernel-io-write",
            Metric::IoRead => "kernel-io-read",
            Metric::Iterations => "iterations",
        }
    }
}

/// One supervised command of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub name: &'static str,
    /// `/bin/sh -c` script template (see the module docs for the placeholders).
    pub script: &'static str,
    /// Where its throughput comes from.
    pub metric: Metric,
    /// Account the part's I/O from the kernel (`/proc/<pid>/io` of its processes, sampled by
    /// the supervisor) and record MB/s read and written.
    pub io: bool,
}

/// A built-in load profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    /// What the profile models, and which seed it comes from.
    pub models: &'static str,
    pub parts: &'static [Part],
    pub tools: &'static [Tool],
    /// Scratch space the profile needs, MiB (checked before anything starts).
    pub scratch_mb: u64,
    /// True when a part compiles `{SRC}` (the generated tree unless `--load-src`).
    pub compiles: bool,
    /// How it stops (documentation for `loads list` and the record).
    pub stops: &'static str,
}

const STRESS_NG: Tool = Tool {
    bin: "stress-ng",
    package: "stress-ng",
};
const HACKBENCH: Tool = Tool {
    bin: "hackbench",
    package: "rt-tests",
};
const DBENCH: Tool = Tool {
    bin: "dbench",
    package: "dbench",
};
const MAKE: Tool = Tool {
    bin: "make",
    package: "make",
};
const CC: Tool = Tool {
    bin: "cc",
    package: "gcc",
};
const TAR: Tool = Tool {
    bin: "tar",
    package: "tar",
};
const GZIP: Tool = Tool {
    bin: "gzip",
    package: "gzip",
};
const DD: Tool = Tool {
    bin: "dd",
    package: "coreutils",
};

/// The compile part shared by stress-kernel and mini-ll: build, then clean (M02's
/// `make -j3 bzImage; make clean`, scaled to N+1 jobs).
const COMPILE: &str = "make -s -C {SRC} -j{N1} {TARGET} && make -s -C {SRC} clean";

/// Every built-in profile. `cmd:<command>` is handled by [`resolve`].
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "idle",
        models: "baseline: no load",
        parts: &[],
        tools: &[],
        scratch_mb: 0,
        compiles: false,
        stops: "nothing runs",
    },
    Profile {
        name: "stress-kernel",
        models: "W02 Red Hat stress-kernel: compile, loopback TCP/UDP, fifo+mmap, FPU matrix, fs holes/truncate, crashme-style opcodes",
        parts: &[
            Part { name: "compile", script: COMPILE, metric: Metric::Iterations, io: false },
            Part {
                name: "stress-ng",
                script: "stress-ng --temp-path {DIR} --sock 1 --sock-port {PORT} --udp 1 --udp-port {PORT2} --fifo 1 --mmap 1 --mmap-file --mmap-bytes 64M --matrix {N} --hdd 1 --hdd-bytes 1G --fallocate 1 --fallocate-bytes 256M --fpunch 1 --opcode 1 --timeout {T}s --metrics-brief",
                metric: Metric::Log,
                io: true,
            },
        ],
        tools: &[STRESS_NG, MAKE, CC],
        scratch_mb: 1800,
        compiles: true,
        stops: "SIGTERM to the group; opcode children may need SIGKILL/cgroup.kill",
    },
    Profile {
        name: "mini-ll",
        models: "M02 Morton's script: make -j3 + clean, tar x + rm, dd 400 MB + rm, dbench 40",
        parts: &[Part {
            name: "script",
            script: "make -s -C {SRC} -j{N1} {TARGET} && make -s -C {SRC} clean; \
                     tar czf {DIR}/src.tgz -C {SRC} . && mkdir -p {DIR}/untar && tar xzf {DIR}/src.tgz -C {DIR}/untar; rm -rf {DIR}/untar {DIR}/src.tgz; \
                     dd if=/dev/zero of={DIR}/foo bs=1M count={DDMB}; rm -f {DIR}/foo; \
                     mkdir -p {DIR}/db && dbench -D {DIR}/db -t {DBT} 40; rm -rf {DIR}/db; sync",
            metric: Metric::Iterations,
            io: true,
        }],
        tools: &[DBENCH, MAKE, CC, TAR, GZIP, DD],
        scratch_mb: 1500,
        compiles: true,
        stops: "SIGTERM to the group, then the scratch directory is removed (dbench leaves clients/)",
    },
    Profile {
        name: "rcu-dentry",
        models: "R04 RCU mail: dbench 32 loop plus dentry/rename churn (dentry frees are RCU callbacks)",
        parts: &[
            Part { name: "dbench", script: "mkdir -p {DIR}/db && dbench -D {DIR}/db -t {DBT} 32", metric: Metric::Log, io: true },
            Part {
                name: "stress-ng",
                script: "stress-ng --temp-path {DIR} --dentry {N} --dentries 4096 --rename {N} --dir 1 --timeout {T}s --metrics-brief",
                metric: Metric::Log,
                io: false,
            },
        ],
        tools: &[DBENCH, STRESS_NG],
        scratch_mb: 1000,
        compiles: false,
        stops: "SIGTERM, then the scratch directory is removed (dbench leaves ~700 MB)",
    },
    Profile {
        name: "hackbench",
        models: "E17 ELC 2017: hackbench -s 512 -l 1024 -P in a loop (400 processes on socketpairs)",
        parts: &[Part { name: "hackbench", script: "hackbench -s 512 -l 1024 -P", metric: Metric::Log, io: false }],
        tools: &[HACKBENCH],
        scratch_mb: 0,
        compiles: false,
        stops: "SIGTERM; hackbench forwards it to its workers",
    },
    Profile {
        name: "stress-cpu",
        models: "E17 'stress --cpu 3' on 2 cores: N+1 CPU hogs (wake-up on an overloaded core)",
        parts: &[Part { name: "stress-ng", script: "stress-ng --cpu {N1} --timeout {T}s --metrics-brief", metric: Metric::Log, io: false }],
        tools: &[STRESS_NG],
        scratch_mb: 0,
        compiles: false,
        stops: "--timeout or SIGTERM",
    },
    Profile {
        name: "stress-cpu8",
        models: "E17 'stress --cpu 8' on 2 cores: 4N CPU hogs",
        parts: &[Part { name: "stress-ng", script: "stress-ng --cpu {N4} --timeout {T}s --metrics-brief", metric: Metric::Log, io: false }],
        tools: &[STRESS_NG],
        scratch_mb: 0,
        compiles: false,
        stops: "--timeout or SIGTERM",
    },
    Profile {
        name: "stress-mix",
        models: "E17 'stress --cpu 4 --io 2 --vm 2 --vm-bytes 128M' plus netperf (loopback sockets stand in)",
        parts: &[Part {
            name: "stress-ng",
            script: "stress-ng --temp-path {DIR} --cpu {N2} --io {N} --vm {N} --vm-bytes 128M --sock 1 --sock-port {PORT} --timeout {T}s --metrics-brief",
            metric: Metric::Log,
            io: false,
        }],
        tools: &[STRESS_NG],
        scratch_mb: 0,
        compiles: false,
        stops: "SIGTERM",
    },
    Profile {
        name: "net-loopback",
        models: "W02 TTCP / E17 netperf: TCP and UDP over loopback (NET_RX softirq)",
        parts: &[Part {
            name: "stress-ng",
            script: "stress-ng --sock {N} --sock-port {PORT} --udp {N} --udp-port {PORT2} --timeout {T}s --metrics-brief",
            metric: Metric::Log,
            io: false,
        }],
        tools: &[STRESS_NG],
        scratch_mb: 0,
        compiles: false,
        stops: "SIGTERM",
    },
    Profile {
        name: "io-write",
        models: "L03 streaming write: dd of a large file in a loop (writes starving reads)",
        parts: &[Part { name: "dd", script: "dd if=/dev/zero of={DIR}/stream bs=1M count={WMB}; rm -f {DIR}/stream", metric: Metric::IoWrite, io: true }],
        tools: &[DD],
        scratch_mb: 512,
        compiles: false,
        stops: "SIGTERM to the group; the file is removed with the scratch directory",
    },
    Profile {
        name: "io-read",
        models: "L03 streaming read: O_DIRECT dd of a large file in a loop (the page cache cannot absorb it)",
        parts: &[Part {
            name: "dd",
            script: "[ -f {DIR}/big ] || { dd if=/dev/zero of={DIR}/big.tmp bs=1M count={RMB} status=none && sync && mv {DIR}/big.tmp {DIR}/big; } && dd if={DIR}/big of=/dev/null bs=1M iflag=direct",
            metric: Metric::IoRead,
            io: true,
        }],
        tools: &[DD],
        scratch_mb: 512,
        compiles: false,
        stops: "SIGTERM",
    },
    Profile {
        name: "proc-stress",
        models: "Senoner's '/proc stress': readers of procfs files",
        parts: &[Part { name: "stress-ng", script: "stress-ng --procfs {N} --timeout {T}s --metrics-brief", metric: Metric::Log, io: false }],
        tools: &[STRESS_NG],
        scratch_mb: 0,
        compiles: false,
        stops: "SIGTERM",
    },
];

impl Profile {
    /// True when a part writes files: it needs the per-run scratch directory (`{DIR}`), even
    /// with `scratch_mb` 0 (stress-ng's `--temp-path` aborts on an empty path).
    pub fn needs_scratch(&self) -> bool {
        self.scratch_mb > 0
            || self.compiles
            || self.parts.iter().any(|p| p.script.contains("{DIR}"))
    }
}

/// Look up a built-in profile by name.
pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Names of every profile, for error messages.
pub fn known_names() -> String {
    let mut v: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
    v.push("cmd:<command>");
    v.join(", ")
}

/// Values substituted into a profile's scripts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    /// CPUs the loads may use.
    pub n: u32,
    /// stress-ng timeout in seconds (0: none).
    pub timeout_s: u64,
    pub dir: String,
    pub src: String,
    /// `make` target (`bzImage` for a kernel tree, empty for the generated one).
    pub target: String,
    pub port: u16,
    /// Free space of the scratch filesystem, MiB (sizes are capped by it).
    pub free_mb: u64,
}

impl Scale {
    /// The script with every placeholder replaced.
    pub fn expand(&self, template: &str) -> String {
        let n = self.n.max(1) as u64;
        // Sizes follow the notes (4 GiB stream, 2 GiB read file, M02's 400 MB dd), capped
        // to a fraction of the free space so several profiles fit side by side.
        let wmb = (self.free_mb / 4).clamp(64, 4096);
        let rmb = (self.free_mb / 8).clamp(64, 2048);
        let ddmb = (self.free_mb / 8).clamp(16, 400);
        let dbt = if self.timeout_s == 0 {
            60
        } else {
            self.timeout_s.min(60)
        };
        let pairs: [(&str, String); 14] = [
            ("{N1}", (n + 1).to_string()),
            ("{N2}", (2 * n).to_string()),
            ("{N4}", (4 * n).to_string()),
            ("{N}", n.to_string()),
            ("{T}", self.timeout_s.to_string()),
            ("{DIR}", shell_quote(&self.dir)),
            ("{SRC}", shell_quote(&self.src)),
            ("{TARGET}", self.target.clone()),
            ("{PORT2}", (self.port as u32 + 64).to_string()),
            ("{PORT}", self.port.to_string()),
            ("{WMB}", wmb.to_string()),
            ("{RMB}", rmb.to_string()),
            ("{DDMB}", ddmb.to_string()),
            ("{DBT}", dbt.to_string()),
        ];
        let mut s = template.to_string();
        for (k, v) in pairs {
            s = s.replace(k, &v);
        }
        // `make -C x -j3 ` with an empty target leaves a double space: harmless, but the
        // recorded command should read as typed.
        while s.contains("  ") {
            s = s.replace("  ", " ");
        }
        s
    }
}

/// Quote for `/bin/sh` when needed (paths with spaces).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A profile name resolved: a built-in, or an arbitrary command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    Builtin(&'static Profile),
    Command(String),
}

impl Resolved {
    pub fn name(&self) -> String {
        match self {
            Resolved::Builtin(p) => p.name.to_string(),
            Resolved::Command(c) => format!("cmd:{c}"),
        }
    }
}

/// Why a profile cannot run here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown load profile '{name}'{hint}; known profiles: {known}")]
    Unknown {
        name: String,
        /// " (did you mean 'X'?)" when a profile is a typo away, else empty.
        hint: String,
        known: String,
    },
    #[error("load 'cmd:' needs a command, e.g. --load 'cmd:make -j3 -C ~/src/linux'")]
    EmptyCommand,
    #[error("{bin} not found: apt-get install {package}")]
    MissingTool { bin: String, package: String },
    #[error("{bin} (from load '{load}') not found: install it or fix PATH")]
    MissingCommand { bin: String, load: String },
}

/// Resolve a `--load` argument.
pub fn resolve(name: &str) -> Result<Resolved, ProfileError> {
    if let Some(c) = name.strip_prefix("cmd:") {
        let c = c.trim();
        if c.is_empty() {
            return Err(ProfileError::EmptyCommand);
        }
        return Ok(Resolved::Command(c.to_string()));
    }
    find(name)
        .map(Resolved::Builtin)
        .ok_or_else(|| ProfileError::Unknown {
            name: name.to_string(),
            hint: latlab_core::suggest::closest(name, PROFILES.iter().map(|p| p.name))
                .map(|p| format!(" (did you mean '{p}'?)"))
                .unwrap_or_default(),
            known: known_names(),
        })
}

/// Find an executable on `path` (a `PATH`-style list), as the shell would.
pub fn which_in(bin: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if bin.contains('/') {
        let p = std::path::PathBuf::from(bin);
        return is_exec(&p).then_some(p);
    }
    std::env::split_paths(path)
        .map(|d| d.join(bin))
        .find(|p| is_exec(p))
}

/// Find an executable on this process's `PATH`.
pub fn which(bin: &str) -> Option<std::path::PathBuf> {
    which_in(bin, &std::env::var_os("PATH").unwrap_or_default())
}

/// Shell words that are not programs: a `cmd:` starting with one is not checked.
const SHELL_WORDS: &[&str] = &[
    "while", "for", "until", "if", "case", "{", "(", "!", "exec", "cd", "true", "false", ":",
    "export", "set", "eval", "[", "test", "echo", "trap",
];

/// Check that every tool of a resolved profile is installed (PATH lookup).
pub fn check_tools(r: &Resolved) -> Result<(), ProfileError> {
    match r {
        Resolved::Builtin(p) => {
            for t in p.tools {
                if which(t.bin).is_none() {
                    return Err(ProfileError::MissingTool {
                        bin: t.bin.into(),
                        package: t.package.into(),
                    });
                }
            }
            Ok(())
        }
        Resolved::Command(c) => {
            // The first word after any VAR=value assignments.
            let first = c
                .split_whitespace()
                .find(|w| !w.contains('=') || w.starts_with('='))
                .unwrap_or("");
            let first = first.trim_start_matches('(');
            if first.is_empty()
                || SHELL_WORDS.contains(&first)
                || first.contains(['$', '`', '\'', '"'])
            {
                return Ok(());
            }
            match which(first) {
                Some(_) => Ok(()),
                None => Err(ProfileError::MissingCommand {
                    bin: first.into(),
                    load: format!("cmd:{c}"),
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// stress-mix used `--temp-path {DIR}` without asking for scratch space: `{DIR}` expanded
    /// to '' and stress-ng aborted at every restart.
    #[test]
    fn profiles_that_use_dir_need_scratch() {
        assert!(find("stress-mix").unwrap().needs_scratch());
        assert!(!find("stress-cpu").unwrap().needs_scratch());
        assert!(!find("idle").unwrap().needs_scratch());
    }

    fn scale() -> Scale {
        Scale {
            n: 2,
            timeout_s: 30,
            dir: "/var/tmp/x".into(),
            src: "/var/tmp/x/src".into(),
            target: String::new(),
            port: 31000,
            free_mb: 80_000,
        }
    }

    #[test]
    fn every_placeholder_is_expanded() {
        for p in PROFILES {
            for part in p.parts {
                let s = scale().expand(part.script);
                assert!(!s.contains('{') || s.contains("{ dd"), "{}: {s}", p.name);
                assert!(
                    !s.contains("{N") && !s.contains("{T}") && !s.contains("{DIR}"),
                    "{s}"
                );
            }
        }
    }

    #[test]
    fn commands_scale_with_cpus() {
        let s = scale().expand(find("stress-cpu").unwrap().parts[0].script);
        assert_eq!(s, "stress-ng --cpu 3 --timeout 30s --metrics-brief");
        let mut sc = scale();
        sc.n = 8;
        let s = sc.expand(find("stress-mix").unwrap().parts[0].script);
        assert!(s.contains("--cpu 16 --io 8 --vm 8"), "{s}");
        let s = scale().expand(COMPILE);
        assert_eq!(
            s,
            "make -s -C /var/tmp/x/src -j3 && make -s -C /var/tmp/x/src clean"
        );
    }

    #[test]
    fn sizes_follow_free_space() {
        let mut sc = scale();
        sc.free_mb = 1000;
        let s = sc.expand(find("io-write").unwrap().parts[0].script);
        assert!(s.contains("count=250"), "{s}");
        sc.free_mb = 1_000_000;
        let s = sc.expand(find("io-write").unwrap().parts[0].script);
        assert!(s.contains("count=4096"), "{s}");
    }

    #[test]
    fn resolve_names() {
        assert_eq!(resolve("idle").unwrap().name(), "idle");
        assert_eq!(
            resolve("cmd: sleep 1").unwrap(),
            Resolved::Command("sleep 1".into())
        );
        assert_eq!(resolve("cmd:  "), Err(ProfileError::EmptyCommand));
        let e = resolve("stress").unwrap_err().to_string();
        assert!(
            e.contains("unknown load profile 'stress'")
                && e.contains("hackbench")
                && e.contains("cmd:<command>"),
            "{e}"
        );
        // The minimum set.
        for n in [
            "stress-kernel",
            "mini-ll",
            "rcu-dentry",
            "hackbench",
            "stress-cpu",
            "stress-mix",
            "net-loopback",
            "io-write",
            "io-read",
            "proc-stress",
            "idle",
        ] {
            assert!(find(n).is_some(), "{n}");
        }
    }

    #[test]
    fn which_uses_the_given_path() {
        let d = tempfile::tempdir().unwrap();
        assert!(which_in("sh", d.path().as_os_str()).is_none());
        assert!(which_in("sh", std::ffi::OsStr::new("/bin:/usr/bin")).is_some());
        assert!(which_in("/bin/sh", d.path().as_os_str()).is_some());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/a/b"), "/a/b");
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    }
}
