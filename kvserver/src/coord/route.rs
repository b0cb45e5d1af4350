//! Key → hash slot → shard, as Redis Cluster maps keys.
//!
//! The slot is CRC16 (XMODEM) of the key, or of its `{hash tag}` when it has a non-empty one,
//! modulo 16384. Shards own contiguous slot ranges, so the same numbers serve CLUSTER SLOTS later.

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// Number of hash slots.
pub const SLOTS: usize = 16384;

/// The part of the key that is hashed: the first non-empty `{...}` section, or the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = memchr::memchr(b'{', key) {
        let rest = &key[open + 1..];
        if let Some(close) = memchr::memchr(b'}', rest) {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// The Redis Cluster hash slot of `key`.
pub fn slot(key: &[u8]) -> usize {
    usize::from(CRC16.checksum(hash_tag(key))) & (SLOTS - 1)
}

/// The shard owning `key` among `n` shards (contiguous slot ranges).
pub fn shard_of(key: &[u8], n: usize) -> usize {
    if n == 1 {
        0
    } else {
        slot(key) * n / SLOTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // Values from Redis Cluster's CLUSTER KEYSLOT.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
    }

    #[test]
    fn shards_cover_all_slots() {
        for n in 1..8 {
            let mut seen = vec![false; n];
            for i in 0..10_000u32 {
                let s = shard_of(&i.to_be_bytes(), n);
                assert!(s < n);
                seen[s] = true;
            }
            assert!(seen.iter().all(|&b| b));
        }
    }
}
