//! Tests of option parsing.
use super::*;
