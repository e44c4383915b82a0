//! The tables a run adds beyond the latency statistics, in the order the reports show them:
//! timerlat's contexts, its mode's, then its scenario's. Text, markdown and html take them from here.

use latlab_core::model::RunModel;

use crate::tables::Table;

/// Every extra table of the run (none for a timer run that is no scenario and has one
/// context).
pub fn tables(m: &RunModel) -> Vec<Table> {
    let mut t = crate::contexts::tables(m);
    t.extend(crate::modes::tables(m));
    t.extend(crate::scenario::tables(m));
    t
}
