//! Event recording. (In progress.)

pub mod correlator;

pub use correlator::{
    COMBINED_MESSAGE_PREFIX, CacheSizes, CorrelateError, CorrelateResult, CorrelatorOptions,
    CorrelatorStats, EventCorrelator, KeyBuilder, KeyFunc, MessageFunc, SpamKeyFunc,
};
