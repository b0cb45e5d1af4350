//! RESP codec micro-benchmarks: parsing a pipeline, writing replies.

use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use kvcore::resp::{format_double, Parsed, Parser, Proto, ReplyWriter};

fn main() {
    divan::main();
}

/// 16 commands as redis-benchmark pipelines them: SET and GET, alternating.
fn pipeline() -> Vec<u8> {
    let mut buf = Vec::new();
    for i in 0..16 {
        let key = format!("key:{i:012}");
        if i % 2 == 0 {
            let cmd = format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$3\r\nxxx\r\n",
                key.len()
            );
            buf.extend_from_slice(cmd.as_bytes());
        } else {
            buf.extend_from_slice(
                format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).as_bytes(),
            );
        }
    }
    buf
}

#[divan::bench]
fn parse_pipeline_16(bencher: Bencher) {
    let buf = pipeline();
    let mut parser = Parser::default();
    bencher.counter(ItemsCount::new(16usize)).bench_local(|| {
        let (mut pos, mut args_seen) = (0, 0);
        while let Ok(Parsed::Command { args, consumed }) = parser.parse(black_box(&buf[pos..])) {
            args_seen += args.len();
            pos += consumed;
        }
        assert_eq!(pos, buf.len());
        args_seen
    });
}

#[divan::bench]
fn parse_inline_16(bencher: Bencher) {
    let buf = "SET key:000000000001 xxx\r\nGET key:000000000001\r\n"
        .repeat(8)
        .into_bytes();
    let mut parser = Parser::default();
    bencher.counter(ItemsCount::new(16usize)).bench_local(|| {
        let mut pos = 0;
        while let Ok(Parsed::Command { consumed, .. }) = parser.parse(black_box(&buf[pos..])) {
            pos += consumed;
        }
        pos
    });
}

#[divan::bench]
fn write_bulk_16(bencher: Bencher) {
    let mut out = Vec::with_capacity(1024);
    bencher.counter(ItemsCount::new(16usize)).bench_local(|| {
        out.clear();
        let mut w = ReplyWriter::new(&mut out, Proto::Resp2);
        for _ in 0..16 {
            w.bulk(black_box(b"a value of 24 bytes long"));
        }
        out.len()
    });
}

#[divan::bench(args = ["3", "1.1", "1e300", "2.5e-310"])]
fn format_double_g17(bencher: Bencher, text: &str) {
    let v: f64 = text.parse().unwrap();
    bencher.bench_local(|| {
        let mut buf = [0u8; 40];
        format_double(black_box(v), &mut buf).len()
    });
}
