//! Embedding kvcore.

fn main() {}
