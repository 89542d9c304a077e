//! The extreme-classification metrics end to end: what `slide-train eval` prints equals an
//! independent computation from `slide-train predict`'s answers, `predict` answers any
//! `--top-k`, and `eval` and `predict` score in the config's `eval_mode` unless `--mode`
//! says otherwise.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use support::*;

/// 200 labels (so that a top 100 is half of them), 2 epochs: a model that ranks well but
/// not perfectly, so every metric is away from 0 and 1.
fn trained(dir: &Path) -> (PathBuf, String) {
    let config = XmcRun {
        hidden: 32,
        labels: 200,
        range_pow: 6,
        lsh: "budget = 20\nmin_active = 20",
        epochs: 2,
    }
    .write(dir, "xmc.toml");
    let out = dir.join("out");
    succeeded(&slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--quiet",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]));
    let checkpoints = slide_trainer::checkpoint::list(&out.join("checkpoints")).unwrap();
    let newest = checkpoints.last().unwrap().to_str().unwrap().to_string();
    (config, newest)
}

/// Each line's labels of an XMC text file (after its header).
fn labels_of(path: &Path) -> Vec<Vec<u32>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let first = line.split(' ').next().unwrap();
            if first.contains(':') {
                Vec::new()
            } else {
                first.split(',').map(|l| l.parse().unwrap()).collect()
            }
        })
        .collect()
}

/// The ids of each line of `predict`'s output, best first.
fn predicted_ids(text: &str) -> Vec<Vec<u32>> {
    text.lines()
        .map(|line| {
            line.split(' ')
                .map(|pair| pair.split_once(':').unwrap().0.parse().unwrap())
                .collect()
        })
        .collect()
}

/// The metrics as the Extreme Classification Repository defines them, written out here
/// apart from the core's implementation: inverse propensity `1 + C (N_l + B)^-A` with
/// `C = (ln N - 1)(B + 1)^A`; P@k the mean of hits / k; nDCG@k the mean of DCG@k over the
/// best DCG of min(|y|, k) labels; PSP@k and PSnDCG@k the mean weighted gain over the mean
/// best weighted gain (labels by inverse propensity).
fn reference(ranked: &[Vec<u32>], truth: &[Vec<u32>], train: &[Vec<u32>]) -> HashMap<String, f64> {
    let (a, b) = (0.55f64, 1.5f64);
    let n = train.len() as f64;
    let mut counts: HashMap<u32, f64> = HashMap::new();
    for labels in train {
        for &l in labels {
            *counts.entry(l).or_default() += 1.0;
        }
    }
    let c = (n.ln() - 1.0) * (b + 1.0).powf(a);
    let inv = |l: u32| 1.0 + c * (counts.get(&l).copied().unwrap_or(0.0) + b).powf(-a);
    let gain = |r: usize| 1.0 / ((r + 2) as f64).log2();
    let mut sums: HashMap<String, f64> = HashMap::new();
    for (top, labels) in ranked.iter().zip(truth) {
        let mut best: Vec<f64> = labels.iter().map(|&l| inv(l)).collect();
        best.sort_by(|x, y| y.total_cmp(x));
        for k in [1usize, 3, 5] {
            let hit = |r: usize| top.get(r).is_some_and(|id| labels.contains(id));
            let norm: f64 = (0..labels.len().min(k)).map(gain).sum();
            let hits = (0..k).filter(|&r| hit(r)).count() as f64;
            let dcg: f64 = (0..k).filter(|&r| hit(r)).map(gain).sum();
            let ps: f64 = (0..k).filter(|&r| hit(r)).map(|r| inv(top[r])).sum();
            let ps_dcg: f64 = (0..k)
                .filter(|&r| hit(r))
                .map(|r| inv(top[r]) * gain(r))
                .sum();
            let best_ps: f64 = best.iter().take(k).sum();
            let best_dcg: f64 = best
                .iter()
                .take(k)
                .enumerate()
                .map(|(r, w)| w * gain(r))
                .sum();
            let mut add = |key: &str, value: f64| {
                *sums.entry(format!("{key}@{k}")).or_default() += value;
            };
            add("P", hits / k as f64);
            add("psp+", ps);
            add("psp-", best_ps);
            if !labels.is_empty() {
                add("nDCG", dcg / norm);
                add("psndcg+", ps_dcg / norm);
                add("psndcg-", best_dcg / norm);
            }
        }
    }
    let m = ranked.len() as f64;
    let mut out = HashMap::new();
    for k in [1, 3, 5] {
        let get = |key: &str| sums.get(&format!("{key}@{k}")).copied().unwrap_or(0.0);
        out.insert(format!("P@{k}"), get("P") / m);
        out.insert(format!("nDCG@{k}"), get("nDCG") / m);
        out.insert(format!("PSP@{k}"), get("psp+") / get("psp-"));
        out.insert(format!("PSnDCG@{k}"), get("psndcg+") / get("psndcg-"));
    }
    out
}

/// The figure after `name ` in an evaluation line (`..., PSP@5 0.4321, ...`).
fn figure(line: &str, name: &str) -> f64 {
    let marker = format!(" {name} ");
    let rest = &line[line
        .find(&marker)
        .unwrap_or_else(|| panic!("{name} in {line}"))
        + marker.len()..];
    rest.split([',', ' ', ')']).next().unwrap().parse().unwrap()
}

/// `eval`'s P@k, nDCG@k, PSP@k and PSnDCG@k equal the repository's formulas computed here
/// from `predict --top-k 5`'s answers and the files' labels (to the 4 printed decimals);
/// and the periodic evaluation in the metrics file carries the same keys.
#[test]
fn eval_prints_the_fields_metrics_as_computed_from_the_predictions() {
    let dir = scratch("metrics-eval");
    let (config, checkpoint) = trained(&dir);
    let common = [
        "--config",
        config.to_str().unwrap(),
        "--checkpoint",
        &checkpoint,
    ];
    let eval = succeeded(&slide_train(&[&["eval"], &common[..]].concat()));
    let line = eval.lines().find(|l| l.contains(" mode: P@1")).unwrap();
    let predicted = succeeded(&slide_train(&[&["predict"], &common[..]].concat()));
    let want = reference(
        &predicted_ids(&predicted),
        &labels_of(&dir.join("test.txt")),
        &labels_of(&dir.join("train.txt")),
    );
    for name in [
        "P@1", "P@3", "P@5", "nDCG@3", "nDCG@5", "PSP@1", "PSP@3", "PSP@5", "PSnDCG@3", "PSnDCG@5",
    ] {
        let got = figure(line, name);
        assert!(
            (got - want[name]).abs() <= 5e-5,
            "{name}: eval {got}, computed {}\n{line}",
            want[name]
        );
        assert!(
            got > 0.05 && got < 0.999,
            "{name} {got}: a test that cannot fail"
        );
    }
    let metrics = std::fs::read_to_string(dir.join("out/metrics.jsonl")).unwrap();
    let last = metrics.lines().rfind(|l| l.contains("\"p_at_1\"")).unwrap();
    for key in [
        "ndcg_at_1",
        "ndcg_at_5",
        "psp_at_1",
        "psp_at_3",
        "psp_at_5",
        "psndcg_at_5",
    ] {
        assert!(last.contains(&format!("\"{key}\":")), "{key} in {last}");
    }
}

/// `predict --top-k 100` answers 100 labels a line, distinct, in falling order, whose first
/// 5 are `--top-k 5`'s; 0 and more than the label count are refused with status 2.
#[test]
fn predict_answers_any_number_of_labels() {
    let dir = scratch("metrics-top-k");
    let (config, checkpoint) = trained(&dir);
    let common = [
        "--config",
        config.to_str().unwrap(),
        "--checkpoint",
        &checkpoint,
    ];
    let five = succeeded(&slide_train(&[&["predict"], &common[..]].concat()));
    let run = slide_train(&[&["predict", "--top-k", "100"], &common[..]].concat());
    let hundred = succeeded(&run);
    assert!(
        text(&run.stderr).contains("Recall@100 "),
        "{}",
        text(&run.stderr)
    );
    let (five, hundred) = (predicted_ids(&five), predicted_ids(&hundred));
    assert_eq!(hundred.len(), 400);
    for (short, long) in five.iter().zip(&hundred) {
        assert_eq!(long.len(), 100);
        assert_eq!(&long[..5], &short[..]);
        let mut distinct = long.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 100);
    }
    for k in ["0", "201"] {
        let refused = slide_train(&[&["predict", "--top-k", k], &common[..]].concat());
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    }
}

/// `eval` and `predict` score in `[train] eval_mode` when `--mode` is not given, and in
/// `--mode` when it is: the config's `"lsh"` scores the tables' picks (far fewer outputs per
/// sample than the 200 of exact scoring) and answers as `--mode lsh` does.
#[test]
fn eval_and_predict_follow_the_configs_eval_mode() {
    let dir = scratch("metrics-eval-mode");
    let (config, checkpoint) = trained(&dir);
    let config = config.to_str().unwrap();
    let run = |extra: &[&str]| {
        let common = ["--config", config, "--checkpoint", &checkpoint];
        succeeded(&slide_train(&[extra, &common[..]].concat()))
    };
    let lsh_config = ["--set", "train.eval_mode=\"lsh\""];
    let scored = |line: &str| number_between(line, "(", " outputs scored");
    let from_config = run(&[&["eval"], &lsh_config[..]].concat());
    assert!(from_config.contains("lsh mode"), "{from_config}");
    assert!(scored(&from_config) < 100.0, "{from_config}");
    let overridden = run(&[&["eval", "--mode", "exact"], &lsh_config[..]].concat());
    assert!(overridden.contains("exact mode"), "{overridden}");
    assert_eq!(scored(&overridden), 200.0, "{overridden}");
    let by_config = run(&[&["predict"], &lsh_config[..]].concat());
    assert_eq!(by_config, run(&["predict", "--mode", "lsh"]));
    assert_ne!(by_config, run(&["predict"]));
}

/// The number between `before` and `after` in `text`.
fn number_between(text: &str, before: &str, after: &str) -> f64 {
    let end = text
        .find(after)
        .unwrap_or_else(|| panic!("{after} in {text}"));
    let start = text[..end].rfind(before).unwrap() + before.len();
    text[start..end].trim().parse().unwrap()
}
