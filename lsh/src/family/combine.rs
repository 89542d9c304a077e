//! The combination of a table's `K` raw sub-hashes into one bucket code: exact
//! concatenation when the bits fit in `range_pow`, seeded folding otherwise (see the
//! [`family`](crate::family) module documentation).

use super::buffer::CodeBuffer;
use super::mix::mix64;
use super::params::LshParams;

/// Turns `K * L` raw sub-hashes into `L` bucket codes.
#[derive(Debug, Clone)]
pub(crate) struct Combiner {
    params: LshParams,
    bits: u32,
    exact: bool,
    salt: u64,
}

impl Combiner {
    pub(crate) fn new(params: LshParams, bits: u32, seed: u64) -> Self {
        let exact = (params.k as u64) * u64::from(bits) <= u64::from(params.range_pow);
        Combiner {
            params,
            bits,
            exact,
            salt: mix64(seed ^ 0x636f_6d62_696e_6572),
        }
    }

    /// `K`, `L` and `range_pow`.
    pub(crate) fn params(&self) -> LshParams {
        self.params
    }

    /// Bits each sub-hash contributes to an exactly concatenated code.
    pub(crate) fn bits(&self) -> u32 {
        self.bits
    }

    /// Reads `buf.raw`, writes `buf.codes`.
    pub(crate) fn combine<'b>(&self, buf: &'b mut CodeBuffer) -> &'b [u32] {
        let LshParams { k, l, range_pow } = self.params;
        buf.codes.resize(l, 0);
        let raw = &buf.raw[..k * l];
        for (code, subs) in buf.codes.iter_mut().zip(raw.chunks_exact(k)) {
            *code = if self.exact {
                let mask = (1u32 << self.bits) - 1;
                subs.iter()
                    .enumerate()
                    .fold(0, |acc, (j, &s)| acc | (s & mask) << (j as u32 * self.bits))
            } else {
                let h = subs.iter().fold(self.salt, |h, &s| mix64(h ^ u64::from(s)));
                (h >> (64 - range_pow)) as u32
            };
        }
        // Tables differ in their sub-hashes, so equal raw values in two tables are unrelated;
        // folding with one salt for all tables is therefore enough.
        &buf.codes
    }

    /// [`combine`](Self::combine) for `rows` vectors at once: `raw[i * LANES + lane]` is
    /// sub-hash `i` of vector `lane`; the codes go row after row into `out` (`rows * L`).
    /// The same codes, computed a sub-hash at a time for all lanes, so the seeded mixing of
    /// `LANES` vectors (16 for WTA's batched rows) runs side by side instead of as one chain
    /// per table.
    pub(crate) fn combine_lanes<const LANES: usize>(
        &self,
        raw: &[u32],
        rows: usize,
        out: &mut [u32],
    ) {
        let LshParams { k, l, range_pow } = self.params;
        debug_assert!(raw.len() >= k * l * LANES && out.len() >= rows * l && rows <= LANES);
        for t in 0..l {
            let subs = |j: usize| -> &[u32; LANES] {
                raw[(t * k + j) * LANES..][..LANES]
                    .try_into()
                    .expect("a sub-hash holds LANES values")
            };
            let mut codes = [0u32; LANES];
            if self.exact {
                let mask = (1u32 << self.bits) - 1;
                for j in 0..k {
                    let s = subs(j);
                    for lane in 0..LANES {
                        codes[lane] |= (s[lane] & mask) << (j as u32 * self.bits);
                    }
                }
            } else {
                let mut h = [self.salt; LANES];
                for j in 0..k {
                    let s = subs(j);
                    for lane in 0..LANES {
                        h[lane] = mix64(h[lane] ^ u64::from(s[lane]));
                    }
                }
                for lane in 0..LANES {
                    codes[lane] = (h[lane] >> (64 - range_pow)) as u32;
                }
            }
            for (lane, &code) in codes.iter().enumerate().take(rows) {
                out[lane * l + t] = code;
            }
        }
    }
}
