//! Debezium's column types (Kafka Connect primitive type + optional semantic name)
//! and how each maps to an Arrow column type and is decoded from JSON.

use arrow_schema::{DataType, TimeUnit};

use crate::error::DecodeError;

/// How one column's JSON value is decoded. The variant fixes the Arrow type of the
/// column ([`DebeziumType::arrow_type`]) and the unit of the JSON number or the format
/// of the JSON string.
#[derive(Clone, Debug, PartialEq)]
pub enum DebeziumType {
    Boolean,
    /// Connect `int8` and `int16` (Arrow has no Retina int8 column yet).
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// `string`, and the textual semantic types: `Json`, `Uuid`, `Enum`, `EnumSet`, `Xml`,
    /// `VariableScaleDecimal` written as exact text; `array` (PostgreSQL arrays,
    /// `FloatVector`, `DoubleVector`) as its compact JSON text.
    Utf8,
    /// `bytes` and `Bits`: base64 in JSON.
    Binary,
    /// `io.debezium.time.Date`: days since the epoch.
    Date,
    /// `io.debezium.time.Time`: milliseconds since midnight -> Time64(µs).
    TimeMillis,
    /// `io.debezium.time.MicroTime`: microseconds since midnight -> Time64(µs).
    TimeMicros,
    /// `io.debezium.time.NanoTime` -> Time64(ns).
    TimeNanos,
    /// `io.debezium.time.Timestamp`: epoch milliseconds -> Timestamp(µs).
    TimestampMillis { timezone: Option<String> },
    /// `io.debezium.time.MicroTimestamp`: epoch microseconds -> Timestamp(µs).
    TimestampMicros { timezone: Option<String> },
    /// `io.debezium.time.NanoTimestamp` -> Timestamp(ns).
    TimestampNanos,
    /// `io.debezium.time.ZonedTimestamp`: ISO-8601 text with offset -> Timestamp(µs, UTC).
    /// Digits below a microsecond are refused, never cut.
    ZonedTimestamp,
    /// The same from a connector whose zoned timestamps carry up to nanoseconds (SQL
    /// Server `datetimeoffset(7)`, Oracle `TIMESTAMP(9) WITH TIME ZONE`; see
    /// [`sub_microsecond_zones`]) -> Timestamp(ns, UTC).
    ZonedTimestampNanos,
    /// `io.debezium.time.ZonedTime` (PostgreSQL `timetz`): `HH:MM:SS[.f]` with `Z` or an
    /// offset -> Time64(µs) of the UTC time of day (Debezium already writes it in UTC).
    ZonedTime,
    /// `io.debezium.data.geometry.Geometry`, `Geography` and `Point`: `{"wkb", "srid"}`
    /// (a point also `x`, `y`) -> Binary: the WKB, as PostGIS EWKB (SRID embedded) when
    /// the value has an SRID, so nothing of the value is dropped.
    Geometry,
    /// `org.apache.kafka.connect.data.Decimal`: base64 big-endian unscaled bytes (also
    /// accepted: decimal text or a JSON number, for streams written with
    /// `decimal.handling.mode=string|double` into a catalog-defined decimal column).
    Decimal { precision: u8, scale: i8 },
    /// `io.debezium.data.VariableScaleDecimal`: `{"scale": s, "value": base64}`; the
    /// scale varies per value, so it is stored losslessly as decimal text.
    VariableScaleDecimal,
    /// A Connect `array` whose items have a type JSON does not show as itself
    /// (decimals as base64, dates as day numbers…): stored as JSON text with each
    /// element written as PostgreSQL's `to_json` writes it ([`super::array_text`]).
    /// Arrays of numbers and strings stay [`Self::Utf8`], their text as it came.
    Array(Box<DebeziumType>),
    /// `io.debezium.data.SparseVector` (pgvector `sparsevec`): `{"dimensions": n,
    /// "vector": [[index, value], …]}` -> pgvector's own text, `{1:10,5:20}/25`.
    SparseVector,
}

/// Whether the connector that wrote a stream (its envelope's `source` schema name,
/// `io.debezium.connector.<name>.Source`) has zoned timestamps finer than
/// microseconds: their columns get nanoseconds ([`DebeziumType::ZonedTimestampNanos`]).
/// PostgreSQL, MySQL and their kin stop at microseconds, which keeps their columns
/// in Delta Lake (it has no nanosecond timestamp).
pub fn sub_microsecond_zones(source_schema_name: &str) -> bool {
    const FINER: [&str; 5] = ["sqlserver", "oracle", "db2", "informix", "spanner"];
    source_schema_name
        .strip_prefix("io.debezium.connector.")
        .and_then(|rest| rest.split('.').next())
        .is_some_and(|connector| FINER.contains(&connector))
}

/// The semantic types this decoder knows, for error messages and docs.
pub const KNOWN_SEMANTIC_TYPES: &[&str] = &[
    "io.debezium.time.Date",
    "io.debezium.time.Time",
    "io.debezium.time.MicroTime",
    "io.debezium.time.NanoTime",
    "io.debezium.time.Timestamp",
    "io.debezium.time.MicroTimestamp",
    "io.debezium.time.NanoTimestamp",
    "io.debezium.time.ZonedTimestamp",
    "io.debezium.time.ZonedTime",
    "io.debezium.time.IsoDate",
    "io.debezium.time.IsoTime",
    "io.debezium.time.IsoTimestamp",
    "io.debezium.time.MicroDuration",
    "io.debezium.time.NanoDuration",
    "io.debezium.time.Interval",
    "io.debezium.time.Year",
    "org.apache.kafka.connect.data.Date",
    "org.apache.kafka.connect.data.Time",
    "org.apache.kafka.connect.data.Timestamp",
    "org.apache.kafka.connect.data.Decimal",
    "io.debezium.data.VariableScaleDecimal",
    "io.debezium.data.Json",
    "io.debezium.data.Uuid",
    "io.debezium.data.Enum",
    "io.debezium.data.EnumSet",
    "io.debezium.data.Xml",
    "io.debezium.data.Bits",
    "io.debezium.data.Ltree",
    "io.debezium.data.geometry.Geometry",
    "io.debezium.data.geometry.Geography",
    "io.debezium.data.geometry.Point",
    "io.debezium.data.FloatVector",
    "io.debezium.data.DoubleVector",
    "io.debezium.data.SparseVector",
    "io.debezium.data.SparseDoubleVector",
];

impl DebeziumType {
    /// Maps a Connect schema (`type`, optional `name`, decimal parameters) to a kind.
    /// An unknown type or semantic name is an error naming `field` and the type.
    pub fn from_connect(
        field: &str,
        connect_type: &str,
        semantic: Option<&str>,
        decimal: Option<(u8, i8)>,
    ) -> Result<Self, DecodeError> {
        let unknown = || DecodeError::UnknownType {
            field: field.to_string(),
            type_name: match semantic {
                Some(name) => format!("{name} ({connect_type})"),
                None => connect_type.to_string(),
            },
        };
        let kind = match (semantic, connect_type) {
            (None, "boolean") => Self::Boolean,
            (None, "int8" | "int16") => Self::Int16,
            (None, "int32") => Self::Int32,
            (None, "int64") => Self::Int64,
            (None, "float32" | "float") => Self::Float32,
            (None, "float64" | "double") => Self::Float64,
            (None, "string") => Self::Utf8,
            // No list column type yet: an array is kept whole as JSON text.
            (None | Some("io.debezium.data.FloatVector" | "io.debezium.data.DoubleVector"), "array") => Self::Utf8,
            // Likewise a map (hstore in `hstore.handling.mode=map`), as a JSON object.
            (None, "map") => Self::Utf8,
            (None, "bytes") => Self::Binary,
            (Some("io.debezium.time.Date"), "int32") => Self::Date,
            (Some("io.debezium.time.Time"), "int32") => Self::TimeMillis,
            (Some("io.debezium.time.MicroTime"), "int64") => Self::TimeMicros,
            (Some("io.debezium.time.NanoTime"), "int64") => Self::TimeNanos,
            (Some("io.debezium.time.Timestamp"), "int64") => Self::TimestampMillis { timezone: None },
            (Some("io.debezium.time.MicroTimestamp"), "int64") => Self::TimestampMicros { timezone: None },
            (Some("io.debezium.time.NanoTimestamp"), "int64") => Self::TimestampNanos,
            (Some("io.debezium.time.ZonedTimestamp" | "io.debezium.time.IsoTimestamp"), "string") => Self::ZonedTimestamp,
            (Some("io.debezium.time.ZonedTime" | "io.debezium.time.IsoTime"), "string") => Self::ZonedTime,
            (Some("io.debezium.time.IsoDate"), "string") => Self::Date,
            // PostgreSQL intervals: interval.handling.mode=numeric (µs, or ns for
            // NanoDuration) or =string (ISO-8601 text).
            (Some("io.debezium.time.MicroDuration" | "io.debezium.time.NanoDuration"), "int64") => Self::Int64,
            (Some("io.debezium.time.Interval"), "string") => Self::Utf8,
            (Some("io.debezium.time.Year"), "int32") => Self::Int32,
            (Some("org.apache.kafka.connect.data.Decimal"), "bytes") => {
                let (precision, scale) = decimal.ok_or_else(|| {
                    DecodeError::missing(format!("{field}.parameters.scale"))
                })?;
                // PostgreSQL 15+ allows numeric(p, s) with s > p (values below
                // 10^(p-s), all digits after the point); Arrow needs s <= p, and
                // precision s holds every such value.
                if scale > 38 {
                    let expected = "a scale of at most 38, the digits of Retina's widest decimal (the connector's \
                        decimal.handling.mode=string mirrors such a column as text)";
                    return Err(DecodeError::mistyped(format!("{field}.parameters.scale"), expected, scale.to_string()));
                }
                let widened = u8::try_from(scale).map_or(precision, |scale| precision.max(scale));
                Self::Decimal { precision: widened, scale }
            }
            (Some("io.debezium.data.VariableScaleDecimal"), "struct") => Self::VariableScaleDecimal,
            (Some("io.debezium.data.SparseVector" | "io.debezium.data.SparseDoubleVector"), "struct") => Self::SparseVector,
            (
                Some("io.debezium.data.Json" | "io.debezium.data.Uuid" | "io.debezium.data.Enum" | "io.debezium.data.EnumSet"
                | "io.debezium.data.Xml" | "io.debezium.data.Ltree"),
                "string",
            ) => Self::Utf8,
            (
                Some("io.debezium.data.geometry.Geometry" | "io.debezium.data.geometry.Geography" | "io.debezium.data.geometry.Point"),
                "struct",
            ) => Self::Geometry,
            (Some("io.debezium.data.Bits"), "bytes") => Self::Binary,
            // Connect's own logical types, as some converters write them.
            (Some("org.apache.kafka.connect.data.Date"), "int32") => Self::Date,
            (Some("org.apache.kafka.connect.data.Time"), "int32") => Self::TimeMillis,
            (Some("org.apache.kafka.connect.data.Timestamp"), "int64") => Self::TimestampMillis { timezone: None },
            // A custom converter's logical name over a primitive type: the value is
            // stored as that primitive, as Kafka Connect's own converters read it.
            // Debezium's and Connect's own names are not guessed at (an unknown
            // `io.debezium.time.*` is a time this decoder must learn, not a number),
            // and a known name over an unexpected type contradicts itself.
            (Some(name), primitive)
                if primitive != "struct" && !["io.debezium.", "org.apache.kafka.connect."].iter().any(|ns| name.starts_with(ns)) =>
            {
                return Self::from_connect(field, primitive, None, None).map_err(|_| unknown());
            }
            _ => return Err(unknown()),
        };
        Ok(kind)
    }

    /// The kind to decode a catalog column of `data_type` with, when the stream carries
    /// no schema: numbers are read in the column's own unit.
    pub fn for_arrow_type(field: &str, data_type: &DataType) -> Result<Self, DecodeError> {
        Ok(match data_type {
            DataType::Boolean => Self::Boolean,
            DataType::Int16 => Self::Int16,
            DataType::Int32 => Self::Int32,
            DataType::Int64 => Self::Int64,
            DataType::Float32 => Self::Float32,
            DataType::Float64 => Self::Float64,
            DataType::Utf8 => Self::Utf8,
            DataType::Binary => Self::Binary,
            DataType::Date32 => Self::Date,
            DataType::Time64(TimeUnit::Microsecond) => Self::TimeMicros,
            DataType::Time64(TimeUnit::Nanosecond) => Self::TimeNanos,
            DataType::Timestamp(TimeUnit::Microsecond, timezone) => {
                Self::TimestampMicros { timezone: timezone.as_ref().map(|tz| tz.to_string()) }
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => Self::TimestampNanos,
            DataType::Decimal128(precision, scale) => Self::Decimal { precision: *precision, scale: *scale },
            other => {
                return Err(DecodeError::UnknownType { field: field.to_string(), type_name: format!("Arrow {other}") })
            }
        })
    }

    /// Whether a value of this kind, inside an array, reads as itself in JSON: numbers,
    /// booleans and text (zoned times are ISO text already). The others (base64
    /// decimals and bytes, day and epoch numbers, structs) need [`Self::Array`].
    pub fn is_json_as_it_comes(&self) -> bool {
        matches!(
            self,
            Self::Boolean
                | Self::Int16
                | Self::Int32
                | Self::Int64
                | Self::Float32
                | Self::Float64
                | Self::Utf8
                | Self::ZonedTimestamp
                | Self::ZonedTimestampNanos
                | Self::ZonedTime
        )
    }

    /// The Arrow type of a column created for this kind.
    pub fn arrow_type(&self) -> DataType {
        match self {
            Self::Boolean => DataType::Boolean,
            Self::Int16 => DataType::Int16,
            Self::Int32 => DataType::Int32,
            Self::Int64 => DataType::Int64,
            Self::Float32 => DataType::Float32,
            Self::Float64 => DataType::Float64,
            Self::Utf8 | Self::VariableScaleDecimal | Self::Array(_) | Self::SparseVector => DataType::Utf8,
            Self::Binary | Self::Geometry => DataType::Binary,
            Self::Date => DataType::Date32,
            Self::TimeMillis | Self::TimeMicros | Self::ZonedTime => DataType::Time64(TimeUnit::Microsecond),
            Self::TimeNanos => DataType::Time64(TimeUnit::Nanosecond),
            Self::TimestampMillis { timezone } | Self::TimestampMicros { timezone } => {
                DataType::Timestamp(TimeUnit::Microsecond, timezone.as_deref().map(Into::into))
            }
            Self::TimestampNanos => DataType::Timestamp(TimeUnit::Nanosecond, None),
            Self::ZonedTimestamp => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            Self::ZonedTimestampNanos => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            Self::Decimal { precision, scale } => DataType::Decimal128((*precision).clamp(1, 38), *scale),
        }
    }

    /// Whether values of this kind can be stored in an existing column of `data_type`.
    /// Timestamps ignore the zone label (the stored value is always UTC-based).
    pub fn fits_column(&self, data_type: &DataType) -> bool {
        match (self.arrow_type(), data_type) {
            // A microsecond column made before zones got their connector's precision:
            // its values are still refused when finer ([`Self::adapted_to`]).
            (_, DataType::Timestamp(TimeUnit::Microsecond, _)) if *self == Self::ZonedTimestampNanos => true,
            (DataType::Timestamp(unit, _), DataType::Timestamp(column_unit, _)) => unit == *column_unit,
            (DataType::Decimal128(_, scale), DataType::Decimal128(_, column_scale)) => scale == *column_scale,
            (own, column) => own == *column,
        }
    }

    /// The same kind, but producing values for a column whose zone label is `column`'s
    /// (keeps the catalog's timestamp type when a stream's schema omits the zone).
    pub fn adapted_to(&self, column: &DataType) -> Self {
        match (self, column) {
            (Self::TimestampMillis { .. }, DataType::Timestamp(_, tz)) => {
                Self::TimestampMillis { timezone: tz.as_ref().map(|t| t.to_string()) }
            }
            (Self::TimestampMicros { .. }, DataType::Timestamp(_, tz)) => {
                Self::TimestampMicros { timezone: tz.as_ref().map(|t| t.to_string()) }
            }
            (Self::Decimal { scale, .. }, DataType::Decimal128(precision, _)) => {
                Self::Decimal { precision: *precision, scale: *scale }
            }
            (Self::ZonedTimestampNanos, DataType::Timestamp(TimeUnit::Microsecond, _)) => Self::ZonedTimestamp,
            (kind, _) => kind.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_semantic_type_maps() {
        let connect_type = |name: &str| match name {
            "io.debezium.time.Date" | "io.debezium.time.Time" | "io.debezium.time.Year" | "org.apache.kafka.connect.data.Date"
            | "org.apache.kafka.connect.data.Time" => "int32",
            "io.debezium.time.ZonedTimestamp" | "io.debezium.time.ZonedTime" | "io.debezium.time.IsoDate"
            | "io.debezium.time.IsoTime" | "io.debezium.time.IsoTimestamp" | "io.debezium.time.Interval"
            | "io.debezium.data.Json" | "io.debezium.data.Uuid" | "io.debezium.data.Enum" | "io.debezium.data.EnumSet"
            | "io.debezium.data.Xml" | "io.debezium.data.Ltree" => "string",
            "org.apache.kafka.connect.data.Decimal" | "io.debezium.data.Bits" => "bytes",
            "io.debezium.data.VariableScaleDecimal" | "io.debezium.data.geometry.Geometry"
            | "io.debezium.data.geometry.Geography" | "io.debezium.data.geometry.Point" => "struct",
            "io.debezium.data.FloatVector" | "io.debezium.data.DoubleVector" => "array",
            "io.debezium.data.SparseVector" | "io.debezium.data.SparseDoubleVector" => "struct",
            _ => "int64",
        };
        for name in KNOWN_SEMANTIC_TYPES {
            let kind = DebeziumType::from_connect("c", connect_type(name), Some(name), Some((10, 2)));
            let kind = kind.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(retina_core::schema::is_supported_type(&kind.arrow_type()), "{name} -> {:?}", kind.arrow_type());
        }
    }

    #[test]
    fn unknown_types_name_field_and_type() {
        let error = DebeziumType::from_connect("geo", "struct", Some("io.debezium.data.geometry.Polygon3D"), None)
            .expect_err("unknown semantic type");
        let message = error.to_string();
        assert!(message.contains("geo") && message.contains("io.debezium.data.geometry.Polygon3D"), "{message}");
        let error = DebeziumType::from_connect("x", "decimal", None, None).expect_err("unknown primitive");
        assert!(error.to_string().contains("decimal"));
        assert_eq!(DebeziumType::from_connect("x", "array", None, None).map(|k| k.arrow_type()), Ok(DataType::Utf8), "arrays as JSON text");
        let missing_scale =
            DebeziumType::from_connect("price", "bytes", Some("org.apache.kafka.connect.data.Decimal"), None);
        assert!(missing_scale.expect_err("no scale").to_string().contains("price.parameters.scale"));
        // Flink CDC's all-types schema: scale 65 with precision 1.
        let decimal = Some("org.apache.kafka.connect.data.Decimal");
        let wide = DebeziumType::from_connect("big", "bytes", decimal, Some((1, 65))).expect_err("scale 65").to_string();
        assert!(wide.contains("big.parameters.scale") && wide.contains("at most 38") && wide.contains("65"), "{wide}");
        let widest = DebeziumType::from_connect("c", "bytes", decimal, Some((1, 38))).map(|k| k.arrow_type());
        assert_eq!(widest, Ok(DataType::Decimal128(38, 38)));
    }

    #[test]
    fn timestamps_fit_columns_with_any_zone_label_of_the_same_unit() {
        let micros = DebeziumType::TimestampMicros { timezone: None };
        assert!(micros.fits_column(&DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))));
        assert!(!micros.fits_column(&DataType::Timestamp(TimeUnit::Nanosecond, None)));
        assert!(!DebeziumType::Int32.fits_column(&DataType::Int64));
        let decimal = DebeziumType::Decimal { precision: 38, scale: 2 };
        assert!(decimal.fits_column(&DataType::Decimal128(12, 2)));
        assert!(!decimal.fits_column(&DataType::Decimal128(12, 3)));
    }
}
