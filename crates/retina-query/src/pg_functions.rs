//! PostgreSQL functions that schema-reflecting clients put in their catalog queries
//! and that neither DataFusion nor the `pg_catalog` emulation defines. A query that
//! names an unknown function fails to plan as a whole, even where the function is
//! only evaluated for objects Retina does not have (sequences, index expressions,
//! collations), so each is answered the way PostgreSQL answers for what exists here.
//!
//! SQLAlchemy's `get_columns` (behind `Table(autoload_with=)`, pandas
//! `read_sql_table`) calls `pg_get_serial_sequence`, `json_build_object` and
//! `pg_collation_is_visible`; its `get_indexes` and pgjdbc's `getIndexInfo` call
//! `pg_get_indexdef`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Builder, ListArray, StringBuilder, StructArray};
use datafusion::arrow::buffer::{OffsetBuffer, ScalarBuffer};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{create_udf, ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::execution::session_state::SessionState;
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;

use crate::client_settings::ClientSettings;
use crate::pg_compat::setting;
use crate::pg_keys::KeyDefinitions;
use crate::sql_catalog::DEFAULT_SCHEMA;
use crate::pg_interval_functions::{Justify, JustifyFunction};
use crate::pg_rewrite::{like_pattern_with_backslash, CUT_TEXT_FUNCTION, EXPAND_ARRAY_FUNCTION, LIKE_ESCAPE_FUNCTION};
use crate::udf_result::shaped_like_args;

/// Registers every function of this module; `keys` describes the primary keys'
/// indexes and constraints.
pub fn register(context: &SessionContext, keys: Arc<KeyDefinitions>) {
    // No column here is backed by a sequence: PostgreSQL answers NULL.
    context.register_udf(ScalarUDF::from(Constant::new("pg_get_serial_sequence", DataType::Utf8)));
    context.register_udf(ScalarUDF::from(KeyDefinition::new("pg_get_indexdef", Arc::clone(&keys))));
    context.register_udf(ScalarUDF::from(KeyDefinition::new("pg_get_constraintdef", keys)));
    // Every collation Retina reports is the default one, which is visible.
    context.register_udf(ScalarUDF::from(Constant::new("pg_collation_is_visible", DataType::Boolean)));
    context.register_udf(ScalarUDF::from(JsonBuildObject::new()));
    context.register_udf(like_escape_udf());
    // `varchar(n)` casts cut their text with it (`pg_rewrite`): DataFusion's `left`
    // under a name the column namer looks through.
    context.register_udf(datafusion::functions::unicode::left().as_ref().clone().with_aliases([CUT_TEXT_FUNCTION]));
    context.register_udf(ScalarUDF::from(crate::pg_age::Age::new()));
    context.register_udf(ScalarUDF::from(crate::pg_interval_functions::IntervalScaled::mul()));
    context.register_udf(ScalarUDF::from(crate::pg_interval_functions::IntervalScaled::div()));
    for justify in [Justify::Hours, Justify::Days, Justify::Interval] {
        context.register_udf(ScalarUDF::from(JustifyFunction::new(justify)));
    }
    // PostgreSQL's name for the sign of a number.
    context.register_udf(datafusion::functions::math::signum().as_ref().clone().with_aliases(["sign"]));
    context.register_udf(ScalarUDF::from(CurrentSetting::new(ClientSettings::default())));
    context.register_udf(ScalarUDF::from(ExpandArray::new()));
    context.register_udf(ScalarUDF::from(PgTypeof::new()));
    context.register_udf(ScalarUDF::from(crate::pg_time_zone::TimeZoneFunction::new()));
}

/// `pg_typeof(value)`: the PostgreSQL name of the value's type, as the server
/// describes the column to clients.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl PgTypeof {
    fn new() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = args.arg_fields.first().map_or_else(|| "unknown".to_string(), |field| pg_type_name(field.data_type()));
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

/// PostgreSQL's name for the type a value of `data_type` reaches clients as.
fn pg_type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 => "integer".into(),
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => "bigint".into(),
        DataType::Float16 | DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => "numeric".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "bytea".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Time32(_) | DataType::Time64(_) => "time without time zone".into(),
        DataType::Timestamp(_, None) => "timestamp without time zone".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp with time zone".into(),
        DataType::Interval(_) | DataType::Duration(_) => "interval".into(),
        DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => format!("{}[]", pg_type_name(item.data_type())),
        DataType::Null => "unknown".into(),
        _ => "text".into(),
    }
}

/// `retina_expandarray(a)`: `a`'s elements as `{x, n}` structs (the element and its
/// position from 1), the array `information_schema._pg_expandarray(a)` sets out as
/// rows; [`crate::pg_rewrite`] puts `unnest()` around it (pgjdbc's `getPrimaryKeys`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ExpandArray {
    signature: Signature,
}

impl ExpandArray {
    fn new() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }

    fn element_struct(element: &DataType) -> Fields {
        Fields::from(vec![Field::new("x", element.clone(), true), Field::new("n", DataType::Int32, false)])
    }
}

impl ScalarUDFImpl for ExpandArray {
    fn name(&self) -> &str {
        EXPAND_ARRAY_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::List(element)] => {
                Ok(DataType::List(Arc::new(Field::new("item", DataType::Struct(Self::element_struct(element.data_type())), true))))
            }
            other => Err(DataFusionError::Plan(format!("{EXPAND_ARRAY_FUNCTION} takes an array, not {other:?}"))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!("{EXPAND_ARRAY_FUNCTION} takes one argument")));
        };
        let scalar = matches!(arg, ColumnarValue::Scalar(_));
        let array = arg.to_array(args.number_rows)?;
        let list = array
            .as_list_opt::<i32>()
            .ok_or_else(|| DataFusionError::Plan(format!("{EXPAND_ARRAY_FUNCTION} takes an array, not {}", array.data_type())))?;
        let offsets = list.offsets();
        let first = offsets[0];
        let values = list.values().slice(first as usize, (offsets[offsets.len() - 1] - first) as usize);
        let mut positions = Int32Builder::with_capacity(values.len());
        for window in offsets.windows(2) {
            (1..=window[1] - window[0]).for_each(|n| positions.append_value(n));
        }
        let fields = Self::element_struct(values.data_type());
        let elements = StructArray::try_new(fields.clone(), vec![values, Arc::new(positions.finish())], None)?;
        let rebased = OffsetBuffer::new(offsets.iter().map(|o| o - first).collect::<ScalarBuffer<i32>>());
        let item = Arc::new(Field::new("item", DataType::Struct(fields), true));
        let out: ArrayRef = Arc::new(ListArray::try_new(item, rebased, Arc::new(elements), list.nulls().cloned())?);
        Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?) } else { ColumnarValue::Array(out) })
    }
}

/// Replaces, in the state one statement of a client is planned with, the functions
/// that answer from the client's own settings: `current_schema()` (the first schema
/// of its `search_path`; the emulation's answers `public` always),
/// `current_setting()`, and `session_user()` (what `current_user` becomes; the
/// emulation's answers `postgres`).
pub fn register_for_client(state: &mut SessionState, settings: &ClientSettings) -> Result<()> {
    if let Some(user) = &settings.user {
        state.register_udf(Arc::new(text_constant("session_user", user.clone())))?;
    }
    let schema = settings.default_schema.clone().unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
    state.register_udf(Arc::new(text_constant("current_schema", schema)))?;
    state.register_udf(Arc::new(ScalarUDF::from(CurrentSetting::new(settings.clone()))))?;
    Ok(())
}

/// A function of no arguments that answers `value`.
fn text_constant(name: &str, value: String) -> ScalarUDF {
    create_udf(
        name,
        vec![],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(move |_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(value.clone()))))),
    )
}

/// `current_setting(name [, missing_ok])`: what `SHOW name` answers for the client
/// whose `settings` these are. PostgreSQL's error for an unknown name, or NULL when
/// `missing_ok` is true.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CurrentSetting {
    signature: Signature,
    settings: ClientSettings,
}

impl CurrentSetting {
    fn new(settings: ClientSettings) -> Self {
        Self { signature: Signature::variadic_any(Volatility::Stable), settings }
    }
}

impl ScalarUDFImpl for CurrentSetting {
    fn name(&self) -> &str {
        "current_setting"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let (name, missing_ok) = match args.args.as_slice() {
            [name] => (name, None),
            [name, missing_ok] => (name, Some(missing_ok)),
            _ => return Err(DataFusionError::Plan("current_setting takes a setting name and an optional missing_ok".into())),
        };
        let names = cast(&name.to_array(rows)?, &DataType::Utf8)?;
        let missing_ok = match missing_ok {
            Some(flag) => Some(cast(&flag.to_array(rows)?, &DataType::Boolean)?),
            None => None,
        };
        let names = names.as_string::<i32>();
        let mut out = StringBuilder::new();
        for row in 0..rows {
            if names.is_null(row) {
                out.append_null();
                continue;
            }
            match setting(names.value(row), &self.settings) {
                Some((_, value)) => out.append_value(value),
                None if missing_ok.as_ref().is_some_and(|flags| flags.as_boolean().value(row)) => out.append_null(),
                None => {
                    return Err(DataFusionError::Execution(format!(
                        "unrecognized configuration parameter \"{}\"",
                        names.value(row)
                    )))
                }
            }
        }
        shaped_like_args(Arc::new(out.finish()), &args.args)
    }
}

/// `retina_like_escape(pattern, escape)`: what [`crate::pg_rewrite`] puts around a
/// LIKE pattern whose escape character is not a backslash.
fn like_escape_udf() -> ScalarUDF {
    create_udf(
        LIKE_ESCAPE_FUNCTION,
        vec![DataType::Utf8, DataType::Utf8],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let [pattern, escape] = args else {
                return Err(DataFusionError::Plan(format!("{LIKE_ESCAPE_FUNCTION} takes two arguments")));
            };
            let rows = match (pattern, escape) {
                (ColumnarValue::Array(a), _) | (_, ColumnarValue::Array(a)) => a.len(),
                _ => 1,
            };
            let (patterns, escapes) = (cast(&pattern.to_array(rows)?, &DataType::Utf8)?, cast(&escape.to_array(rows)?, &DataType::Utf8)?);
            let (patterns, escapes) = (patterns.as_string::<i32>(), escapes.as_string::<i32>());
            let mut out = StringBuilder::new();
            for row in 0..rows {
                if patterns.is_null(row) || escapes.is_null(row) {
                    out.append_null();
                    continue;
                }
                let mut escape = escapes.value(row).chars();
                let escape = match (escape.next(), escape.next()) {
                    (escape, None) => escape,
                    _ => {
                        return Err(DataFusionError::Execution(
                            "invalid escape string: escape string must be empty or one character".into(),
                        ))
                    }
                };
                out.append_value(like_pattern_with_backslash(patterns.value(row), escape).map_err(DataFusionError::Execution)?);
            }
            shaped_like_args(Arc::new(out.finish()), args)
        }),
    )
}

/// A function of any arguments with one answer: NULL text, or `true`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Constant {
    name: &'static str,
    returns: DataType,
    signature: Signature,
}

impl Constant {
    fn new(name: &'static str, returns: DataType) -> Self {
        Self { name, returns, signature: Signature::variadic_any(Volatility::Stable) }
    }
}

impl ScalarUDFImpl for Constant {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(match self.returns {
            DataType::Boolean => ScalarValue::Boolean(Some(true)),
            _ => ScalarValue::try_from(&self.returns)?,
        }))
    }
}

/// `pg_get_indexdef(index [, column, pretty])` and `pg_get_constraintdef(constraint
/// [, pretty])` of a primary key: its `CREATE UNIQUE INDEX`, the name of its
/// `column`th column (from 1; 0 is the whole definition), or `PRIMARY KEY (…)`.
/// NULL for an oid that is no key's.
struct KeyDefinition {
    name: &'static str,
    signature: Signature,
    keys: Arc<KeyDefinitions>,
}

impl KeyDefinition {
    fn new(name: &'static str, keys: Arc<KeyDefinitions>) -> Self {
        Self { name, signature: Signature::variadic_any(Volatility::Stable), keys }
    }
}

impl std::fmt::Debug for KeyDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for KeyDefinition {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.keys, &other.keys)
    }
}

impl Eq for KeyDefinition {}

impl std::hash::Hash for KeyDefinition {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for KeyDefinition {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let Some(oids) = args.args.first() else {
            return Err(DataFusionError::Plan(format!("{} takes an oid", self.name)));
        };
        let oids = cast(&oids.to_array(rows)?, &DataType::Int64)?;
        let oids = oids.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        // pg_get_indexdef's column number; pg_get_constraintdef's second argument is
        // `pretty`.
        let columns = match (self.name, args.args.get(1)) {
            ("pg_get_indexdef", Some(column)) => Some(cast(&column.to_array(rows)?, &DataType::Int64)?),
            _ => None,
        };
        let mut out = StringBuilder::new();
        for row in 0..rows {
            let key = (!oids.is_null(row)).then(|| i32::try_from(oids.value(row)).ok()).flatten().and_then(|oid| self.keys.get(oid));
            let column = columns.as_ref().map(|c| c.as_primitive::<datafusion::arrow::datatypes::Int64Type>()).map_or(0, |c| c.value(row));
            match key {
                None => out.append_null(),
                Some(key) if self.name == "pg_get_constraintdef" => out.append_value(key.constraint_definition()),
                Some(key) if column == 0 => out.append_value(key.index_definition()),
                Some(key) => match usize::try_from(column - 1).ok().and_then(|i| key.columns.get(i)) {
                    Some(name) => out.append_value(name),
                    None => out.append_value(""),
                },
            }
        }
        let array: ArrayRef = Arc::new(out.finish());
        Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?) } else { ColumnarValue::Array(array) })
    }
}

/// `json_build_object(key, value, ...)`: a JSON object per row, as text. Keys are
/// text; numbers and booleans stay JSON numbers and booleans, NULL is `null`,
/// anything else is its text as a JSON string (as PostgreSQL's `to_json` of text).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuildObject {
    signature: Signature,
}

impl JsonBuildObject {
    fn new() -> Self {
        Self { signature: Signature::variadic_any(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        "json_build_object"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if args.args.len() % 2 != 0 {
            return Err(DataFusionError::Plan("json_build_object: argument list must have even number of elements".into()));
        }
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> = args.args.iter().map(|arg| arg.to_array(rows)).collect::<Result<_>>()?;
        let mut texts = Vec::with_capacity(arrays.len());
        for array in &arrays {
            texts.push(cast(array, &DataType::Utf8)?);
        }
        let mut out = StringBuilder::new();
        for row in 0..rows {
            let mut object = String::from("{");
            for (pair, chunk) in texts.chunks(2).enumerate() {
                let (key, value) = (chunk[0].as_string::<i32>(), chunk[1].as_string::<i32>());
                if key.is_null(row) {
                    return Err(DataFusionError::Execution("json_build_object: null value not allowed for object key".into()));
                }
                if pair > 0 {
                    object.push_str(", ");
                }
                object.push_str(&json_string(key.value(row)));
                object.push_str(" : ");
                let kind = arrays[2 * pair + 1].data_type();
                object.push_str(&match (value.is_null(row), kind) {
                    (true, _) => "null".to_string(),
                    (false, kind) if kind.is_numeric() || *kind == DataType::Boolean => value.value(row).to_string(),
                    (false, _) => json_string(value.value(row)),
                });
            }
            object.push('}');
            out.append_value(object);
        }
        let array: ArrayRef = Arc::new(out.finish());
        Ok(if rows == 1 && args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn one(sql: &str) -> String {
        let context = SessionContext::new();
        register(&context, Arc::default());
        let batches = context.sql(sql).await.expect("plan").collect().await.expect("run");
        let column = cast(batches[0].column(0), &DataType::Utf8).expect("text");
        let text = column.as_string::<i32>();
        if text.is_null(0) { "NULL".into() } else { text.value(0).to_string() }
    }

    #[tokio::test]
    async fn json_build_object_writes_numbers_booleans_nulls_and_strings_as_postgres() {
        assert_eq!(
            one("SELECT json_build_object('a', 1, 'b', true, 'c', NULL, 'd', 'x\"y', 'e', 2.5)").await,
            r#"{"a" : 1, "b" : true, "c" : null, "d" : "x\"y", "e" : 2.5}"#
        );
    }

    #[tokio::test]
    async fn functions_about_sequences_indexes_and_collations_answer_as_for_none() {
        assert_eq!(one("SELECT pg_get_serial_sequence('chbench.warehouse', 'w_id')").await, "NULL");
        assert_eq!(one("SELECT pg_get_indexdef(1, 1, true)").await, "NULL", "no key has that index");
        assert_eq!(one("SELECT pg_collation_is_visible(100)").await, "true");
    }

    #[tokio::test]
    async fn expandarray_numbers_each_element_from_one() {
        assert_eq!(
            one("SELECT array_to_string(make_array(get_field(unnest(retina_expandarray(make_array(7, 9))), 'n')), ',')").await,
            "1"
        );
        let context = SessionContext::new();
        register(&context, Arc::default());
        let sql = "SELECT get_field(e, 'x') AS x, get_field(e, 'n') AS n FROM (SELECT unnest(retina_expandarray(a)) AS e \
                   FROM (VALUES (make_array(7, 9)), (make_array(4))) AS t(a)) ORDER BY x";
        let batches = context.sql(sql).await.expect("plan").collect().await.expect("run");
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).expect("format").to_string();
        assert!(text.contains("| 4 | 1 |") && text.contains("| 7 | 1 |") && text.contains("| 9 | 2 |"), "{text}");
    }

    #[tokio::test]
    async fn pg_typeof_names_types_as_postgres() {
        assert_eq!(one("SELECT pg_typeof(1)").await, "bigint");
        assert_eq!(one("SELECT pg_typeof(CAST(1 AS INT))").await, "integer");
        assert_eq!(one("SELECT pg_typeof('x')").await, "text");
        assert_eq!(one("SELECT pg_typeof(1.5::numeric(4,2))").await, "numeric");
        assert_eq!(one("SELECT pg_typeof(make_array(1, 2))").await, "bigint[]");
        assert_eq!(one("SELECT pg_typeof(CAST('2024-01-01' AS TIMESTAMP))").await, "timestamp without time zone");
    }

    #[tokio::test]
    async fn current_setting_answers_as_show_and_refuses_unknown_names() {
        assert_eq!(one("SELECT current_setting('default_table_access_method')").await, "heap");
        assert_eq!(one("SELECT current_setting('TimeZone')").await, "UTC");
        assert_eq!(one("SELECT current_setting('no_such_thing', true)").await, "NULL");
        let context = SessionContext::new();
        register(&context, Arc::default());
        let error = context.sql("SELECT current_setting('no_such_thing')").await.expect("plan").collect().await.unwrap_err();
        assert!(error.to_string().contains("unrecognized configuration parameter \"no_such_thing\""), "{error}");
    }

    #[tokio::test]
    async fn like_escape_translates_patterns_of_literals_and_columns() {
        assert_eq!(one("SELECT 'pg_toast' LIKE retina_like_escape('pg/_%', '/')").await, "true");
        assert_eq!(one("SELECT 'pgxtoast' LIKE retina_like_escape('pg/_%', '/')").await, "false");
        assert_eq!(one("SELECT 'a\\b' LIKE retina_like_escape('a\\_', '')").await, "true", "ESCAPE '': a backslash is a plain character");
        assert_eq!(one("SELECT count(*) FROM (VALUES ('c%'), ('b//')) AS t(p) WHERE 'b/' LIKE retina_like_escape(p, '/')").await, "1");
        let context = SessionContext::new();
        register(&context, Arc::default());
        let error = context.sql("SELECT 'a' LIKE retina_like_escape('a/', '/')").await.expect("plan").collect().await.unwrap_err();
        assert!(error.to_string().contains("must not end with escape character"), "{error}");
    }
}
