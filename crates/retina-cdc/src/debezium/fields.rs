//! The fields of one message before they are interpreted: what serde reads from any
//! accepted shape, and what [`super::scan`] reads from a plain payload. Scalars stay
//! raw JSON text (`null` read as absent), interpreted once in `message`.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::image::Image;

/// A JSON value that is present, even when it is `null` (serde's `Option` would turn a
/// `null` into "absent").
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// A value's raw JSON text; `null` reads as absent.
fn raw_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de str>, D::Error> {
    Option::<&RawValue>::deserialize(deserializer).map(|raw| raw.map(RawValue::get))
}

/// Every top-level field any accepted shape may have; unknown fields are skipped.
/// The wrapper fields (`key`, `value`, `table`, `schema`, `payload`) stay raw values:
/// only the serde path reads wrappers.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Fields<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    pub key: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub value: Option<&'a RawValue>,
    /// In a `{"table":…,"key":…,"value":…}` wrapper: the table the transport names
    /// (a Kafka topic), for an event without a `source` block.
    #[serde(borrow, default)]
    pub table: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub schema: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub payload: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub op: Option<&'a str>,
    /// Images are tokenized in this pass (see [`Image`]).
    #[serde(borrow, default)]
    pub before: Option<Image<'a>>,
    #[serde(borrow, default)]
    pub after: Option<Image<'a>>,
    /// Parsed in the same pass (not captured raw and re-parsed): source and transaction
    /// blocks are a large share of every event.
    #[serde(borrow, default)]
    pub source: Option<Block<SourceFields<'a>>>,
    #[serde(borrow, default)]
    pub transaction: Option<Block<TransactionFields<'a>>>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub status: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub event_count: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub data_collections: Option<&'a str>,
}

/// A nested block: the object's fields, or what stood there instead (for the error).
#[derive(Debug)]
pub(super) enum Block<T> {
    Object(T),
    Null,
    Other(String),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Block<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BlockVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for BlockVisitor<T> {
            type Value = Block<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Block<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Block::Object)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Block<T>, E> {
                Ok(Block::Null)
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Block<T>, E> {
                Ok(Block::Null)
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Block<T>, E> {
                Ok(Block::Other(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Block<T>, E> {
                Ok(Block::Other(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Block<T>, E> {
                Ok(Block::Other(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Block<T>, E> {
                Ok(Block::Other(v.to_string()))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Block<T>, E> {
                Ok(Block::Other(format!("{v:?}")))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Block<T>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Block::Other("an array".into()))
            }
        }
        deserializer.deserialize_any(BlockVisitor(std::marker::PhantomData))
    }
}

/// The `source` block's fields that decoding reads.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SourceFields<'a> {
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub connector: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub db: Option<&'a str>,
    /// Vitess names the keyspace here and leaves `db` empty.
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub keyspace: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub schema: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub table: Option<&'a str>,
    #[serde(borrow, default, rename = "txId", deserialize_with = "raw_text")]
    pub tx_id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub sequence: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub file: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub pos: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub row: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub gtid: Option<&'a str>,
    /// Spanner's transaction id.
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub server_transaction_id: Option<&'a str>,
    /// `"true"`, `"first"`, `"last"`, `"incremental"`, ... (a boolean in old versions).
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub snapshot: Option<&'a str>,
}

/// The `transaction` block of a change event.
#[derive(Debug, Default, Deserialize)]
pub(super) struct TransactionFields<'a> {
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub total_order: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub data_collection_order: Option<&'a str>,
}
