//! Loads the train and test sets a config names.

use std::path::Path;

use anyhow::{Result, bail};
use slide::formats::{idx, xmc};
use slide::{DenseExamples, Examples, SparseExamples};

use crate::config::{DataConfig, DataFormat};

/// A loaded dataset.
pub enum Dataset {
    /// Sparse rows (XMC, LIBSVM).
    Sparse(SparseExamples),
    /// Dense rows (IDX images).
    Dense(DenseExamples),
}

impl Dataset {
    /// Heap bytes the samples take (their vectors' capacities).
    pub fn memory_bytes(&self) -> u64 {
        let bytes = match self {
            Dataset::Sparse(s) => {
                (s.offsets.capacity() + s.label_offsets.capacity()) * 8
                    + (s.indices.capacity() + s.values.capacity() + s.labels.capacity()) * 4
            }
            Dataset::Dense(d) => (d.inputs.capacity() + d.classes.capacity()) * 4,
        };
        bytes as u64
    }

    /// The examples as the network reads them.
    pub fn examples(&self) -> &dyn Examples {
        match self {
            Dataset::Sparse(d) => d,
            Dataset::Dense(d) => d,
        }
    }
}

/// Train and test sets with their sizes.
pub struct Loaded {
    /// Training examples.
    pub train: Dataset,
    /// Test examples.
    pub test: Dataset,
    /// Input dimension.
    pub features: usize,
    /// Number of labels.
    pub labels: usize,
    /// Whether some sample has more than one label (P@3/P@5 are then reported).
    pub multi_label: bool,
    /// Every sample of `data.replay` and how many of `train`'s samples come before the
    /// share of them that `train` holds: what the heads build from training data is built
    /// from those samples and the whole replay file.
    pub replay: Option<(SparseExamples, usize)>,
}

/// The first `.1` samples of one set of examples and every sample of another, read as one
/// (a run's own training samples and a whole replay file).
pub struct Joined<'a>(pub &'a dyn Examples, pub usize, pub &'a dyn Examples);

impl Examples for Joined<'_> {
    fn len(&self) -> usize {
        self.1 + self.2.len()
    }

    fn input(&self, i: usize) -> slide::lsh::Vector<'_> {
        match i.checked_sub(self.1) {
            None => self.0.input(i),
            Some(j) => self.2.input(j),
        }
    }

    fn labels(&self, i: usize) -> &[u32] {
        match i.checked_sub(self.1) {
            None => self.0.labels(i),
            Some(j) => self.2.labels(j),
        }
    }
}

impl Loaded {
    /// Sparse train and test sets of `features` inputs and `labels` labels (from files or
    /// from a program's arrays), multi-label when a training sample has several labels.
    pub fn sparse(
        train: SparseExamples,
        test: SparseExamples,
        features: usize,
        labels: usize,
    ) -> Self {
        let multi_label = train.label_offsets.windows(2).any(|w| w[1] - w[0] > 1);
        Loaded {
            train: Dataset::Sparse(train),
            test: Dataset::Sparse(test),
            features,
            labels,
            multi_label,
            replay: None,
        }
    }

    /// The training set's label propensities under `model`, which the propensity-scored
    /// metrics (PSP@k, PSnDCG@k) weigh hits with: for multi-label data only (single-label
    /// data reports its accuracy, P@1).
    pub fn propensities(
        &self,
        model: slide::PropensityModel,
    ) -> Result<Option<slide::Propensities>, slide::SlideError> {
        if !self.multi_label {
            return Ok(None);
        }
        slide::Propensities::from_examples(self.train.examples(), self.labels, model).map(Some)
    }
}

/// Reads the train and test sets `config` names, checking sizes against it.
pub fn load(config: &DataConfig) -> Result<Loaded> {
    check_files_exist(config)?;
    let loaded = match config.format {
        DataFormat::Xmc => load_xmc(config)?,
        DataFormat::Libsvm => load_libsvm(config)?,
        DataFormat::Idx => load_idx(config)?,
    };
    check_labelled(config, &loaded)?;
    let mut loaded = loaded;
    if let Some(path) = &config.replay {
        add_replay(&mut loaded, config, path)?;
    }
    Ok(loaded)
}

/// Adds to `loaded`'s training samples `data.replay_share` of the samples of the replay file
/// `path` (each taken or not by a hash of its line's position, so the same ones every run),
/// after checking that the file fits the run's features and labels.
fn add_replay(loaded: &mut Loaded, config: &DataConfig, path: &Path) -> Result<()> {
    if !path.exists() {
        bail!("{}: no such file (data.replay)", path.display());
    }
    let replay = match config.format {
        DataFormat::Xmc => {
            let (samples, header) = xmc::read_xmc(path)?;
            if header.features > loaded.features || header.labels > loaded.labels {
                bail!(
                    "{}: declares {} features and {} labels; data.replay must fit the training \
                     file's {} and {}",
                    path.display(),
                    header.features,
                    header.labels,
                    loaded.features,
                    loaded.labels
                );
            }
            samples
        }
        DataFormat::Libsvm => xmc::read_libsvm(path, loaded.features, loaded.labels)?,
        DataFormat::Idx => bail!("data.replay takes an xmc or libsvm file"),
    };
    let Dataset::Sparse(train) = &mut loaded.train else {
        bail!("data.replay needs sparse training data");
    };
    let own = train.len();
    let threshold = (config.replay_share * u64::MAX as f64) as u64;
    for s in 0..replay.len() {
        if slide::lsh::mix64(s as u64 ^ 0x7265_706c_6179) <= threshold {
            let (a, b) = (replay.offsets[s], replay.offsets[s + 1]);
            let labels = replay.labels(s);
            if !labels.is_empty() {
                train.push(&replay.indices[a..b], &replay.values[a..b], labels);
            }
        }
    }
    loaded.multi_label |= replay.label_offsets.windows(2).any(|w| w[1] - w[0] > 1);
    loaded.replay = Some((replay, own));
    Ok(())
}

/// `data.features` or `data.labels` (`what`), if given, must be what the data has.
fn check(what: &str, found: usize, declared: Option<usize>) -> Result<()> {
    match declared {
        Some(d) if d != found => bail!("data.{what} = {d} but the data has {found}"),
        _ => Ok(()),
    }
}

/// The text formats' files must exist; the error says where they go and how to generate
/// data of the same shape.
fn check_files_exist(config: &DataConfig) -> Result<()> {
    for path in [&config.train, &config.test].into_iter().flatten() {
        if config.format != DataFormat::Idx && !path.exists() {
            bail!(
                "{}: no such file. The data files go where data.train and data.test say, in the {} text format ({}); \
                 datasets/README.md says where to get and how to convert the real sets. To train the same shape \
                 on generated data instead: `slide-train gen-data --preset amazon670k --out DIR` (or --labels N \
                 for a smaller label set), then --set data.train='\"DIR/train.txt\"' --set data.test='\"DIR/test.txt\"', \
                 or use configs/amazon670k-synthetic.toml",
                path.display(),
                if config.format == DataFormat::Xmc {
                    "XMC"
                } else {
                    "LIBSVM"
                },
                if config.format == DataFormat::Xmc {
                    "a `points features labels` header, then one `label,label feature:value ...` line per sample"
                } else {
                    "one `label,label feature:value ...` line per sample"
                },
            );
        }
    }
    Ok(())
}

/// Train and test files in the XMC text format, their headers agreeing.
fn load_xmc(config: &DataConfig) -> Result<Loaded> {
    let (train, a) = xmc::read_xmc(config.train.as_deref().expect("validated"))?;
    let (test, b) = xmc::read_xmc(config.test.as_deref().expect("validated"))?;
    if (a.features, a.labels) != (b.features, b.labels) {
        bail!(
            "train file declares {} features and {} labels, test file {} and {}",
            a.features,
            a.labels,
            b.features,
            b.labels
        );
    }
    check("features", a.features, config.features)?;
    check("labels", a.labels, config.labels)?;
    Ok(Loaded::sparse(train, test, a.features, a.labels))
}

/// Train and test files in the LIBSVM text format, of the configured shape.
fn load_libsvm(config: &DataConfig) -> Result<Loaded> {
    let (features, labels) = (
        config.features.expect("validated"),
        config.labels.expect("validated"),
    );
    let train = xmc::read_libsvm(
        config.train.as_deref().expect("validated"),
        features,
        labels,
    )?;
    let test = xmc::read_libsvm(config.test.as_deref().expect("validated"), features, labels)?;
    Ok(Loaded::sparse(train, test, features, labels))
}

/// MNIST-style IDX images and labels (gzipped or not) from `data.dir`.
fn load_idx(config: &DataConfig) -> Result<Loaded> {
    let dir = config.dir.as_deref().expect("validated");
    let classes = config.labels.unwrap_or(10);
    let find = |stem: &str| {
        let gz = dir.join(format!("{stem}.gz"));
        if gz.exists() { gz } else { dir.join(stem) }
    };
    let train = idx::read_images(
        &find("train-images-idx3-ubyte"),
        &find("train-labels-idx1-ubyte"),
        classes as u32,
    )?;
    let test = idx::read_images(
        &find("t10k-images-idx3-ubyte"),
        &find("t10k-labels-idx1-ubyte"),
        classes as u32,
    )?;
    if train.dim != test.dim {
        bail!(
            "train images have {} pixels, test images {}",
            train.dim,
            test.dim
        );
    }
    check("features", train.dim, config.features)?;
    Ok(Loaded {
        features: train.dim,
        train: Dataset::Dense(train),
        test: Dataset::Dense(test),
        labels: classes,
        multi_label: false,
        replay: None,
    })
}

/// The training set must be non-empty and every sample labelled; the error names the file
/// and line of the first unlabelled one.
fn check_labelled(config: &DataConfig, loaded: &Loaded) -> Result<()> {
    if loaded.train.examples().is_empty() {
        bail!("the training set is empty");
    }
    let train = loaded.train.examples();
    if let Some(k) = (0..train.len()).find(|&k| train.labels(k).is_empty()) {
        let unlabeled = (0..train.len())
            .filter(|&k| train.labels(k).is_empty())
            .count();
        let path = config
            .train
            .as_deref()
            .expect("text formats name their files");
        let line =
            sample_line(path, config.format, k).map_or_else(String::new, |n| format!(", line {n}"));
        bail!(
            "{}{line}: training sample {k} has no labels ({unlabeled} of {} training samples have none); \
             training needs at least one label per sample: remove or label them",
            path.display(),
            train.len()
        );
    }
    Ok(())
}

/// The line of sample `k` in a text data file: XMC files have a header line and one line
/// per sample; LIBSVM files skip blank lines. Only read on the error path.
fn sample_line(path: &std::path::Path, format: DataFormat, k: usize) -> Option<usize> {
    use std::io::BufRead;
    let reader = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let mut seen = 0;
    for (n, line) in reader.lines().enumerate() {
        let line = line.ok()?;
        let is_sample = match format {
            DataFormat::Xmc => n > 0,
            _ => !line.trim().is_empty(),
        };
        if is_sample {
            if seen == k {
                return Some(n + 1);
            }
            seen += 1;
        }
    }
    None
}
