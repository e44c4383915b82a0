//! `latlab export`: a run directory's contents for other tools. [`perfetto`] reads its traces
//! (spike windows, the profile's window) into Perfetto's protobuf trace; [`kcidb`] turns its
//! record into KCIDB I/O JSON. Both return bytes: the CLI decides where they go.

pub mod kcidb;
pub mod perfetto;
