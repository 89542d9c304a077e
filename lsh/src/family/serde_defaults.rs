//! The values a family's setting takes when a config leaves it out (SLIDE's), for the
//! `serde` feature. Apart from [`FamilyKind`](super::FamilyKind) so that the families'
//! own settings (sparse SimHash's density) can name them without importing the kind.

/// WTA and DWTA bins of 8 coordinates.
pub(crate) fn bin_size() -> usize {
    8
}

/// MinHash codes of 3 bits.
pub(crate) fn bits() -> u32 {
    3
}

/// Sparse SimHash reading a third of the coordinates.
pub(crate) fn density() -> f32 {
    1.0 / 3.0
}
