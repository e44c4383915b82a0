//! The markdown report (not written yet).

use latlab_core::model::RunModel;

pub fn render(_model: &RunModel) -> Vec<u8> {
    b"markdown report: not implemented yet\n".to_vec()
}
