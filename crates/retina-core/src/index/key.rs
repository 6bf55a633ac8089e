//! Encoded primary keys as the index keeps them: bytes stored inline when short, and
//! the one hash that picks the shard owning a key and places the key in that shard's
//! single-point index, computed once per change.

use std::cell::RefCell;

use crate::value::Value;

/// A stable 64-bit hash of primary-key bytes. Stable across runs and versions
/// (unlike std's or hashbrown's hashers), because shard ownership is persisted.
pub fn stable_key_hash(key: &[u8]) -> u64 {
    const SEED: u64 = 0x9E37_79B9_7F4A_7C15;
    const MUL: u64 = 0xBF58_476D_1CE4_E5B9;
    let mut hash = SEED ^ key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunks_exact yields 8 bytes"));
        hash = (hash ^ word).wrapping_mul(MUL).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    hash = (hash ^ u64::from_le_bytes(tail)).wrapping_mul(MUL);
    // Final avalanche (splitmix64).
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0x94D0_49BB_1331_11EB);
    hash ^ (hash >> 31)
}

/// The shard (of `shards`) that owns `key`.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    shard_of_hash(stable_key_hash(key), shards)
}

fn shard_of_hash(hash: u64, shards: usize) -> usize {
    (hash % shards.max(1) as u64) as usize
}

/// An encoded primary key with its [`stable_key_hash`], hashed where the change is
/// routed (the submitting thread) so the owning shard does not hash it again; a
/// short key travels inline, so routing it allocates nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashedKey {
    key: StoredKey,
    hash: u64,
}

impl HashedKey {
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self { key: StoredKey::new(bytes), hash: stable_key_hash(bytes) }
    }

    /// The key that [`crate::value::encode_key`] makes of `values`, encoded in a
    /// buffer each thread reuses: routing encodes the key of every change, and a
    /// `Vec` per key was an allocation and a free on that path. A key equal to
    /// `known` (an update that keeps its key) is `known` again, not hashed twice.
    pub fn encode<'a>(values: impl IntoIterator<Item = &'a Value>, known: Option<&HashedKey>) -> Self {
        thread_local! {
            static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        BUFFER.with_borrow_mut(|buffer| {
            buffer.clear();
            for value in values {
                value.encode_key_part(buffer);
            }
            match known {
                Some(known) if known.bytes() == buffer.as_slice() => known.clone(),
                _ => Self::from_bytes(buffer),
            }
        })
    }

    pub fn bytes(&self) -> &[u8] {
        self.key.as_bytes()
    }

    pub(crate) fn stored(&self) -> &StoredKey {
        &self.key
    }

    /// [`stable_key_hash`] of the bytes.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The shard (of `shards`) that owns this key, as [`shard_of`] gives it.
    pub fn shard(&self, shards: usize) -> usize {
        shard_of_hash(self.hash, shards)
    }
}

/// Key bytes stored without a heap allocation up to this length: every key of the
/// CH-benCHmark tables (up to four integer columns, 20 bytes encoded) and short
/// strings. Longer keys go to the heap as before.
const INLINE_KEY_BYTES: usize = 22;

/// An encoded primary key as the index stores it: 24 bytes, inline when short.
/// A `Box<[u8]>` per key cost a heap allocation on every insert and a pointer
/// chase on every probe; no crate's small-vector fits in 24 bytes with a 22-byte
/// inline capacity (smallvec's is 32 bytes for that), so it is written here.
/// Equal keys have equal representations (the inline tail is zeroed), so equality
/// compares the fixed-size array without a call to `memcmp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoredKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY_BYTES] },
    Heap(Box<[u8]>),
}

impl StoredKey {
    pub(crate) fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE_KEY_BYTES {
            let mut bytes = [0u8; INLINE_KEY_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            StoredKey::Inline { len: key.len() as u8, bytes }
        } else {
            StoredKey::Heap(key.into())
        }
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            StoredKey::Heap(bytes) => bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_spreads_keys() {
        assert_eq!(stable_key_hash(b"abc"), stable_key_hash(b"abc"));
        assert_ne!(stable_key_hash(b"abc"), stable_key_hash(b"abd"));
        let mut counts = [0usize; 4];
        for i in 0u64..10_000 {
            counts[shard_of(&i.to_be_bytes(), 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 2_000), "{counts:?}");
        let key = HashedKey::from_bytes(b"abc");
        assert_eq!((key.hash(), key.shard(3)), (stable_key_hash(b"abc"), shard_of(b"abc", 3)));
        let values = [Value::Int32(7), Value::Utf8("x".into())];
        let encoded = HashedKey::encode(&values, None);
        assert_eq!(encoded, HashedKey::from_bytes(&crate::value::encode_key(&values)));
        assert_eq!(HashedKey::encode(&values, Some(&encoded)), encoded);
        let other = HashedKey::encode(&[Value::Int32(8)], Some(&encoded));
        assert_eq!(other, HashedKey::from_bytes(&crate::value::encode_key(&[Value::Int32(8)])), "a different key is not the known one");
    }
}
