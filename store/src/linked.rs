//! Profiles with their linked samples apart, for questions about traces and spans that do
//! not need a sample per linked row: the list of traces reads an hour's spans (a quarter of
//! a million rows) as a few samples per profile, for the profile's totals, and a
//! [`LinkedRow`] per linked row, for the traces, without making a [`Sample`] of each
//! ([`crate::columnar`]'s `linked` reader). Files and sample rows give the same shape from
//! their decoded profiles ([`rows_of`]).

use otel_bridge::model::{Link, Sample};

use crate::reader::Decoded;

/// A linked sample of a profile, as what the traces need of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkedRow<'a> {
    /// The profile's sample with this row's labels: the selection's conditions on labels
    /// are decided on it ([`crate::Selector::labels_hold`]). Its values, link and
    /// timestamps are not this row's.
    pub sample: usize,
    pub link: Link,
    /// One per sample type, as a sample's.
    pub values: &'a [i64],
    pub timestamps: &'a [i64],
}

/// The linked samples of a decoded profile, each its own labels' sample; the profile, as it
/// is, stands for its totals.
pub fn rows_of(d: &Decoded) -> Vec<LinkedRow<'_>> {
    d.profile
        .samples
        .iter()
        .enumerate()
        .filter_map(|(i, s): (usize, &Sample)| {
            Some(LinkedRow {
                sample: i,
                link: s.link?,
                values: &s.values,
                timestamps: &s.timestamps,
            })
        })
        .collect()
}
