//! Everything latlab prints on stdout goes through here, so output that is lost is an error
//! (exit 1, one line), never a panic and never a silent success: a full disk (`> /dev/full`)
//! fails the command; a stdout closed at start (`>&-`) too — Rust's runtime opens `/dev/null`
//! on a closed fd 1 before `main`, so writes would vanish: a probe that runs before that
//! (`.init_array`, as C constructors do) notes it. A closed pipe (`| head`) is the reader's
//! choice, not an error.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

extern "C" fn probe_stdout() {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(1, libc::F_GETFD) } == -1 {
        CLOSED_AT_START.store(true, Ordering::Relaxed);
    }
}

#[used]
#[link_section = ".init_array"]
static PROBE_STDOUT: extern "C" fn() = probe_stdout;

/// stdout was closed when latlab started.
pub fn was_closed() -> bool {
    CLOSED_AT_START.load(Ordering::Relaxed)
}

/// Write `bytes` to stdout, all of them, or say why not.
pub fn write(bytes: &[u8]) -> anyhow::Result<()> {
    if was_closed() {
        anyhow::bail!(
            "cannot write to stdout: it is closed (run without `>&-`, or redirect it to a file)"
        );
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::anyhow!(
            "cannot write to stdout: {e} (redirect it to a file on a disk with room)"
        )),
    }
}

/// `println!` that returns an error instead of panicking when stdout is lost.
macro_rules! outln {
    () => { $crate::stdout::write(b"\n") };
    ($($arg:tt)*) => {
        $crate::stdout::write(format!("{}\n", format_args!($($arg)*)).as_bytes())
    };
}

/// `print!` that returns an error instead of panicking when stdout is lost.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format!($($arg)*).as_bytes())
    };
}

/// A warning on stderr, `latlab: warning: MESSAGE`, the message escaped: warnings quote input
/// (a ledger line, a file name, a tool's output), which must not reach the terminal raw.
macro_rules! warnln {
    ($($arg:tt)*) => {
        eprintln!("latlab: warning: {}", latlab_core::escape::escape(&format!($($arg)*)))
    };
}

/// Where rendered bytes go: a file (`-o`, written safely) or stdout.
pub fn emit(bytes: &[u8], output: Option<&std::path::Path>) -> anyhow::Result<()> {
    match output {
        Some(p) => latlab_sys::safefile::write_atomic(p, bytes)
            .map_err(|e| anyhow::anyhow!("-o {}: cannot write: {e}", p.display())),
        None => write(bytes),
    }
}
