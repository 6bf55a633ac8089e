//! Arithmetic that PostgreSQL checks, checked as PostgreSQL checks it:
//!
//! - **Integer `+`, `-` and `*` that overflow raise 22003** (`bigint out of range`),
//!   where DataFusion's operators wrap: `9223372036854775807::bigint + 1` was
//!   -9223372036854775808.
//! - **A float divided by zero raises 22012** (`division by zero`), where DataFusion
//!   gives `inf` or NaN. (Integer and numeric division by zero already raise it.)
//! - **`sum` of a bigint is numeric**, as in PostgreSQL, so it cannot wrap:
//!   `sum(9223372036854775807)` over 50,000 rows was -50000. As a window function
//!   too.
//!
//! An analyzer rule after type coercion, like [`crate::pg_casts`]: only then are the
//! operands' types known. The operators become functions that run Arrow's checked
//! kernels. DataFusion's physical operator has a checked mode (`fail_on_overflow`),
//! but its planner gives no way to ask for it.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Datum};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, AggregateFunctionParams, Cast, ScalarFunction, WindowFunction, WindowFunctionParams};
use datafusion::logical_expr::{
    cast, BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility, WindowFunctionDefinition,
};
use datafusion::optimizer::AnalyzerRule;

use crate::plan_rewrite::rewrite_expressions;
use crate::udf_result::shaped_like_args;

/// `sum` of a bigint sums numerics of this type: PostgreSQL's `sum(int8)` is numeric.
pub const BIGINT_SUM_TYPE: DataType = DataType::Decimal128(38, 0);

/// Rewrites a plan's arithmetic (see the module's documentation).
#[derive(Debug, Default)]
pub struct PostgresArithmetic;

impl AnalyzerRule for PostgresArithmetic {
    fn name(&self) -> &str {
        "retina_postgres_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions(plan, &checked)
    }
}

fn checked(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    match &expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (Ok(left_type), Ok(right_type)) = (left.get_type(schema), right.get_type(schema)) else {
                return Transformed::no(expr);
            };
            let operation = match op {
                Operator::Plus | Operator::Minus | Operator::Multiply if left_type == right_type && is_integer(&left_type) => *op,
                Operator::Divide if left_type == right_type && matches!(left_type, DataType::Float32 | DataType::Float64) => *op,
                _ => return Transformed::no(expr),
            };
            let args = vec![left.as_ref().clone(), right.as_ref().clone()];
            Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(CheckedOperator::udf(operation)), args)))
        }
        Expr::AggregateFunction(AggregateFunction { func, params }) if func.name() == "sum" => match bigint_as_numeric(&params.args, schema) {
            Some(args) => {
                let params = AggregateFunctionParams { args, ..params.clone() };
                Transformed::yes(Expr::AggregateFunction(AggregateFunction { func: Arc::clone(func), params }))
            }
            None => Transformed::no(expr),
        },
        Expr::WindowFunction(window) if matches!(&window.fun, WindowFunctionDefinition::AggregateUDF(func) if func.name() == "sum") => {
            match bigint_as_numeric(&window.params.args, schema) {
                Some(args) => {
                    let params = WindowFunctionParams { args, ..window.params.clone() };
                    Transformed::yes(Expr::WindowFunction(Box::new(WindowFunction { fun: window.fun.clone(), params })))
                }
                None => Transformed::no(expr),
            }
        }
        _ => Transformed::no(expr),
    }
}

/// A sum's one bigint argument as a numeric; `None` for other arguments. Type
/// coercion has cast a narrower integer to bigint already: the sum of an integer
/// stays a bigint, as in PostgreSQL.
fn bigint_as_numeric(args: &[Expr], schema: &DFSchema) -> Option<Vec<Expr>> {
    let [arg] = args else { return None };
    if let Expr::Cast(Cast { expr: operand, .. }) = arg {
        if matches!(operand.get_type(schema), Ok(DataType::Int8 | DataType::Int16 | DataType::Int32)) {
            return None;
        }
    }
    matches!(arg.get_type(schema), Ok(DataType::Int64)).then(|| vec![cast(arg.clone(), BIGINT_SUM_TYPE)])
}

fn is_integer(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Int16 | DataType::Int32 | DataType::Int64)
}

/// An arithmetic operator that raises PostgreSQL's error where DataFusion's would
/// wrap (integers) or give infinity (a float divided by zero).
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedOperator {
    name: &'static str,
    operation: Operator,
    signature: Signature,
}

impl CheckedOperator {
    fn udf(operation: Operator) -> ScalarUDF {
        let name = match operation {
            Operator::Plus => "checked_plus",
            Operator::Minus => "checked_minus",
            Operator::Multiply => "checked_multiply",
            _ => "checked_divide",
        };
        ScalarUDF::new_from_impl(Self { name, operation, signature: Signature::any(2, Volatility::Immutable) })
    }
}

impl ScalarUDFImpl for CheckedOperator {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [left, right] if left == right => Ok(left.clone()),
            _ => Err(DataFusionError::Internal(format!("{} takes two operands of one type, not {arg_types:?}", self.name))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [left, right] = args.args.as_slice() else {
            return Err(DataFusionError::Internal(format!("{} takes two operands", self.name)));
        };
        let (left, right) = (operand(left)?, operand(right)?);
        let (left, right) = (left.as_ref(), right.as_ref());
        let result = match self.operation {
            Operator::Plus => numeric::add(left, right),
            Operator::Minus => numeric::sub(left, right),
            Operator::Multiply => numeric::mul(left, right),
            _ => float_divide(left, right),
        };
        let result = result.map_err(|error| match error {
            ArrowError::ArithmeticOverflow(_) => out_of_range(left.get().0.data_type()),
            other => DataFusionError::from(other),
        })?;
        shaped_like_args(result, &args.args)
    }
}

/// An operand as Arrow's kernels take it: an array, or a scalar they broadcast.
fn operand(value: &ColumnarValue) -> Result<Box<dyn Datum>> {
    Ok(match value {
        ColumnarValue::Array(array) => Box::new(Arc::clone(array)),
        ColumnarValue::Scalar(scalar) => Box::new(scalar.to_scalar()?),
    })
}

/// PostgreSQL's `float8div`: a zero divisor raises 22012, whatever the dividend
/// (NaN / 0 too); an infinite or NaN divisor divides as IEEE does.
fn float_divide(left: &dyn Datum, right: &dyn Datum) -> Result<ArrayRef, ArrowError> {
    let zero = match right.get().0.data_type() {
        DataType::Float32 => ScalarValue::Float32(Some(0.0)),
        _ => ScalarValue::Float64(Some(0.0)),
    };
    let zero = zero.to_scalar().map_err(|error| ArrowError::ComputeError(error.to_string()))?;
    let divides_by_zero = datafusion::arrow::compute::kernels::cmp::eq(right, &zero)?;
    if divides_by_zero.true_count() > 0 {
        return Err(ArrowError::DivideByZero);
    }
    numeric::div(left, right)
}

/// PostgreSQL's error for an integer result that does not fit its type.
fn out_of_range(data_type: &DataType) -> DataFusionError {
    let name = match data_type {
        DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        _ => "bigint",
    };
    DataFusionError::ArrowError(Box::new(ArrowError::ArithmeticOverflow(format!("{name} out of range"))), None)
}
