//! The html report (not written yet).

use latlab_core::model::RunModel;

pub fn render(_model: &RunModel) -> Vec<u8> {
    b"html report: not implemented yet\n".to_vec()
}
