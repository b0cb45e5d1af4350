//! kvserver

fn main() {}
