//! Hot kernels: dot product, axpy and the Adam row update.
//!
//! Three implementations of each: [`scalar`] (the reference, plain loops), [`portable`]
//! (`wide::f32x8`, which the workspace's `x86-64-v3` baseline compiles to AVX2 + FMA) and,
//! on x86-64, AVX-512 intrinsics chosen at run time when the CPU has `avx512f`. [`kernels`]
//! picks the table once, at first use; `SLIDE_KERNELS=scalar|portable|avx512` overrides the
//! choice (an unavailable choice falls back to the best available). Every variant is
//! property-tested against the scalar reference.
//!
//! Variants add in different orders, so results agree to rounding, not bit for bit; a run
//! uses one table throughout, so training stays deterministic for any thread count.

pub mod portable;
pub mod scalar;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;

use std::sync::OnceLock;

/// Bias-corrected Adam constants for one update of one row (see [`AdamStep::new`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// `lr / (1 - beta1^t)`.
    pub step_size: f32,
    /// `1 / sqrt(1 - beta2^t)`.
    pub inv_sqrt_bias2: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator guard.
    pub eps: f32,
}

impl AdamStep {
    /// The constants for the `t`-th update (`t >= 1`) of a parameter, as in PyTorch's Adam:
    /// `w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
    pub fn new(lr: f32, beta1: f32, beta2: f32, eps: f32, t: u32) -> Self {
        let t = t.max(1) as i32;
        let bias1 = 1.0 - f64::from(beta1).powi(t);
        let bias2 = 1.0 - f64::from(beta2).powi(t);
        AdamStep {
            step_size: (f64::from(lr) / bias1) as f32,
            inv_sqrt_bias2: (1.0 / bias2.sqrt()) as f32,
            beta1,
            beta2,
            eps,
        }
    }
}

/// One set of kernel implementations.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// Which set this is: `"scalar"`, `"portable"` or `"avx512"`.
    pub name: &'static str,
    /// `sum(a[i] * b[i])` over the shorter length.
    pub dot: fn(&[f32], &[f32]) -> f32,
    /// `y[i] += alpha * x[i]` over the shorter length.
    pub axpy: fn(f32, &[f32], &mut [f32]),
    /// Adam on one row: `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`,
    /// `w -= step_size * m / (sqrt(v) * inv_sqrt_bias2 + eps)`. All slices equally long.
    pub adam: AdamFn,
}

/// Signature of the Adam row kernel: `(w, g, m, v, step)`.
pub type AdamFn = fn(&mut [f32], &[f32], &mut [f32], &mut [f32], &AdamStep);

/// The scalar reference kernels.
pub const SCALAR: Kernels = Kernels {
    name: "scalar",
    dot: scalar::dot,
    axpy: scalar::axpy,
    adam: scalar::adam,
};

/// The `wide::f32x8` kernels.
pub const PORTABLE: Kernels = Kernels {
    name: "portable",
    dot: portable::dot,
    axpy: portable::axpy,
    adam: portable::adam,
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

/// Asks the CPU to start loading the cache lines of the `bytes` bytes from `start` into L1:
/// a hint that reads nothing, cannot fault and changes no result (nothing on other
/// architectures). A pointer rather than a slice, so that a row another thread may be
/// writing can be named without a reference to it ([`DisjointRows`](crate::rows::DisjointRows)
/// prefetches rows ahead of the ones it hands out).
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

/// [`prefetch_bytes`] of `data`: for rows read in an order the hardware prefetcher cannot
/// guess, such as a sample's active neurons.
#[inline]
pub fn prefetch(data: &[f32]) {
    prefetch_bytes(data.as_ptr().cast(), std::mem::size_of_val(data));
}

/// `sum(w[indices[i]] * values[i])`: a dot product with a sparse vector. Indices must be
/// below `w.len()` (checked, like slice indexing). Eight independent partial sums (added
/// pairwise at the end) keep the adds from waiting on each other: one running sum made
/// every element wait the full latency of the previous add, which at 512 nonzeros per dot
/// was the largest cost of a layer fed by a sampled layer.
#[inline]
pub fn sparse_dot(w: &[f32], indices: &[u32], values: &[f32]) -> f32 {
    let n = indices.len().min(values.len());
    let (indices, values) = (&indices[..n], &values[..n]);
    let mut acc = [0.0f32; 8];
    let chunks = indices.chunks_exact(8).zip(values.chunks_exact(8));
    for (i, v) in chunks {
        for k in 0..8 {
            acc[k] += w[i[k] as usize] * v[k];
        }
    }
    let tail = n - n % 8;
    for (k, (&i, &v)) in indices[tail..].iter().zip(&values[tail..]).enumerate() {
        acc[k] += w[i as usize] * v;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// `out[s * rows + j] = sum_k x[s * dim + k] * w[j * row_stride + k]` for `n` samples of
/// `dim` values (`x`, row-major) and `rows` weight rows of `dim` values `row_stride` apart
/// (`w`): the scores of a block of neurons for a block of samples, as one matrix product
/// (matrixmultiply's packed, blocked sgemm, with its AVX-512 or AVX2+FMA kernel chosen at
/// run time). Panics if a slice is too short for the sizes given.
pub fn scores_gemm(
    x: &[f32],
    n: usize,
    dim: usize,
    w: &[f32],
    rows: usize,
    row_stride: usize,
    out: &mut [f32],
) {
    if n == 0 || rows == 0 {
        return;
    }
    assert!(row_stride >= dim, "rows overlap");
    assert!(x.len() >= n * dim, "x holds fewer than n rows of dim");
    assert!(
        w.len() >= (rows - 1) * row_stride + dim,
        "w holds fewer than rows rows"
    );
    assert!(out.len() >= n * rows, "out holds fewer than n rows of rows");
    // SAFETY: the asserts above keep every element the product reads (`x[s * dim + k]`,
    // `w[j * row_stride + k]` for s < n, j < rows, k < dim) and writes (`out[s * rows + j]`)
    // inside its slice; `out` is exclusively borrowed, so it aliases neither input; with
    // beta = 0 its old contents are never read.
    unsafe {
        matrixmultiply::sgemm(
            n,
            dim,
            rows,
            1.0,
            x.as_ptr(),
            dim as isize,
            1,
            w.as_ptr(),
            1,
            row_stride as isize,
            0.0,
            out.as_mut_ptr(),
            rows as isize,
            1,
        );
    }
}
