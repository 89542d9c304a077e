//! Steady-state training steps allocate nothing on the heap.
//!
//! A counting global allocator wraps the system allocator for this test binary only. It
//! counts the threads of the test's rayon pool alone: the test harness's main thread
//! allocates (its table of running tests) while the test runs, at a moment that varies
//! from run to run, and made the count flaky (about 1 run in 10).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use slide::{Activation, Mode, StepStats};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations count (the test's pool threads). A `const`
    /// thread-local of a `Cell<bool>` needs no allocation and no destructor, so the
    /// allocator may read it.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTED.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: defers every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for `dealloc`; `new_size` is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A pool of `threads` threads whose allocations count.
fn counted_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .start_handler(|_| COUNTED.with(|c| c.set(true)))
        .build()
        .unwrap()
}

/// Held by each test while it counts: the tests of this binary run in parallel, and each
/// one's pool threads count into the same total.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Sparse input, an input-major hidden layer and an LSH output layer with table rebuilds
/// every 5 steps, on 2 threads. After four passes over the data (every batch seen, buffers
/// sized, and each pool thread registered with the work-stealing deques' epoch collector,
/// which rayon does on a thread's first steal: on a busy machine a thread could reach the
/// measured steps without one), two more passes over the same batches allocate nothing;
/// with f32 weights and with BF16 weights and moments on the output layer, and with heads
/// that learn on each sample's shortlist (a per-label linear head and rare labels).
#[test]
fn steady_state_steps_and_rebuilds_allocate_nothing() {
    let _serial = SERIAL.lock().unwrap();
    for (bf16, heads) in [(false, false), (true, false), (false, true)] {
        steady_state_allocates_nothing(bf16, heads);
    }
}

/// A per-label linear head of 4,096 weights on the best 8, and 4 rare labels.
fn heads() -> Vec<slide::HeadConfig> {
    use slide::head::label_linear::LabelLinearConfig;
    use slide::head::rare_labels::RareLabelsConfig;
    vec![
        slide::HeadConfig::LabelLinear(LabelLinearConfig {
            bits: 12,
            shortlist: 8,
            ..LabelLinearConfig::default()
        }),
        slide::HeadConfig::RareLabels(RareLabelsConfig {
            labels: 4,
            ..RareLabelsConfig::default()
        }),
    ]
}

fn steady_state_allocates_nothing(bf16: bool, with_heads: bool) {
    let data = sparse_data(256, 300, 500, 3);
    counted_pool(2).install(|| {
        let mut output = sampled(500, Activation::Softmax, 32);
        if bf16 {
            (output.weights, output.moments) = (slide::Precision::Bf16, slide::Precision::Bf16);
        }
        let layers = vec![input_major(64, Activation::Relu), output];
        let mut net = if with_heads {
            slide::Network::new(slide::NetworkConfig {
                heads: heads(),
                ..network(300, layers, 1e-3, 4).config().clone()
            })
            .unwrap()
        } else {
            network(300, layers, 1e-3, 4)
        };
        let batches: Vec<Vec<usize>> = (0..8).map(|b| (b * 32..(b + 1) * 32).collect()).collect();
        let mut ws = slide::Workspace::new();
        let mut stats = StepStats::default();
        for _ in 0..4 {
            for batch in &batches {
                net.train_step_with(&mut ws, &data, batch, &mut stats)
                    .unwrap();
            }
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let mut rebuilds = 0;
        for _ in 0..2 {
            for batch in &batches {
                net.train_step_with(&mut ws, &data, batch, &mut stats)
                    .unwrap();
                rebuilds += usize::from(stats.rebuilt);
            }
        }
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert!(rebuilds >= 3, "the measured steps should include rebuilds");
        assert_eq!(
            allocations, 0,
            "{allocations} heap allocations in 16 warm steps (BF16: {bf16}, heads: {with_heads})"
        );
    });
}

/// Re-ranking the shared negatives between refreshes, which a network does after almost
/// every step, allocates nothing once its scratch has grown; nor, with a pool, does a
/// sample's pick of its own shared negatives.
#[test]
fn rescoring_the_shared_negatives_allocates_nothing_when_warm() {
    let _serial = SERIAL.lock().unwrap();
    for pool in [0, 48] {
        counted_pool(1).install(|| {
            let mut config = sampled(500, Activation::Softmax, 32);
            if let Some(lsh) = &mut config.lsh {
                (lsh.negatives.shared_negatives, lsh.negatives.shared_pool) = (16, pool);
            }
            let mut layer = slide::SparseLayer::new(64, &config, 3).unwrap();
            let mean: Vec<f32> = (0..64).map(|i| (i % 7) as f32 * 0.1).collect();
            let candidates: Vec<u32> = (0..200).map(|j| j * 2).collect();
            let (mut scratch, mut trace) = (layer.select_scratch(), slide::LayerTrace::new());
            let mut select = |layer: &slide::SparseLayer| {
                let input = slide::lsh::Vector::Dense(&mean);
                let rng = &mut slide::sample_rng(1);
                layer
                    .select_active(input, &[3], Mode::Train, rng, &mut scratch, &mut trace)
                    .unwrap();
                assert_eq!(trace.sources().forced, 17);
            };
            layer.refresh_mean_input(&mean);
            layer.rescore_shared(&mean, &candidates);
            select(&layer);
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            for round in 0..4 {
                layer.rescore_shared(&mean, &candidates[round * 10..]);
                select(&layer);
            }
            let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
            assert_eq!(allocations, 0, "pool of {pool}");
        });
    }
}
