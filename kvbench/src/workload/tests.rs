//! Tests of the workload generators.
use super::*;
