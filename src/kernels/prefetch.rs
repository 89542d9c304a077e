//! Prefetch hints: [`prefetch_bytes`] and [`Ahead`], a block fetched a few cache lines at a
//! time by a row kernel.

/// Asks the CPU to start loading the cache lines of the `bytes` bytes from `start` into L1:
/// a hint that reads nothing, cannot fault and changes no result (nothing on other
/// architectures). A pointer rather than a slice, so that a row another thread may be
/// writing can be named without a reference to it ([`DisjointRows`](crate::rows::DisjointRows)
/// hands out each row with the next one's block, as an [`Ahead`]).
#[inline]
pub fn prefetch_bytes(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        for offset in (0..bytes).step_by(64) {
            // SAFETY: a prefetch is only a hint: it never faults and has no effect on program
            // state, whatever the address; `wrapping_add` forms the address without any
            // access.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}

/// Bytes in a cache line, the unit of [`Ahead`]'s fetches.
const LINE: usize = 64;

/// The block of the row a row kernel's caller works on next, fetched a few cache lines at a
/// time while the kernel works on the current row ([`fetch`](Self::fetch) at each step of
/// its loop): spread out, the fetches overlap the current row's arithmetic. Asked for all at
/// once before the row (96 lines for a row of 1,024 BF16 weights and moments), they did
/// not: at the Amazon-670K shape on an AMD EPYC (2 threads) a step's output-row updates took
/// about 45 ms either way, and 33 ms with the fetches spread over the row before. A hint
/// only: it reads nothing and changes no result.
#[derive(Debug, Clone, Copy)]
pub struct Ahead {
    next: *const u8,
    end: *const u8,
}

impl Ahead {
    /// Nothing to fetch.
    pub const NONE: Ahead = Ahead {
        next: std::ptr::null(),
        end: std::ptr::null(),
    };

    /// The `bytes` bytes from `start` (a pointer, as for [`prefetch_bytes`]: the block may
    /// belong to a row another thread is writing).
    pub fn new(start: *const u8, bytes: usize) -> Self {
        Ahead {
            next: start,
            end: start.wrapping_add(bytes),
        }
    }

    /// Bytes not yet fetched.
    fn bytes_left(&self) -> usize {
        (self.end as usize).saturating_sub(self.next as usize)
    }

    /// Cache lines not yet fetched.
    pub fn lines(&self) -> usize {
        self.bytes_left().div_ceil(LINE)
    }

    /// Lines per step that fetch the rest in `steps` steps.
    pub fn per_step(&self, steps: usize) -> usize {
        self.lines().div_ceil(steps.max(1))
    }

    /// Fetches the next `lines` lines (those left, if fewer).
    #[inline(always)]
    pub fn fetch(&mut self, lines: usize) {
        let bytes = (lines * LINE).min(self.bytes_left());
        prefetch_bytes(self.next, bytes);
        self.next = self.next.wrapping_add(bytes);
    }

    /// Keeps the first `keep` bytes to fetch over the row's loop and fetches the line at
    /// `keep` at once: for an update that reads, of its block's last part, only the first
    /// value (a second moment per row).
    #[must_use]
    pub fn keep_then_line(self, keep: usize) -> Self {
        self.keep_and_line(keep, keep)
    }

    /// Keeps the first `keep` bytes to fetch over the row's loop and fetches the line at
    /// `line` (`>= keep`) at once: for an update that skips the bytes in between (the first
    /// moments when `beta1 = 0`) and reads only the first value of the block's last part.
    #[must_use]
    pub fn keep_and_line(mut self, keep: usize, line: usize) -> Self {
        let left = self.bytes_left();
        if line < left {
            prefetch_bytes(self.next.wrapping_add(line), LINE.min(left - line));
        }
        if keep < left {
            self.end = self.next.wrapping_add(keep);
        }
        self
    }

    /// Fetches every line left.
    pub fn finish(&mut self) {
        self.fetch(self.lines());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's lines are fetched in the steps asked for, never past its end, and an empty
    /// block has none.
    #[test]
    fn ahead_spreads_a_block_over_the_steps() {
        let block = vec![0u8; 6144];
        let mut ahead = Ahead::new(block.as_ptr(), block.len());
        assert_eq!(ahead.lines(), 96);
        // A row of 1,024 values in chunks of 16: 64 steps, 2 lines each.
        let per = ahead.per_step(64);
        assert_eq!(per, 2);
        for _ in 0..40 {
            ahead.fetch(per);
        }
        assert_eq!(ahead.lines(), 16);
        ahead.fetch(100);
        assert_eq!(ahead.lines(), 0);
        ahead.fetch(1);
        assert_eq!(ahead.lines(), 0);
        let mut partial = Ahead::new(block.as_ptr(), 100);
        assert_eq!((partial.lines(), partial.per_step(0)), (2, 2));
        partial.finish();
        assert_eq!(partial.lines(), 0);
        assert_eq!((Ahead::NONE.lines(), Ahead::NONE.per_step(8)), (0, 0));
    }

    /// A row's update that reads the weights (the first 2 KB of a 6 KB block) and one line
    /// of the last part keeps only the weights for its loop; past the block's end it keeps
    /// what is left.
    #[test]
    fn ahead_keeps_the_part_the_loop_reads() {
        let block = vec![0u8; 6144];
        let ahead = Ahead::new(block.as_ptr(), block.len());
        assert_eq!(ahead.keep_and_line(2048, 4096).lines(), 32);
        assert_eq!(ahead.keep_then_line(4096).lines(), 64);
        assert_eq!(ahead.keep_and_line(8192, 8192).lines(), 96);
        assert_eq!(Ahead::NONE.keep_and_line(64, 128).lines(), 0);
    }
}
