//! What PostgreSQL clients ask a server about itself when they connect, answered
//! the way PostgreSQL 16 does: `version()`, `SHOW` of the server's settings, and
//! `to_regtype()` for type look-ups.
//!
//! SQLAlchemy (and so pandas and Superset) parses `select pg_catalog.version()` with
//! `.*(?:PostgreSQL|EnterpriseDB) (\d+)\.?(\d+)?...` and refuses a server it cannot
//! parse; DataFusion's own `version()` answers `Apache DataFusion ...`. It then runs
//! `show standard_conforming_strings` and `show transaction isolation level` and
//! reads the first column of the first row, which DataFusion's `SHOW` (a `name,
//! value` query on its own settings) does not give. psycopg looks types up with
//! `to_regtype(name)` (hstore, on every SQLAlchemy connect).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int32Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{create_udf, lit, ColumnarValue, LogicalPlan, LogicalPlanBuilder, ScalarUDF, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;
use datafusion::sql::sqlparser::ast::Ident;

use crate::client_settings::ClientSettings;

/// The PostgreSQL release whose behaviour the endpoint follows (what pgwire, the
/// wire-protocol library, announces too).
pub const PG_VERSION: &str = "16.6";
/// [`PG_VERSION`] as `server_version_num`.
pub const PG_VERSION_NUM: &str = "160006";

/// `server_version` as PostgreSQL builds show it, with the build in parentheses
/// (`16.6 (Debian 16.6-1.pgdg120+1)`): here Retina's version.
pub fn server_version() -> String {
    format!("{PG_VERSION} (Retina {})", env!("CARGO_PKG_VERSION"))
}

/// What `version()` answers: PostgreSQL's form, so client version checks parse it,
/// then what actually runs the SQL.
pub fn version_string() -> String {
    let platform = if cfg!(target_os = "linux") {
        format!("{}-pc-linux-gnu", std::env::consts::ARCH)
    } else {
        format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
    };
    format!(
        "PostgreSQL {PG_VERSION} on {platform}, compiled by Retina {} (DataFusion {}), 64-bit",
        env!("CARGO_PKG_VERSION"),
        datafusion::DATAFUSION_VERSION
    )
}

/// Registers `version()` (replacing DataFusion's) and `to_regtype()`.
pub fn register_functions(context: &SessionContext) {
    context.register_udf(version_udf());
    context.register_udf(to_regtype_udf());
}

fn version_udf() -> ScalarUDF {
    let version = version_string();
    create_udf(
        "version",
        vec![],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(move |_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(version.clone()))))),
    )
}

/// `to_regtype(name)`: the oid of a built-in type, NULL for any other name (like
/// PostgreSQL for a type that does not exist; Retina has no user-defined types).
fn to_regtype_udf() -> ScalarUDF {
    create_udf(
        "to_regtype",
        vec![DataType::Utf8],
        DataType::Int32,
        Volatility::Stable,
        Arc::new(|args: &[ColumnarValue]| {
            let [arg] = args else {
                return Err(DataFusionError::Plan(format!("to_regtype takes one argument, not {}", args.len())));
            };
            Ok(match arg {
                ColumnarValue::Scalar(value) => {
                    let name = match value {
                        ScalarValue::Utf8(name) | ScalarValue::LargeUtf8(name) | ScalarValue::Utf8View(name) => name.as_deref(),
                        _ => None,
                    };
                    ColumnarValue::Scalar(ScalarValue::Int32(name.and_then(builtin_type_oid)))
                }
                ColumnarValue::Array(names) => {
                    let names = cast(names, &DataType::Utf8)?;
                    let names = names
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .ok_or_else(|| DataFusionError::Internal("to_regtype: a Utf8 cast gave no string array".into()))?;
                    let oids: Int32Array = names.iter().map(|name| name.and_then(builtin_type_oid)).collect();
                    ColumnarValue::Array(Arc::new(oids) as ArrayRef)
                }
            })
        }),
    )
}

/// The oid of a built-in type by any of its PostgreSQL names.
fn builtin_type_oid(name: &str) -> Option<i32> {
    let name = name.trim().to_ascii_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    Some(match name {
        "bool" | "boolean" => 16,
        "bytea" => 17,
        "char" | "\"char\"" => 18,
        "name" => 19,
        "int8" | "bigint" => 20,
        "int2" | "smallint" => 21,
        "int4" | "integer" | "int" => 23,
        "text" => 25,
        "oid" => 26,
        "json" => 114,
        "float4" | "real" => 700,
        "float8" | "double precision" => 701,
        "bpchar" | "character" => 1042,
        "varchar" | "character varying" => 1043,
        "date" => 1082,
        "time" | "time without time zone" => 1083,
        "timestamp" | "timestamp without time zone" => 1114,
        "timestamptz" | "timestamp with time zone" => 1184,
        "interval" => 1186,
        "numeric" | "decimal" => 1700,
        "uuid" => 2950,
        "jsonb" => 3802,
        _ => return None,
    })
}

/// PostgreSQL's type modifier of a column of `data_type`, where it has one:
/// `numeric(p,s)` keeps `((p << 16) | s) + 4` (clients read the precision and
/// scale from it: pgjdbc's metadata, connectorx, `format_type`).
pub fn numeric_typmod(data_type: &DataType) -> Option<i32> {
    match data_type {
        DataType::Decimal128(precision, scale) if *scale >= 0 => Some(((i32::from(*precision) << 16) | i32::from(*scale)) + 4),
        _ => None,
    }
}

/// `SHOW name` of a PostgreSQL server setting: one text column named like
/// PostgreSQL's, one row. `None` for anything else (DataFusion's own settings, `SHOW
/// ALL`), which DataFusion answers.
pub fn show_plan(variable: &[Ident], settings: &ClientSettings) -> Option<DfResult<LogicalPlan>> {
    let name = variable.iter().map(|part| part.value.as_str()).collect::<Vec<_>>().join(" ");
    let (column, value) = setting(&name, settings)?;
    Some(LogicalPlanBuilder::empty(true).project(vec![lit(value).alias(column)]).and_then(|plan| plan.build()))
}

/// Every setting [`setting`] knows, by the name `pg_settings` lists it under.
pub const SETTING_NAMES: [&str; 20] = [
    "application_name",
    "client_encoding",
    "DateStyle",
    "default_table_access_method",
    "default_transaction_isolation",
    "default_transaction_read_only",
    "integer_datetimes",
    "IntervalStyle",
    "lock_timeout",
    "max_identifier_length",
    "max_index_keys",
    "search_path",
    "server_encoding",
    "server_version",
    "server_version_num",
    "standard_conforming_strings",
    "statement_timeout",
    "TimeZone",
    "transaction_isolation",
    "transaction_read_only",
];

/// A PostgreSQL server setting by name (any case): the name PostgreSQL shows it
/// under, and its value for a connection with `settings`. `None` for a setting
/// Retina does not know.
pub fn setting(name: &str, settings: &ClientSettings) -> Option<(&'static str, String)> {
    Some(match name.to_ascii_lowercase().as_str() {
        "transaction isolation level" | "transaction_isolation" => ("transaction_isolation", "read committed".to_string()),
        // Each statement reads its own snapshot, as under read committed.
        "default_transaction_isolation" => ("default_transaction_isolation", "read committed".to_string()),
        "standard_conforming_strings" => ("standard_conforming_strings", "on".to_string()),
        "server_version" => ("server_version", server_version()),
        "server_version_num" => ("server_version_num", PG_VERSION_NUM.to_string()),
        "server_encoding" => ("server_encoding", "UTF8".to_string()),
        "client_encoding" => ("client_encoding", "UTF8".to_string()),
        "search_path" => ("search_path", settings.default_schema.clone().unwrap_or_else(|| "\"$user\", public".to_string())),
        // Queries run in UTC: timestamps are stored as UTC instants.
        "timezone" | "time zone" => ("TimeZone", "UTC".to_string()),
        "datestyle" => ("DateStyle", "ISO, MDY".to_string()),
        "intervalstyle" => ("IntervalStyle", "postgres".to_string()),
        // Accepted by SET without effect.
        "statement_timeout" => ("statement_timeout", settings.statement_timeout_text()),
        "lock_timeout" => ("lock_timeout", "0".to_string()),
        "application_name" => ("application_name", String::new()),
        "integer_datetimes" => ("integer_datetimes", "on".to_string()),
        "max_identifier_length" => ("max_identifier_length", "63".to_string()),
        // What pgwire announces at startup; writes are refused statement by statement.
        "transaction_read_only" => ("transaction_read_only", "off".to_string()),
        "default_transaction_read_only" => ("default_transaction_read_only", "off".to_string()),
        // What SQLAlchemy compares a table's access method with.
        "default_table_access_method" => ("default_table_access_method", "heap".to_string()),
        // pgjdbc reads it from pg_settings before getImportedKeys/getExportedKeys.
        "max_index_keys" => ("max_index_keys", "32".to_string()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLAlchemy's `PGDialect._get_server_version_info` pattern, by hand (no regex
    /// crate): the last "PostgreSQL " followed by digits.
    fn sqlalchemy_version(text: &str) -> Option<(u32, u32)> {
        let rest = &text[text.rfind("PostgreSQL ")? + "PostgreSQL ".len()..];
        let mut parts = rest.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }

    #[test]
    fn version_reads_as_postgresql_16_6_and_names_retina() {
        let version = version_string();
        assert!(version.starts_with("PostgreSQL 16.6 on "), "{version}");
        assert_eq!(sqlalchemy_version(&version), Some((16, 6)));
        assert!(version.contains(&format!("Retina {}", env!("CARGO_PKG_VERSION"))), "{version}");
        assert!(version.contains(datafusion::DATAFUSION_VERSION), "{version}");
        assert!(server_version().starts_with(PG_VERSION));
    }

    #[test]
    fn show_answers_one_column_named_like_postgres() {
        let words = |text: &str| text.split(' ').map(Ident::new).collect::<Vec<_>>();
        let plan = show_plan(&words("transaction isolation level"), &ClientSettings::default()).expect("a server setting").expect("plan");
        let names: Vec<String> = plan.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["transaction_isolation"]);
        assert!(show_plan(&words("datafusion.execution.batch_size"), &ClientSettings::default()).is_none(), "DataFusion's own settings stay DataFusion's");
        let settings = ClientSettings { default_schema: Some("chbench".into()), ..ClientSettings::default() };
        let plan = show_plan(&words("search_path"), &settings).expect("a server setting").expect("plan");
        assert_eq!(plan.schema().field(0).name(), "search_path");
        let plan = show_plan(&words("TimeZone"), &settings).expect("a server setting").expect("plan");
        assert_eq!(plan.schema().field(0).name(), "TimeZone");
    }

    #[test]
    fn every_listed_setting_is_known_under_its_own_name() {
        for name in SETTING_NAMES {
            let (shown, _) = setting(name, &ClientSettings::default()).unwrap_or_else(|| panic!("{name} is not known"));
            assert_eq!(shown, name);
        }
    }

    #[test]
    fn a_decimal_keeps_its_precision_and_scale_as_its_typmod() {
        assert_eq!(numeric_typmod(&DataType::Decimal128(12, 2)), Some((12 << 16 | 2) + 4));
        assert_eq!(numeric_typmod(&DataType::Int64), None);
    }

    #[test]
    fn builtin_types_resolve_by_their_names_and_others_do_not() {
        assert_eq!(builtin_type_oid("int4"), Some(23));
        assert_eq!(builtin_type_oid("pg_catalog.Integer"), Some(23));
        assert_eq!(builtin_type_oid("character varying"), Some(1043));
        assert_eq!(builtin_type_oid("hstore"), None);
    }
}
