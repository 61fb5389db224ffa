//! The bounded, ordered fan-out broadcaster. (Filled in by the broadcaster work.)
