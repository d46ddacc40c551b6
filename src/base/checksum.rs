//! A 64-bit FNV-1a hash: the data's fingerprint (which ties a result, a checkpoint or a score
//! cache to its data) and a checkpoint's checksum (which catches a file edited by hand). Not a
//! cryptographic hash: it detects accidents and edits, not an adversary.

/// FNV-1a over bytes fed in order: h ← (h ⊕ byte) · 0x100000001b3 from 0xcbf29ce484222325.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`.
    pub fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    pub fn value(self) -> u64 {
        self.0
    }

    /// The hash of `bytes` alone.
    pub fn of(bytes: &[u8]) -> u64 {
        let mut h = Self::new();
        h.eat(bytes);
        h.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_test_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a" and "foobar".
        assert_eq!(Fnv1a::of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv1a::of(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fnv1a::of(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
