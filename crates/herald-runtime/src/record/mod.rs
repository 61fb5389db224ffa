//! Event recording. (In progress.)
