//! The revisioned key-value store contract and its backends. (In progress.)
