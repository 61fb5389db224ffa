//! Informers and caches. (In progress.)
