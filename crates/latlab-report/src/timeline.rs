//! A traced spike's timeline as text lines: pure, so it lives in core
//! ([`latlab_core::timeline`]), where the recorder's capture writes it into `analysis.txt`;
//! the reports render it through these paths.

pub use latlab_core::timeline::{lines, render};
