//! The percentile ladder and Williams' statistics, one column per CPU and one for all CPUs.

use latlab_core::model::RunModel;

use super::columns_table;
use crate::figures::{ladder_rows, stat_rows, williams_rows};

/// The ladder's table, then Williams' block as a table.
pub(super) fn section(o: &mut String, m: &RunModel) {
    let rows = stat_rows(m, |c| c.to_string(), "all");
    o.push_str("<h2>Percentile ladder</h2>\n");
    let ladder_cols: Vec<(String, Vec<(String, String)>)> = rows
        .iter()
        .map(|(name, s)| (format!("CPU {name}"), ladder_rows(s)))
        .collect();
    columns_table(o, "percentile", &ladder_cols);
    o.push_str("<p class=\"meta\">Each percentile is the upper bound of its histogram bucket (\"≤\"); \"&gt;\" marks one that falls among samples above the histogram limit.</p>\n");

    o.push_str("<h2>Statistics (Williams)</h2>\n");
    let wcols: Vec<(String, Vec<(String, String)>)> = rows
        .iter()
        .map(|(name, s)| (format!("CPU {name}"), williams_rows(s)))
        .collect();
    columns_table(o, "", &wcols);
}
