//! latlab-report
