//! Importers of other tools' outputs (not written yet).
