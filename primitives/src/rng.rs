//! SplitMix64: a small seeded generator for what must be the same on every run (a backoff's
//! jitter, generated test and benchmark data) or cheap and lock-free (the agent's sampling
//! draws), without a random-number crate. The one generator of the workspace.

/// The generator; the state is the seed to start from.
#[derive(Clone, Copy, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The step between states (the golden ratio in 64-bit fixed point). The n-th output is
    /// `mix(seed + n·GAMMA)`, so threads that advance a shared atomic counter by `GAMMA` and
    /// [`mix`](Self::mix) what it held draw from one sequence without a lock.
    pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    /// The output function: a state scrambled into a number. Pure arithmetic (no memory, no
    /// lock), so safe anywhere, a signal handler included.
    pub const fn mix(state: u64) -> u64 {
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        Self::mix(self.0)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index into a slice of `len` items (0 when it is empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// A number in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        fraction(self.next_u64())
    }
}

/// The top 53 bits of `x` as a number in [0, 1): every double there equally likely.
pub const fn fraction(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_splitmix64s() {
        // The first outputs for seed 0 given with the algorithm (Vigna, splitmix64.c).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert!(r.below(10) < 10);
        assert_eq!(r.index(0), 0);
        let f = r.next_f64();
        assert!((0.0..1.0).contains(&f), "{f}");
        assert_eq!(fraction(u64::MAX), 1.0 - 1.0 / (1u64 << 53) as f64);
        assert_eq!(fraction(0), 0.0);
    }
}
