//! What the benches share: the fixed seed and a small generator, so that every dataset is
//! the same from run to run and the benches need no `rand` dependency.

/// Fixed seed of every dataset.
pub(crate) const SEED: u64 = 0x5ca1_ab1e_d00d_f00d;

/// SplitMix64: a small, well-mixed generator.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (the modulo bias is irrelevant for a benchmark dataset).
    #[allow(dead_code)] // Used by some benches only; each bench compiles this module alone.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
