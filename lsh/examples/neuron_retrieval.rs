//! The job slide-lsh does inside a sparse layer, measured: a layer of N neurons with 128-d
//! weight rows is hashed into tables; for each input (a ReLU activation) the tables propose
//! an active set (top-k by hit count), which is compared with the neurons that truly have the
//! largest inner products (found by brute force).
//!
//! Without `--family` it runs a sweep of the families and settings SLIDE uses; with it, one
//! configuration.
//!
//! ```text
//! cargo run --release -p slide-lsh --example neuron_retrieval -- [--neurons N] [--queries Q]
//!     [--family dwta|wta|simhash|minhash --k K] [--l L] [--budget B] [--seed S]
//! ```

use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide_lsh::{
    BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, LshParams, Projection,
    QueryScratch, Sampling, TablesConfig, Vector,
};

const DIM: usize = 128;
const TOP: usize = 10;

#[derive(Clone)]
struct Options {
    neurons: usize,
    queries: usize,
    family: String,
    k: usize,
    l: usize,
    budget: usize,
    seed: u64,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        neurons: 65_536,
        queries: 200,
        family: String::new(),
        k: 6,
        l: 50,
        budget: 0,
        seed: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--neurons" => o.neurons = number()?,
            "--queries" => o.queries = number()?,
            "--family" => o.family = value.clone(),
            "--k" => o.k = number()?,
            "--l" => o.l = number()?,
            "--budget" => o.budget = number()?,
            "--seed" => o.seed = number()? as u64,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.budget == 0 {
        // SLIDE's usual active fraction for a wide layer: about 1-2%.
        o.budget = (o.neurons / 64).max(TOP);
    }
    Ok(o)
}

fn main() {
    let options = match parse() {
        Ok(o) => o,
        Err(message) => {
            eprintln!("neuron_retrieval: {message}");
            std::process::exit(2);
        }
    };
    let sweep: Vec<(String, usize)> = if options.family.is_empty() {
        vec![
            ("simhash".into(), 6),
            ("simhash".into(), 9),
            ("wta".into(), 4),
            ("dwta".into(), 4),
            ("dwta".into(), 6),
        ]
    } else {
        vec![(options.family.clone(), options.k)]
    };
    println!(
        "slide-lsh neuron retrieval: {} neurons x {DIM} dims, L = {}, {} queries, top-{} by hit count",
        options.neurons, options.l, options.queries, options.budget
    );
    println!(
        "family   K  bits  rebuild_ms  tables_MB  hash_us  select_us  active  active_%  top{TOP}_recall_%  random_%"
    );
    for (family, k) in sweep {
        let o = Options {
            family,
            k,
            ..options
        };
        if let Err(e) = run(&o) {
            eprintln!("neuron_retrieval: {e}");
            std::process::exit(1);
        }
    }
}

fn run(o: &Options) -> Result<(), slide_lsh::LshError> {
    let (kind, bits) = match o.family.as_str() {
        "simhash" => (
            FamilyKind::SimHash(Projection::Sparse { density: 1.0 / 3.0 }),
            1,
        ),
        "wta" => (FamilyKind::Wta { bin_size: 8 }, 3),
        "minhash" => (FamilyKind::MinHash { bits: 3 }, 3),
        _ => (FamilyKind::Dwta { bin_size: 8 }, 3),
    };
    let params = LshParams {
        k: o.k,
        l: o.l,
        range_pow: (o.k as u32 * bits).clamp(1, 20),
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(o.seed);
    let weights: Vec<f32> = (0..o.neurons * DIM)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();

    let family = LshFamily::new(kind, DIM, params, o.seed)?;
    // Buckets big enough for 4x the mean load (at least SLIDE's 128), so few neurons are
    // turned away; reservoir sampling keeps an unbiased sample where they are.
    let capacity = ((4 * o.neurons) >> params.range_pow).clamp(128, 65_535);
    let config =
        TablesConfig::for_family(params, o.neurons, capacity, BucketPolicy::Reservoir, o.seed);
    let mut tables = HashTables::new(config)?;
    let started = Instant::now();
    tables.rebuild_dense(&family, &weights, DIM)?;
    let rebuild = started.elapsed();
    let stats = tables.stats();

    let sampling = Sampling::top_k(o.budget);
    let (mut buffer, mut scratch, mut active) =
        (CodeBuffer::new(), QueryScratch::new(o.neurons), Vec::new());
    let (mut hash_time, mut query_time) = (0.0, 0.0);
    let (mut hits_lsh, mut hits_random, mut active_total) = (0usize, 0usize, 0usize);
    let mut scores = vec![0f32; o.neurons];
    for _ in 0..o.queries {
        let x: Vec<f32> = (0..DIM)
            .map(|_| rng.random_range(-1.0f32..1.0).max(0.0))
            .collect();
        let t0 = Instant::now();
        let codes = family.hash(Vector::Dense(&x), &mut buffer)?;
        let t1 = Instant::now();
        tables.sample(codes, &sampling, &[], &mut rng, &mut scratch, &mut active)?;
        let t2 = Instant::now();
        hash_time += (t1 - t0).as_secs_f64();
        query_time += (t2 - t1).as_secs_f64();
        active_total += active.len();

        for (score, row) in scores.iter_mut().zip(weights.chunks_exact(DIM)) {
            *score = row.iter().zip(&x).map(|(w, v)| w * v).sum();
        }
        let mut order: Vec<u32> = (0..o.neurons as u32).collect();
        order.select_nth_unstable_by(TOP, |a, b| {
            scores[*b as usize].total_cmp(&scores[*a as usize])
        });
        let truth = &order[..TOP];
        hits_lsh += truth.iter().filter(|id| active.contains(id)).count();
        // The same number of neurons drawn uniformly at random, for reference.
        hits_random += truth
            .iter()
            .filter(|_| rng.random_range(0..o.neurons) < active.len())
            .count();
    }
    let q = o.queries as f64;
    let mean_active = active_total as f64 / q;
    println!(
        "{:<8} {:>2}  {:>4}  {:>10.1}  {:>9.1}  {:>7.2}  {:>9.2}  {:>6.0}  {:>8.2}  {:>14.1}  {:>8.1}",
        o.family,
        o.k,
        params.range_pow,
        rebuild.as_secs_f64() * 1e3,
        stats.memory_bytes as f64 / 1e6,
        hash_time / q * 1e6,
        query_time / q * 1e6,
        mean_active,
        100.0 * mean_active / o.neurons as f64,
        100.0 * hits_lsh as f64 / (q * TOP as f64),
        100.0 * hits_random as f64 / (q * TOP as f64),
    );
    Ok(())
}
