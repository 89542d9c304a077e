//! The hot kernels, every variant this CPU supports, on row lengths slide uses.
//!
//! Run: `cargo bench -p slide-benches --bench kernels`

use divan::{Bencher, black_box};
use slide::kernels::{AdamStep, Ahead, Kernels, ValuesMut, available};

fn main() {
    divan::main();
}

fn variant(name: &str) -> Option<Kernels> {
    available().into_iter().find(|k| k.name == name)
}

const VARIANTS: [&str; 3] = ["scalar", "portable", "avx512"];

#[divan::bench(args = VARIANTS, consts = [128, 784])]
fn dot<const N: usize>(bencher: Bencher, name: &str) {
    let Some(k) = variant(name) else { return };
    let a: Vec<f32> = (0..N).map(|i| (i as f32 * 0.1).sin()).collect();
    let b: Vec<f32> = (0..N).map(|i| (i as f32 * 0.2).cos()).collect();
    bencher
        .counter(divan::counter::ItemsCount::new(N))
        .bench_local(|| (k.dot)(black_box(&a), black_box(&b)));
}

#[divan::bench(args = VARIANTS, consts = [128, 784])]
fn axpy<const N: usize>(bencher: Bencher, name: &str) {
    let Some(k) = variant(name) else { return };
    let x: Vec<f32> = (0..N).map(|i| (i as f32 * 0.1).sin()).collect();
    let mut y = vec![0.0f32; N];
    bencher
        .counter(divan::counter::ItemsCount::new(N))
        .bench_local(|| (k.axpy)(black_box(0.5), black_box(&x), &mut y));
}

#[divan::bench(args = VARIANTS, consts = [128, 784])]
fn adam_row<const N: usize>(bencher: Bencher, name: &str) {
    let Some(k) = variant(name) else { return };
    let g: Vec<f32> = (0..N).map(|i| (i as f32 * 0.1).sin() * 1e-3).collect();
    let (mut w, mut m, mut v) = (vec![0.1f32; N], vec![0.0f32; N], vec![0.0f32; N]);
    let step = AdamStep::new(1e-3, 0.9, 0.999, 1e-8, 10);
    bencher
        .counter(divan::counter::ItemsCount::new(N))
        .bench_local(|| (k.adam)(&mut w, black_box(&g), &mut m, &mut v, &step));
}

/// The row update with BF16 moments, beside `adam_row`'s f32 ones.
#[divan::bench(args = VARIANTS, consts = [128, 784])]
fn adam_row_bf16<const N: usize>(bencher: Bencher, name: &str) {
    adam_bf16_bench::<N>(bencher, name, false);
}

/// The row update with BF16 weights and moments.
#[divan::bench(args = VARIANTS, consts = [128, 784])]
fn adam_row_all_bf16<const N: usize>(bencher: Bencher, name: &str) {
    adam_bf16_bench::<N>(bencher, name, true);
}

/// The BF16-moment row update of `N` values, with BF16 weights or f32 ones.
fn adam_bf16_bench<const N: usize>(bencher: Bencher, name: &str, bf16_weights: bool) {
    let Some(k) = variant(name) else { return };
    let g: Vec<f32> = (0..N).map(|i| (i as f32 * 0.1).sin() * 1e-3).collect();
    let (mut w, mut w16) = (vec![0.1f32; N], vec![0x3dcdu16; N]); // 0.1 in f32, ~0.1 in BF16
    let (mut m, mut v) = (vec![0u16; N], vec![0u16; N]);
    let step = AdamStep::new(1e-3, 0.9, 0.999, 1e-8, 10);
    let mut seed = 0u32;
    bencher
        .counter(divan::counter::ItemsCount::new(N))
        .bench_local(|| {
            seed = seed.wrapping_add(1);
            let w = if bf16_weights {
                ValuesMut::Bf16(&mut w16)
            } else {
                ValuesMut::F32(&mut w)
            };
            (k.adam_bf16)(w, black_box(&g), &mut m, &mut v, &step, seed, Ahead::NONE)
        });
}

/// A BF16 row's dot product with f32 values, beside `dot`'s f32 rows.
#[divan::bench(args = VARIANTS, consts = [128, 784])]
fn dot_bf16<const N: usize>(bencher: Bencher, name: &str) {
    let Some(k) = variant(name) else { return };
    let a: Vec<u16> = (0..N)
        .map(|i| (i as u16).wrapping_mul(40503) & 0xbfff)
        .collect();
    let b: Vec<f32> = (0..N).map(|i| (i as f32 * 0.2).cos()).collect();
    bencher
        .counter(divan::counter::ItemsCount::new(N))
        .bench_local(|| (k.dot_bf16)(black_box(&a), black_box(&b)));
}
