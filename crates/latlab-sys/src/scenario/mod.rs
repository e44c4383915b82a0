//! The OS side of `latlab scenario`: the fairness tasks and the io-read measurements (Love,
//! OLS 2003). Statistics over their results live in `latlab_core::scenario`.

pub mod fairness;
pub mod io_read;
