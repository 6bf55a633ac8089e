//! Which shard owns a primary key.

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
    (stable_key_hash(key) % shards.max(1) as u64) as usize
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
    }
}
