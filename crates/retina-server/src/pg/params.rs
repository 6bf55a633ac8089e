//! Bound parameters (extended protocol) to DataFusion scalars.
//!
//! Text-format values are parsed as strings and cast by Arrow to the type the
//! planner inferred for the placeholder (or the type the client declared), which
//! covers every type Retina stores. Binary-format values are decoded for the fixed
//! width types; other binary parameters are refused with SQLSTATE 22P03.

use pgwire::api::portal::Portal;
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use retina_query::datafusion::arrow::datatypes::DataType;
use retina_query::datafusion::common::ParamValues;
use retina_query::datafusion::logical_expr::LogicalPlan;
use retina_query::datafusion::scalar::ScalarValue;

use super::errors::user_error;

/// The placeholder types of a plan, in `$1, $2, ...` order (`None` if not inferred).
pub fn placeholder_types(plan: &LogicalPlan) -> PgWireResult<Vec<Option<DataType>>> {
    let types = plan
        .get_parameter_types()
        .map_err(|e| user_error("42P18", format!("cannot determine parameter types: {e}")))?;
    let mut numbered: Vec<(usize, Option<DataType>)> = Vec::with_capacity(types.len());
    for (id, data_type) in types {
        let number = id
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| user_error("42601", format!("unsupported parameter {id}: use $1, $2, ...")))?;
        numbered.push((number, data_type));
    }
    numbered.sort_by_key(|(number, _)| *number);
    for (expected, (number, _)) in numbered.iter().enumerate() {
        if *number != expected + 1 {
            return Err(user_error("42P02", format!("parameter ${} is missing (parameters must be $1..$n)", expected + 1)));
        }
    }
    Ok(numbered.into_iter().map(|(_, data_type)| data_type).collect())
}

/// Arrow type of a declared PostgreSQL parameter type, for placeholders the planner
/// could not infer.
fn declared_type(pg_type: &Type) -> Option<DataType> {
    Some(match *pg_type {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 => DataType::Int32,
        Type::INT8 => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => DataType::Utf8,
        Type::DATE => DataType::Date32,
        _ => return None,
    })
}

pub fn bind_parameters<S: Clone>(portal: &Portal<S>, inferred: &[Option<DataType>]) -> PgWireResult<ParamValues> {
    let count = portal.parameter_len();
    if count != inferred.len() {
        return Err(user_error(
            "08P01",
            format!("bind message supplies {count} parameters, but the statement requires {}", inferred.len()),
        ));
    }
    let mut values = Vec::with_capacity(count);
    for (index, inferred_type) in inferred.iter().enumerate() {
        let declared = portal.statement.parameter_types.get(index).cloned().flatten();
        let target = inferred_type.clone().or_else(|| declared.as_ref().and_then(declared_type)).unwrap_or(DataType::Utf8);
        let value = match portal.parameters.get(index).cloned().flatten() {
            None => ScalarValue::try_from(&target).map_err(|e| user_error("22023", e.to_string()))?,
            Some(_) if portal.parameter_format.is_binary(index) => {
                let pg_type = declared.unwrap_or(Type::UNKNOWN);
                binary_value(portal, index, &pg_type)?
            }
            Some(bytes) => {
                let text = std::str::from_utf8(&bytes)
                    .map_err(|_| user_error("22021", format!("parameter ${} is not valid UTF-8", index + 1)))?;
                ScalarValue::Utf8(Some(text.to_string()))
            }
        };
        let value = if value.data_type() == target {
            value
        } else {
            value.cast_to(&target).map_err(|e| {
                user_error("22P02", format!("parameter ${}: cannot convert to {target}: {e}", index + 1))
            })?
        };
        values.push(value);
    }
    Ok(ParamValues::from(values))
}

fn binary_value<S: Clone>(portal: &Portal<S>, index: usize, pg_type: &Type) -> PgWireResult<ScalarValue> {
    let bad = |e: pgwire::error::PgWireError| user_error("22P03", format!("parameter ${}: {e}", index + 1));
    Ok(match *pg_type {
        Type::BOOL => ScalarValue::Boolean(portal.parameter::<bool>(index, pg_type).map_err(bad)?),
        Type::INT2 => ScalarValue::Int16(portal.parameter::<i16>(index, pg_type).map_err(bad)?),
        Type::INT4 => ScalarValue::Int32(portal.parameter::<i32>(index, pg_type).map_err(bad)?),
        Type::INT8 => ScalarValue::Int64(portal.parameter::<i64>(index, pg_type).map_err(bad)?),
        Type::FLOAT4 => ScalarValue::Float32(portal.parameter::<f32>(index, pg_type).map_err(bad)?),
        Type::FLOAT8 => ScalarValue::Float64(portal.parameter::<f64>(index, pg_type).map_err(bad)?),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
            ScalarValue::Utf8(portal.parameter::<String>(index, pg_type).map_err(bad)?)
        }
        _ => {
            return Err(user_error(
                "22P03",
                format!("parameter ${} of type {} in binary format is not supported; send it as text", index + 1, pg_type.name()),
            ))
        }
    })
}
