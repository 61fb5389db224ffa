//! Work queues. (In progress.)
