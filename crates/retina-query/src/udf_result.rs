//! The result of a scalar function in the shape of its arguments: one value when
//! every argument was one (so constant folding gets a constant), else an array.

use datafusion::arrow::array::ArrayRef;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ColumnarValue;

/// `result` (a row per input row) as a scalar when all of `args` are scalars.
pub(crate) fn shaped_like_args(result: ArrayRef, args: &[ColumnarValue]) -> Result<ColumnarValue> {
    if !args.is_empty() && args.iter().all(|arg| matches!(arg, ColumnarValue::Scalar(_))) {
        return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?));
    }
    Ok(ColumnarValue::Array(result))
}
