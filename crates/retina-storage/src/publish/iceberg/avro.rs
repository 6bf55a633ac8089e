//! The Avro object container files Iceberg keeps its manifests in, written for
//! the few record shapes publication needs.
//!
//! Why not the `apache-avro` crate: Iceberg readers resolve manifest columns by the
//! `field-id` attributes of the writer schema in the file's header, so that schema
//! must reach the file verbatim; here it is a string we write ourselves, and the
//! values are encoded against it by the handful of rules below (zig-zag varints,
//! length-prefixed strings, union branch indexes), with no codec.

/// A value encoded by position against its schema.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Datum {
    Int(i32),
    Long(i64),
    Text(String),
    /// Fields in schema order.
    Record(Vec<Datum>),
    /// `["null", T]` unions: `None` is branch 0, `Some` branch 1.
    Optional(Option<Box<Datum>>),
}

impl Datum {
    pub fn optional_long(value: Option<i64>) -> Self {
        Self::Optional(value.map(|v| Box::new(Self::Long(v))))
    }

    pub fn optional_text(value: Option<&str>) -> Self {
        Self::Optional(value.map(|v| Box::new(Self::Text(v.to_string()))))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Int(v) => zigzag(*v as i64, out),
            Self::Long(v) => zigzag(*v, out),
            Self::Text(v) => bytes(v.as_bytes(), out),
            Self::Record(fields) => fields.iter().for_each(|f| f.encode(out)),
            Self::Optional(None) => zigzag(0, out),
            Self::Optional(Some(value)) => {
                zigzag(1, out);
                value.encode(out);
            }
        }
    }
}

fn zigzag(value: i64, out: &mut Vec<u8>) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(value: &[u8], out: &mut Vec<u8>) {
    zigzag(value.len() as i64, out);
    out.extend_from_slice(value);
}

/// An object container file: `schema` (Avro JSON) and `metadata` in the header,
/// then `records` in one block.
pub(crate) fn container_file(schema: &str, metadata: &[(&str, String)], records: &[Datum]) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    let mut entries: Vec<(&str, &[u8])> = vec![("avro.schema", schema.as_bytes()), ("avro.codec", b"null")];
    entries.extend(metadata.iter().map(|(k, v)| (*k, v.as_bytes())));
    zigzag(entries.len() as i64, &mut out);
    for (key, value) in entries {
        bytes(key.as_bytes(), &mut out);
        bytes(value, &mut out);
    }
    zigzag(0, &mut out);
    let sync: [u8; 16] = *uuid::Uuid::new_v4().as_bytes();
    out.extend_from_slice(&sync);
    if !records.is_empty() {
        let mut block = Vec::new();
        records.iter().for_each(|r| r.encode(&mut block));
        zigzag(records.len() as i64, &mut out);
        bytes(&block, &mut out);
        out.extend_from_slice(&sync);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_encode_as_the_avro_spec_shows() {
        let mut out = Vec::new();
        for v in [0i64, -1, 1, -64, 64] {
            zigzag(v, &mut out);
        }
        assert_eq!(out, vec![0x00, 0x01, 0x02, 0x7f, 0x80, 0x01]);
        let mut record = Vec::new();
        Datum::Record(vec![Datum::Text("ab".into()), Datum::optional_long(None), Datum::optional_long(Some(3))]).encode(&mut record);
        assert_eq!(record, vec![4, b'a', b'b', 0, 2, 6]);
        let file = container_file(r#""long""#, &[("k", "v".into())], &[Datum::Long(1)]);
        assert!(file.starts_with(b"Obj\x01"));
        assert!(file.windows(11).any(|w| w == b"avro.schema"));
    }
}
