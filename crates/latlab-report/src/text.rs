//! text
use latlab_core::model::RunModel;
pub fn render(_m: &RunModel) -> Vec<u8> {
    Vec::new()
}
