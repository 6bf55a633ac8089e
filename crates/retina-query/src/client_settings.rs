//! A SQL client's own settings, which planning reads.

/// What one SQL client has set for itself and planning reads: the schema that
/// unqualified table names resolve in (`SET search_path`, pgjdbc's
/// `currentSchema`, `options=-c search_path=…`). DataFusion resolves in one schema,
/// so a path's first schema is that one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientSettings {
    pub default_schema: Option<String>,
}
