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
    /// A bug: the computation panicked. Caught by [`guarded`] so that no
    /// panic unwinds into the interpreter.
    Internal(String),
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::UnorderedTimestamp { index } => write!(
                f,
                "event {index} has a NaN timestamp that takes part in ordering"
            ),
            CoreError::Internal(msg) => write!(f, "internal error: {msg}"),
        }
    }
}

impl std::error::Error for CoreError {}

/// Runs a core computation, turning a panic into [`CoreError::Internal`].
pub fn guarded<T>(f: impl FnOnce() -> Result<T, CoreError>) -> Result<T, CoreError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            Err(CoreError::Internal(msg))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error() {
        let out: Result<(), _> = guarded(|| {
            let v: Vec<u8> = Vec::new();
            #[allow(clippy::indexing_slicing)]
            let _ = v[3];
            Ok(())
        });
        assert!(
            matches!(out, Err(CoreError::Internal(msg)) if msg.contains("index out of bounds"))
        );
    }

    #[test]
    fn results_pass_through() {
        assert_eq!(guarded(|| Ok::<_, CoreError>(7)), Ok(7));
        assert_eq!(
            guarded(|| Err::<(), _>(CoreError::UnorderedTimestamp { index: 1 })),
            Err(CoreError::UnorderedTimestamp { index: 1 })
        );
    }
}
