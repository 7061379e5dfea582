//! Errors of the core. The binding layer maps each onto a Python outcome in
//! one place (`crate::py::error`).

use std::fmt;

/// Why the core declined to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A sort key or comparison involves NaN. CPython's list sort with NaN
    /// keys depends on the exact merge order of its timsort, so no other
    /// algorithm reproduces it; callers must use the reference implementation.
    UnorderedTimestamp {
        /// Index of the event whose timestamp is NaN.
        index: usize,
    },
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::UnorderedTimestamp { index } => write!(
                f,
                "event {index} has a NaN timestamp that takes part in ordering"
            ),
        }
    }
}

impl std::error::Error for CoreError {}
