//! Median, min and max of a figure's samples.

use serde::{Deserialize, Serialize};

/// One side's figure: median of the measured runs, with their range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many measured runs (warm-up excluded).
    pub runs: usize,
}

impl Summary {
    /// The summary of `samples`; `None` when there are none (or only NaNs).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            runs: n,
        })
    }

    /// Every figure scaled by `factor` (a unit change).
    pub fn scaled(self, factor: f64) -> Summary {
        Summary {
            median: self.median * factor,
            min: self.min * factor,
            max: self.max * factor,
            runs: self.runs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_count_is_the_middle_sample() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).expect("samples");
        assert_eq!((s.median, s.min, s.max, s.runs), (2.0, 1.0, 3.0, 3));
    }

    #[test]
    fn median_of_even_count_is_the_mean_of_the_middle_pair() {
        let s = Summary::of(&[4.0, 1.0, 2.0, 3.0]).expect("samples");
        assert_eq!(s.median, 2.5);
    }

    #[test]
    fn no_samples_give_no_summary() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
    }
}
