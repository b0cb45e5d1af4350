//! kvbench

fn main() {}
