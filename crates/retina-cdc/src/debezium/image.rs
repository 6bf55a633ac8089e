//! A row image (`before` / `after` / key payload) tokenized once, in the same pass as
//! its message: field names with scalar values, converted to typed columns only once
//! the table (and so each column's kind) is known. Debezium writes the images before
//! the `source` block that names the table, so the alternative, capturing the image
//! raw and parsing it again, scans every image twice.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One JSON value of an image.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(Cow<'a, str>),
    /// `io.debezium.data.VariableScaleDecimal`: `{"scale": s, "value": base64}`.
    VariableDecimal { scale: i64, value: Cow<'a, str> },
    /// `io.debezium.data.geometry.Geometry` / `Geography` / `Point`; boxed, so the
    /// common scalars stay small (every image field holds one).
    Geometry(Box<Geometry<'a>>),
    /// An array (Connect `array`: PostgreSQL arrays, vectors), as compact JSON text:
    /// stored as text, since no typed list column exists yet.
    Array(Box<str>),
    /// An object that is neither of the above (Connect `map`: PostgreSQL's hstore in
    /// `hstore.handling.mode=map`), as compact JSON text with sorted keys.
    Map(Box<str>),
    /// An object that starts like a decimal or geometry and is neither: no column
    /// kind accepts it.
    Nested(&'static str),
}

/// `io.debezium.data.geometry.Geometry` / `Geography`: `{"wkb": base64, "srid": n}`,
/// and `io.debezium.data.geometry.Point`: `{"x": .., "y": .., "wkb": .., "srid": ..}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry<'a> {
    pub wkb: Option<Cow<'a, str>>,
    pub srid: Option<i64>,
    pub x: Option<f64>,
    pub y: Option<f64>,
}

/// The fields of an image in message order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Image<'a> {
    pub fields: Vec<(Cow<'a, str>, Scalar<'a>)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Image<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ImageVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ImageVisitor<'a> {
            type Value = Image<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                // A string here is most likely a MongoDB connector's document.
                f.write_str("a row image object (MongoDB events, whose documents come as JSON text, are not supported)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Image<'a>, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(12));
                while let Some(name) = map.next_key::<BorrowedName<'a>>()? {
                    let value = map.next_value::<Scalar<'a>>()?;
                    fields.push((name.0, value));
                }
                Ok(Image { fields })
            }
        }
        deserializer.deserialize_map(ImageVisitor(std::marker::PhantomData))
    }
}

/// A field name, borrowed from the input when it has no escapes.
struct BorrowedName<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedName<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_str(ScalarVisitor(std::marker::PhantomData))? {
            Scalar::Str(name) => Ok(BorrowedName(name)),
            _ => Err(de::Error::custom("a field name must be a string")),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor(std::marker::PhantomData))
    }
}

struct ScalarVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ScalarVisitor<'a> {
    type Value = Scalar<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a column value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar<'a>, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar<'a>, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar<'a>, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar<'a>, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar<'a>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            items.push(item);
        }
        let text = serde_json::Value::Array(items).to_string();
        Ok(Scalar::Array(text.into_boxed_str()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar<'a>, A::Error> {
        struct_scalar(map)
    }
}

/// The struct-valued column values Debezium writes (a variable-scale decimal, a
/// geometry or point); an object whose first field is none of theirs is a
/// [`Scalar::Map`], and any other object [`Scalar::Nested`].
pub(crate) fn struct_scalar<'de: 'a, 'a, A: MapAccess<'de>>(mut map: A) -> Result<Scalar<'a>, A::Error> {
    let (mut scale, mut value, mut other) = (None, None, false);
    let (mut wkb, mut srid, mut x, mut y, mut geometry) = (None, None, None, None, false);
    let number = |scalar: Scalar<'_>| match scalar {
        Scalar::I64(v) => Some(v as f64),
        Scalar::U64(v) => Some(v as f64),
        Scalar::F64(v) => Some(v),
        _ => None,
    };
    let mut first = true;
    while let Some(key) = map.next_key::<BorrowedName<'a>>()? {
        const STRUCT_FIELDS: [&str; 6] = ["scale", "value", "wkb", "srid", "x", "y"];
        if std::mem::take(&mut first) && !STRUCT_FIELDS.contains(&key.0.as_ref()) {
            return map_text(key.0, map);
        }
        match key.0.as_ref() {
            "scale" => match map.next_value::<Scalar<'a>>()? {
                Scalar::I64(s) => scale = Some(s),
                Scalar::U64(s) => scale = i64::try_from(s).ok(),
                _ => other = true,
            },
            "value" => match map.next_value::<Scalar<'a>>()? {
                Scalar::Str(text) => value = Some(text),
                _ => other = true,
            },
            "wkb" => {
                geometry = true;
                match map.next_value::<Scalar<'a>>()? {
                    Scalar::Str(text) => wkb = Some(text),
                    Scalar::Null => {}
                    _ => other = true,
                }
            }
            "srid" => {
                geometry = true;
                match map.next_value::<Scalar<'a>>()? {
                    Scalar::I64(v) => srid = Some(v),
                    Scalar::U64(v) => srid = i64::try_from(v).ok().or_else(|| { other = true; None }),
                    Scalar::Null => {}
                    _ => other = true,
                }
            }
            "x" | "y" => {
                geometry = true;
                let axis = key.0.as_ref() == "x";
                match number(map.next_value::<Scalar<'a>>()?) {
                    Some(v) if axis => x = Some(v),
                    Some(v) => y = Some(v),
                    None => other = true,
                }
            }
            _ => {
                map.next_value::<IgnoredAny>()?;
                other = true;
            }
        }
    }
    if first {
        return Ok(Scalar::Map("{}".into())); // no fields: an empty map
    }
    Ok(match (scale, value, other, geometry) {
        (Some(scale), Some(value), false, false) => Scalar::VariableDecimal { scale, value },
        (None, None, false, true) => Scalar::Geometry(Box::new(Geometry { wkb, srid, x, y })),
        _ => Scalar::Nested("an object"),
    })
}

/// The rest of an object whose first key is `first`, as [`Scalar::Map`].
fn map_text<'de, 'a, A: MapAccess<'de>>(first: Cow<'a, str>, mut map: A) -> Result<Scalar<'a>, A::Error> {
    let mut object = serde_json::Map::new();
    object.insert(first.into_owned(), map.next_value::<serde_json::Value>()?);
    while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
        object.insert(key, value);
    }
    Ok(Scalar::Map(serde_json::Value::Object(object).to_string().into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_every_scalar_once() {
        let image: Image = serde_json::from_str(r#"{"a":null,"b":true,"c":-1,"d":18446744073709551615,"e":1.5,"f":"x\"y","g":{"scale":2,"value":"AQ=="},"h":[1],"i":{"k":1}}"#)
            .expect("image");
        let values: Vec<&Scalar> = image.fields.iter().map(|(_, v)| v).collect();
        assert_eq!(values[0], &Scalar::Null);
        assert_eq!(values[1], &Scalar::Bool(true));
        assert_eq!(values[2], &Scalar::I64(-1));
        assert_eq!(values[3], &Scalar::U64(u64::MAX));
        assert_eq!(values[4], &Scalar::F64(1.5));
        assert_eq!(values[5], &Scalar::Str("x\"y".into()));
        assert_eq!(values[6], &Scalar::VariableDecimal { scale: 2, value: "AQ==".into() });
        assert_eq!(values[7], &Scalar::Array("[1]".into()));
        assert_eq!(values[8], &Scalar::Map(r#"{"k":1}"#.into()));
        let image: Image = serde_json::from_str(
            r#"{"g":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":4326},"p":{"x":1.0,"y":2,"wkb":null,"srid":null},"bad":{"wkb":"AQ==","scale":1}}"#,
        )
        .expect("geometry image");
        assert_eq!(
            image.fields[0].1,
            Scalar::Geometry(Box::new(Geometry { wkb: Some("AQEAAAAAAAAAAADwPwAAAAAAAABA".into()), srid: Some(4326), x: None, y: None }))
        );
        assert_eq!(image.fields[1].1, Scalar::Geometry(Box::new(Geometry { wkb: None, srid: None, x: Some(1.0), y: Some(2.0) })));
        assert_eq!(image.fields[2].1, Scalar::Nested("an object"));
        assert!(serde_json::from_str::<Image>("[1]").is_err());
        let mongo = serde_json::from_str::<Image>(r#""{\"_id\": 1}""#).expect_err("a document as text").to_string();
        assert!(mongo.contains("MongoDB events") && mongo.contains("not supported"), "{mongo}");
    }
}
