//! PostgreSQL column types as Retina columns.
//!
//! | PostgreSQL | Arrow column | note |
//! |---|---|---|
//! | bool, int2, int4, int8, float4, float8 | Boolean, Int16, Int32, Int64, Float32, Float64 | |
//! | numeric(p, s), p ≤ 38 | Decimal128(p, s) | exact; NaN and ±Infinity are errors; a scale above p (PostgreSQL 15) is Decimal128(s, s), a negative scale Decimal128(p − s, 0) |
//! | numeric (unconstrained) or p > 38 | Utf8 | exact decimal text: no fixed scale holds every value, and a rounded float would not be exact |
//! | text, varchar, char(n), name, citext | Utf8 | char(n) keeps its padding, as PostgreSQL prints it |
//! | bytea | Binary | |
//! | date | Date32 | ±infinity as i32::MAX / i32::MIN |
//! | time | Time64(µs) | |
//! | timestamp / timestamptz | Timestamp(µs) / Timestamp(µs, UTC) | ±infinity as i64::MAX / i64::MIN, PostgreSQL's own sentinels |
//! | interval, uuid, json, jsonb, enums, one-dimensional arrays, timetz | Utf8 | PostgreSQL's text form, which casts back exactly (`'{1,2}'::int[]`, `'1 day'::interval`) |
//! | anything else | error naming table and column, or Utf8 with `unsupported_types=text` | |
//!
//! Values arrive in text form (pgoutput and `COPY` print them with the type's output
//! function); the session settings in [`SESSION_SETTINGS`] fix that form.

mod temporal;
mod text;

use std::collections::HashMap;

use arrow_schema::{DataType, TimeUnit};

pub use text::parse_value;

/// Settings of every session whose text output we parse (walsender and copy), so
/// dates, times and floats print in one known, exact form.
pub const SESSION_SETTINGS: &str = "SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; SET TimeZone = 'UTC'; \
     SET extra_float_digits = 3; SET bytea_output = 'hex'";

/// How a column is stored and parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgType {
    Boolean,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Decimal { precision: u8, scale: i8 },
    Binary,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    /// Carried as PostgreSQL prints it.
    Text,
}

impl PgType {
    pub fn data_type(&self) -> DataType {
        match self {
            PgType::Boolean => DataType::Boolean,
            PgType::Int16 => DataType::Int16,
            PgType::Int32 => DataType::Int32,
            PgType::Int64 => DataType::Int64,
            PgType::Float32 => DataType::Float32,
            PgType::Float64 => DataType::Float64,
            PgType::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
            PgType::Binary => DataType::Binary,
            PgType::Date => DataType::Date32,
            PgType::Time => DataType::Time64(TimeUnit::Microsecond),
            PgType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            PgType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            PgType::Text => DataType::Utf8,
        }
    }
}

/// What `pg_type` says of a type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    pub name: String,
    /// `b` base, `e` enum, `d` domain, `c` composite, `r` range, `m` multirange, `p` pseudo.
    pub typtype: char,
    /// `A` for arrays.
    pub category: char,
    /// The base type of a domain.
    pub base_oid: u32,
    /// The element type of an array (0 otherwise).
    pub element_oid: u32,
}

/// The server's types by oid (loaded from `pg_type`; refreshed when a new one shows up).
#[derive(Clone, Debug, Default)]
pub struct TypeCatalog {
    types: HashMap<u32, TypeInfo>,
}

/// The query that loads a [`TypeCatalog`].
pub const TYPE_CATALOG_QUERY: &str =
    "SELECT oid, typname, typtype, typcategory, typbasetype, typelem FROM pg_catalog.pg_type";

impl TypeCatalog {
    /// From rows of [`TYPE_CATALOG_QUERY`]; malformed rows are skipped (the type then
    /// counts as unknown and is reported where a column uses it).
    pub fn from_rows(rows: &[Vec<Option<String>>]) -> Self {
        let mut types = HashMap::with_capacity(rows.len());
        for row in rows {
            let field = |i: usize| row.get(i).and_then(|v| v.as_deref());
            let (Some(oid), Some(name), Some(typtype), Some(category), Some(base), Some(element)) =
                (field(0), field(1), field(2), field(3), field(4), field(5))
            else {
                continue;
            };
            let (Ok(oid), Ok(base_oid), Ok(element_oid)) = (oid.parse(), base.parse(), element.parse()) else { continue };
            types.insert(
                oid,
                TypeInfo {
                    name: name.to_string(),
                    typtype: typtype.chars().next().unwrap_or('b'),
                    category: category.chars().next().unwrap_or('U'),
                    base_oid,
                    element_oid,
                },
            );
        }
        Self { types }
    }

    pub fn get(&self, oid: u32) -> Option<&TypeInfo> {
        self.types.get(&oid)
    }

    /// The type's name for messages (`oid 1234` when unknown).
    pub fn name(&self, oid: u32) -> String {
        self.types.get(&oid).map(|t| t.name.clone()).unwrap_or_else(|| format!("oid {oid}"))
    }

    /// How a column of type `oid` with modifier `typmod` is stored, or `None` when
    /// Retina has no mapping for it. Domains resolve to their base type.
    pub fn column_kind(&self, oid: u32, typmod: i32) -> Option<PgType> {
        let mut oid = oid;
        for _ in 0..16 {
            if let Some(kind) = builtin_kind(oid, typmod) {
                return Some(kind);
            }
            let info = self.types.get(&oid)?;
            match (info.typtype, info.category) {
                ('d', _) => oid = info.base_oid,
                ('e', _) => return Some(PgType::Text),
                // One-dimensional arrays of any type print as `{a,b}` literals; the
                // column type does not say the dimension, so multi-dimensional values
                // are carried the same way.
                (_, 'A') => return Some(PgType::Text),
                _ => return None,
            }
        }
        None
    }
}

/// numeric's typmod: `((precision << 16) | scale) + 4`; -1 means unconstrained.
fn numeric_kind(typmod: i32) -> PgType {
    if typmod < 4 {
        return PgType::Text;
    }
    let packed = typmod - 4;
    let precision = (packed >> 16) & 0xFFFF;
    // The scale is an 11-bit signed field since PostgreSQL 15 (negative scales).
    let scale = ((packed & 0x7FF) ^ 0x400) - 0x400;
    // Arrow and Parquet want 0 <= scale <= precision. numeric(5, 6) holds values
    // below 0.1 with at most 6 digits after the point: Decimal128(6, 6). numeric(3, -2)
    // holds integers of at most 5 digits: Decimal128(5, 0), exact at scale 0.
    let (precision, scale) = if scale < 0 { (precision - scale, 0) } else { (precision.max(scale), scale) };
    match (u8::try_from(precision), i8::try_from(scale)) {
        (Ok(precision), Ok(scale)) if (1..=38).contains(&precision) => PgType::Decimal { precision, scale },
        _ => PgType::Text,
    }
}

fn builtin_kind(oid: u32, typmod: i32) -> Option<PgType> {
    Some(match oid {
        16 => PgType::Boolean,
        17 => PgType::Binary,
        21 => PgType::Int16,
        23 => PgType::Int32,
        20 => PgType::Int64,
        // oid, xid and cid: unsigned 32-bit, widened.
        26 | 28 | 29 => PgType::Int64,
        700 => PgType::Float32,
        701 => PgType::Float64,
        1700 => numeric_kind(typmod),
        // "char", name, text, bpchar, varchar
        18 | 19 | 25 | 1042 | 1043 => PgType::Text,
        1082 => PgType::Date,
        1083 => PgType::Time,
        1114 => PgType::Timestamp,
        1184 => PgType::TimestampTz,
        // interval, timetz, uuid, json, jsonb, xml, inet, cidr, macaddr, money, bit, varbit
        1186 | 1266 | 2950 | 114 | 3802 | 142 | 869 | 650 | 829 | 790 | 1560 | 1562 => PgType::Text,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_modifiers() {
        assert_eq!(numeric_kind(((12 << 16) | 2) + 4), PgType::Decimal { precision: 12, scale: 2 });
        assert_eq!(numeric_kind(-1), PgType::Text, "unconstrained");
        assert_eq!(numeric_kind(((50 << 16) | 2) + 4), PgType::Text, "too wide for Decimal128");
        // numeric(3, -2): the scale field is 0x7FE; integers of up to 5 digits.
        assert_eq!(numeric_kind(((3 << 16) | 0x7FE) + 4), PgType::Decimal { precision: 5, scale: 0 });
        // numeric(5, 6): values below 0.1, 6 digits after the point.
        assert_eq!(numeric_kind(((5 << 16) | 6) + 4), PgType::Decimal { precision: 6, scale: 6 });
        assert_eq!(numeric_kind(((37 << 16) | 0x7FD) + 4), PgType::Text, "37 digits and 3 zeros do not fit 38");
        for typmod in [((12 << 16) | 2) + 4, ((3 << 16) | 0x7FE) + 4, ((5 << 16) | 6) + 4] {
            assert!(retina_core::schema::is_supported_type(&numeric_kind(typmod).data_type()), "{typmod}");
        }
    }

    #[test]
    fn domains_enums_and_arrays_resolve_through_the_catalog() {
        let rows = |r: &[&str]| r.iter().map(|v| Some(v.to_string())).collect::<Vec<_>>();
        let catalog = TypeCatalog::from_rows(&[
            rows(&["90000", "mood", "e", "E", "0", "0"]),
            rows(&["90001", "positive_int", "d", "N", "23", "0"]),
            rows(&["1007", "_int4", "b", "A", "0", "23"]),
            rows(&["90002", "complex", "c", "C", "0", "0"]),
            vec![None, None],
        ]);
        assert_eq!(catalog.column_kind(90000, -1), Some(PgType::Text));
        assert_eq!(catalog.column_kind(90001, -1), Some(PgType::Int32));
        assert_eq!(catalog.column_kind(1007, -1), Some(PgType::Text));
        assert_eq!(catalog.column_kind(90002, -1), None, "composites are not mapped");
        assert_eq!(catalog.column_kind(12345, -1), None);
        assert_eq!(catalog.name(90002), "complex");
        assert_eq!(catalog.name(12345), "oid 12345");
    }
}
