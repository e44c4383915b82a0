//! The engine's error: one line saying what is wrong and what to do, its causes joined with
//! ": " (the CLI prints it as `latlab: error: …`). Inside, the engine builds errors with
//! context as it goes; its API returns this type only.

use std::fmt;

/// An error of the engine (see the module documentation).
pub struct Error(anyhow::Error);

/// A result of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error saying `msg`.
    pub fn msg(msg: impl fmt::Display) -> Error {
        Error(anyhow::anyhow!("{msg}"))
    }

    /// This error with `context` before it (`context: error`).
    pub fn context(self, context: impl fmt::Display + Send + Sync + 'static) -> Error {
        Error(self.0.context(context))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Error {}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Error {
        Error(e)
    }
}

/// `?` on the errors of latlab's other crates (and std's) gives an [`Error`].
macro_rules! from_errors {
    ($($t:ty),* $(,)?) => {
        $(impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error(e.into())
            }
        })*
    };
}

from_errors!(
    std::io::Error,
    latlab_core::record::RecordError,
    latlab_sys::loads::profiles::ProfileError,
);

#[cfg(test)]
mod tests {
    #[test]
    fn the_causes_are_one_line() {
        use anyhow::Context;
        let e: super::Error = Err::<(), _>(std::io::Error::other("disk full"))
            .context("cannot write run.json")
            .unwrap_err()
            .into();
        assert_eq!(e.to_string(), "cannot write run.json: disk full");
    }
}
