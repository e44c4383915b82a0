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

impl From<latlab_core::record::RecordError> for Error {
    fn from(e: latlab_core::record::RecordError) -> Error {
        Error(e.into())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(e.into())
    }
}

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
