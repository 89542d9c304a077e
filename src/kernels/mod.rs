//! Hot kernels: dot product, axpy and the Adam row update (f32 moments here; BF16 moments
//! in [`bf16`]).
//!
//! Three implementations of each: [`scalar`] (the reference, plain loops), [`portable`]
//! (`wide`'s 8-lane vectors, which the workspace's `x86-64-v3` baseline compiles to AVX2 +
//! FMA and aarch64 to NEON) and, on x86-64, AVX-512 intrinsics chosen at run time when the
//! CPU has `avx512f`. [`kernels`] picks the table once, at first use;
//! `SLIDE_KERNELS=scalar|portable|avx512` overrides the choice (an unavailable choice falls
//! back to the best available). Every variant is property-tested against the scalar
//! reference.
//!
//! Dot products and axpy add in different orders in different sets, so their results agree
//! to rounding, not bit for bit (the tests bound the gap by the rounding error of two
//! summation orders); within a set, a BF16 row sums in its f32 twin's order, so it computes
//! exactly as its widened f32 row. The Adam updates (f32 and BF16 moments) are the same bits
//! in every set. A run uses one table throughout, so training stays deterministic for any
//! thread count.

#[cfg(target_arch = "x86_64")]
pub mod avx512_bf16;
pub mod bf16;
pub mod portable;
pub mod scalar;
pub mod scores;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;

mod adam_step;
mod prefetch;
mod table;

use std::sync::OnceLock;

pub use adam_step::AdamStep;
pub use bf16::{Values, ValuesMut};
pub use prefetch::{Ahead, prefetch_bytes};
pub use table::{AdamBf16Fn, AdamFn, AdamRowBf16Fn, Kernels};

/// The scalar reference kernels.
pub const SCALAR: Kernels = Kernels {
    name: "scalar",
    dot: scalar::dot,
    axpy: scalar::axpy,
    adam: scalar::adam,
    adam_bf16: bf16::adam,
    adam_row_bf16: bf16::adam_row,
    dot_bf16: bf16::dot,
    axpy_bf16: bf16::axpy,
    scores: scores::reference,
};

/// The `wide` kernels (AVX2 + FMA on x86-64, NEON on aarch64).
pub const PORTABLE: Kernels = Kernels {
    name: "portable",
    dot: portable::dot,
    axpy: portable::axpy,
    adam: portable::adam,
    adam_bf16: portable::adam_bf16,
    adam_row_bf16: portable::adam_row_bf16,
    dot_bf16: portable::dot_bf16,
    axpy_bf16: portable::axpy_bf16,
    scores: scores::portable,
};

/// The AVX-512 kernels, if this CPU has AVX-512F.
pub fn avx512() -> Option<Kernels> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some(x86_64::AVX512);
        }
    }
    None
}

/// Every kernel set this CPU can run, the reference first.
pub fn available() -> Vec<Kernels> {
    let mut sets = vec![SCALAR, PORTABLE];
    sets.extend(avx512());
    sets
}

/// The kernel set in use, chosen once: the best available, unless `SLIDE_KERNELS` names
/// another.
pub fn kernels() -> &'static Kernels {
    static CHOSEN: OnceLock<Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let best = avx512().unwrap_or(PORTABLE);
        match std::env::var("SLIDE_KERNELS").as_deref() {
            Ok("scalar") => SCALAR,
            Ok("portable") => PORTABLE,
            _ => best,
        }
    })
}

/// One line for logs on the kernels in use: the set's name, the CPU's features and how to
/// choose another set (`avx512 (CPU: avx2 fma avx512f avx512bf16; SLIDE_KERNELS=scalar|portable|avx512 overrides)`).
pub fn describe() -> String {
    format!(
        "{} (CPU: {}; SLIDE_KERNELS=scalar|portable|avx512 overrides)",
        kernels().name,
        cpu_features().join(" ")
    )
}

/// The SIMD features of this CPU that the kernels use (`avx2`, `fma`, `avx512f`,
/// `avx512bf16` on x86-64; `neon` on aarch64), detected at run time, for logs and
/// benchmark records beside [`Kernels::name`].
pub fn cpu_features() -> Vec<&'static str> {
    let mut found = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let flags = [
            ("avx2", has!("avx2")),
            ("fma", has!("fma")),
            ("avx512f", has!("avx512f")),
            ("avx512bf16", has!("avx512bf16")),
        ];
        found.extend(flags.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            found.push("neon");
        }
    }
    found
}

/// Whether exact evaluation can score with BF16 products ([`scores_bf16`]): the `avx512`
/// set in use on a CPU with AVX512-BF16 (x86-64 only). With `SLIDE_KERNELS=portable` or
/// `scalar` it is false, so such a run uses no AVX-512 instruction and measures what a CPU
/// without AVX-512 would run.
pub fn has_bf16_dot() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        kernels().name == x86_64::AVX512.name && avx512_bf16::has_bf16_dot()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
pub use avx512_bf16::{pack_inputs_bf16, pack_rows_bf16, scores_bf16};

/// Without x86-64 there is no BF16 scoring ([`has_bf16_dot`] is false, so nothing calls these).
#[cfg(not(target_arch = "x86_64"))]
pub fn pack_inputs_bf16(_: &[f32], _: usize, _: usize, _: &mut Vec<u32>) {
    unreachable!("BF16 scoring needs x86-64")
}

/// See the x86-64 version.
#[cfg(not(target_arch = "x86_64"))]
pub fn pack_rows_bf16(_: &[f32], _: usize, _: usize, _: usize, _: &mut Vec<u32>) {
    unreachable!("BF16 scoring needs x86-64")
}

/// See the x86-64 version.
#[cfg(not(target_arch = "x86_64"))]
pub fn scores_bf16(_: &[u32], _: usize, _: usize, _: &[u32], _: usize, _: &mut [f32]) {
    unreachable!("BF16 scoring needs x86-64")
}

/// Bytes in a transparent huge page on x86-64 and most aarch64 Linux systems.
const HUGE_PAGE: usize = 2 << 20;

/// A zeroed buffer of `len` floats whose whole 2 MiB pages the kernel is asked to back with
/// transparent huge pages (Linux `madvise(MADV_HUGEPAGE)`; THP in its default `madvise` mode
/// honours it). For the weight matrices: a sample's active rows are scattered over hundreds
/// of megabytes, far more than the TLB covers in 4 KiB pages. The advice is given before any
/// page is touched (a fresh large allocation is not yet backed), so the pages are huge from
/// their first write; write before reading (a read fault first maps the shared zero page,
/// which a write then splits into small pages). Elsewhere, or where the kernel refuses, this
/// is a plain `vec![0.0; len]`.
pub fn zeroed_huge(len: usize) -> Vec<f32> {
    let mut buffer = vec![0.0f32; len];
    advise_huge_pages(&mut buffer);
    buffer
}

/// See [`zeroed_huge`]: advises the whole huge pages inside `buffer`.
fn advise_huge_pages(buffer: &mut [f32]) {
    let start = buffer.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(buffer);
    let (first, last) = (
        start.next_multiple_of(HUGE_PAGE),
        end / HUGE_PAGE * HUGE_PAGE,
    );
    if last <= first {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `first..last` lies inside `buffer`, which this function borrows mutably, and
        // is page-aligned as madvise requires; MADV_HUGEPAGE is advice about how to back the
        // range: it changes no byte of it (contents are preserved whatever the kernel does)
        // and invalidates no pointer. The result is ignored on purpose: a kernel without THP
        // says EINVAL and the buffer simply keeps 4 KiB pages.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

/// [`prefetch_bytes`] of `data`: for rows read in an order the hardware prefetcher cannot
/// guess, such as a sample's active neurons.
#[inline]
pub fn prefetch(data: &[f32]) {
    prefetch_bytes(data.as_ptr().cast(), std::mem::size_of_val(data));
}

/// How many rows ahead a scan over rows (a layer's active rows in the sampled forward
/// pass, every row in an exact ranking) asks for a row with [`prefetch_values`].
pub const PREFETCH_AHEAD: usize = 4;

/// [`prefetch`] of a row of either precision.
#[inline]
pub fn prefetch_values(data: Values<'_>) {
    let (start, bytes) = data.bytes();
    prefetch_bytes(start, bytes);
}

/// `sum(w[indices[i]] * values[i])`: a dot product with a sparse vector. Indices must be
/// below `w.len()` (checked, like slice indexing). Eight independent partial sums (added
/// pairwise at the end) keep the adds from waiting on each other: one running sum made
/// every element wait the full latency of the previous add, which at 512 nonzeros per dot
/// was the largest cost of a layer fed by a sampled layer.
#[inline]
pub fn sparse_dot(w: &[f32], indices: &[u32], values: &[f32]) -> f32 {
    sparse_dot_by(|i| w[i], indices, values)
}

/// [`sparse_dot`] with a row of either precision.
#[inline]
pub fn sparse_dot_row(w: Values<'_>, indices: &[u32], values: &[f32]) -> f32 {
    match w {
        Values::F32(w) => sparse_dot(w, indices, values),
        Values::Bf16(w) => sparse_dot_by(|i| bf16::to_f32(w[i]), indices, values),
    }
}

/// [`sparse_dot`] over the row whose value `i` is `w(i)`.
#[inline(always)]
fn sparse_dot_by(w: impl Fn(usize) -> f32, indices: &[u32], values: &[f32]) -> f32 {
    let n = indices.len().min(values.len());
    let (indices, values) = (&indices[..n], &values[..n]);
    let mut acc = [0.0f32; 8];
    let chunks = indices.chunks_exact(8).zip(values.chunks_exact(8));
    for (i, v) in chunks {
        for k in 0..8 {
            acc[k] += w(i[k] as usize) * v[k];
        }
    }
    let tail = n - n % 8;
    for (k, (&i, &v)) in indices[tail..].iter().zip(&values[tail..]).enumerate() {
        acc[k] += w(i as usize) * v;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advised buffer is zeroed, writable end to end, and, where the kernel runs THP in
    /// `madvise` or `always` mode, backed by huge pages (read from `/proc/self/smaps`).
    #[test]
    fn huge_buffers_are_zeroed_and_get_huge_pages_where_the_kernel_offers_them() {
        let len = 16 << 20; // 64 MiB of floats
        let mut buffer = zeroed_huge(len);
        assert_eq!(buffer.len(), len);
        // Written before it is read, as a layer's initialisation does: a read fault first
        // would map the shared zero page, which a later write splits into small pages.
        for (i, x) in buffer.iter_mut().enumerate().step_by(1024) {
            *x = i as f32;
        }
        for (i, &x) in buffer.iter().enumerate() {
            let expected = if i % 1024 == 0 { i as f32 } else { 0.0 };
            assert_eq!(x, expected, "element {i}");
        }
        let small = zeroed_huge(3);
        assert_eq!(small, [0.0; 3]);

        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        let Ok(mode) = mode else {
            eprintln!("no transparent huge pages on this system: backing not checked");
            return;
        };
        if !(mode.contains("[madvise]") || mode.contains("[always]")) {
            eprintln!(
                "transparent huge pages are off ({}): backing not checked",
                mode.trim()
            );
            return;
        }
        // The advice splits the allocation's mapping in up to three: sum over all mappings
        // that overlap the buffer.
        let start = buffer.as_ptr() as usize;
        let end = start + std::mem::size_of_val(&buffer[..]);
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        let mut huge_kib = 0;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((from, to)) = first.split_once('-')
                && let (Ok(from), Ok(to)) = (
                    usize::from_str_radix(from, 16),
                    usize::from_str_radix(to, 16),
                )
            {
                inside = from < end && start < to;
            } else if inside && let Some(kib) = line.strip_prefix("AnonHugePages:") {
                huge_kib += kib
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<usize>()
                    .expect("a size in kB");
            }
        }
        // 64 MiB hold at least 31 whole 2 MiB pages; the kernel may fall back for a few.
        assert!(huge_kib >= 16 * 2048, "{huge_kib} KiB in huge pages");
    }
}
