//! Tests of option parsing, defaults and presets.

use super::*;
use clap::Parser;

#[derive(Parser, Debug)]
struct T {
    #[command(flatten)]
    load: Load,
}

fn spec(args: &[&str]) -> Result<Spec, String> {
    let t = T::try_parse_from(std::iter::once("kvbench").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    t.load.resolve(&Load::default())
}

#[test]
fn defaults() {
    let s = spec(&[]).unwrap();
    assert_eq!((s.clients, s.threads, s.pipeline), (50, 1, 1));
    assert_eq!(s.requests, Some(100_000));
    assert_eq!((s.data_size, s.keyspace), (64, 1_000_000));
    assert_eq!(s.tests, ["set", "get"]);
    assert_eq!(s.dist, KeyDist::Uniform);
    assert!(s.rate.is_none() && s.load_cpus.is_empty());
}

#[test]
fn redis_benchmark_style_short_options() {
    let s = spec(&[
        "-c", "8", "-P", "16", "-n", "500", "-d", "3", "-r", "100", "-t", "SET,zadd",
    ])
    .unwrap();
    assert_eq!(
        (s.clients, s.pipeline, s.data_size, s.keyspace),
        (8, 16, 3, 100)
    );
    assert_eq!(s.requests, Some(500));
    assert_eq!(s.tests, ["set", "zadd"]);
    assert_eq!(s.workloads[1].name, "zadd");
}

#[test]
fn test_time_replaces_the_request_count() {
    let s = spec(&["--test-time", "2.5"]).unwrap();
    assert_eq!(s.requests, None);
    assert_eq!(s.test_time, 2.5);
    // Both given: the count wins.
    assert_eq!(
        spec(&["--test-time", "2", "-n", "9"]).unwrap().requests,
        Some(9)
    );
}

#[test]
fn ratio_makes_one_mixed_workload() {
    let s = spec(&["--ratio", "1:4", "--key-dist", "zipf:0.8"]).unwrap();
    assert_eq!(s.workloads.len(), 1);
    assert_eq!(s.workloads[0].name, "set:get");
    assert_eq!(s.workloads[0].cycle.len(), 5);
    assert_eq!(s.dist, KeyDist::Zipf(0.8));
    let only_gets = spec(&["--ratio", "0:1"]).unwrap();
    assert_eq!(only_gets.workloads[0].templates.len(), 1);
    for bad in ["1", "a:b", "0:0", "1:-1"] {
        assert!(spec(&["--ratio", bad]).is_err(), "{bad}");
    }
}

#[test]
fn custom_command_and_open_loop() {
    let s = spec(&[
        "--command",
        "INCRBY c:__rand_int__ 2",
        "--rate",
        "5000",
        "--load-cpus",
        "1",
    ])
    .unwrap();
    assert_eq!(s.tests, ["incrby"]);
    assert_eq!(s.rate, Some(5000.0));
    assert_eq!(s.load_cpus, [1]);
}

#[test]
fn bad_values_are_refused() {
    for bad in [
        &["-c", "0"][..],
        &["-P", "0"],
        &["--threads", "4", "-c", "2"],
        &["-n", "0"],
        &["-r", "0"],
        &["-r", "1000000000001"],
        &["--rate", "0"],
        &["--test-time", "-1"],
        &["-t", "nosuch"],
        &["-t", ","],
        &["--key-dist", "gauss"],
        &["--load-cpus", "x"],
        &["-c", "many"],
    ] {
        assert!(spec(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn presets_fill_only_what_was_not_given() {
    let t = T::try_parse_from(["kvbench", "-P", "4"]).unwrap();
    let s = t.load.resolve(&Preset::Pipelined.load()).unwrap();
    assert_eq!((s.clients, s.pipeline, s.data_size), (50, 4, 64));
    assert_eq!(s.tests, ["set", "get", "zadd"]);
    let m = Load::default().resolve(&Preset::Memtier.load()).unwrap();
    assert_eq!((m.clients, m.pipeline, m.data_size), (50, 30, 256));
    assert_eq!(m.workloads[0].name, "set:get");
    // An explicit test list replaces the preset's ratio.
    let t = T::try_parse_from(["kvbench", "-t", "get"]).unwrap();
    assert_eq!(
        t.load.resolve(&Preset::Memtier.load()).unwrap().tests,
        ["get"]
    );
    let u = Load::default()
        .resolve(&Preset::Unpipelined.load())
        .unwrap();
    assert_eq!(u.pipeline, 1);
    let mem = Load::default().resolve(&Preset::Memory.load()).unwrap();
    assert_eq!(mem.dist, KeyDist::Sequential);
}
