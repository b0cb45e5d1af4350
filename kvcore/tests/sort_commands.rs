//! SORT cases the differential run leaves out (BY nosort, ALPHA with BY), checked against the
//! replies Redis's `sortCommandGeneric` gives.

mod script;

use script::{run, setup};

fn bulks(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s.push_str(&format!("${}\r\n{i}\r\n", i.len()));
    }
    s
}

#[test]
fn nosort_keeps_lists_and_sorted_sets_in_order_and_sorts_stored_sets() {
    let (mut db, mut s) = setup();
    run(&mut db, &mut s, "RPUSH l 3 1 2 b a");
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY nosort"),
        bulks(&["3", "1", "2", "b", "a"])
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY nosort DESC"),
        bulks(&["a", "b", "2", "1", "3"])
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY nosort LIMIT 1 2"),
        bulks(&["1", "2"])
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY nosort DESC LIMIT 1 2"),
        bulks(&["b", "2"])
    );
    run(&mut db, &mut s, "ZADD z 3 c 1 a 2 b");
    assert_eq!(
        run(&mut db, &mut s, "SORT z BY nosort"),
        bulks(&["a", "b", "c"])
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT z BY nosort DESC LIMIT 0 2"),
        bulks(&["c", "b"])
    );
    // SORT converts a listpack sorted set, as Redis does.
    assert_eq!(
        run(&mut db, &mut s, "OBJECT ENCODING z"),
        "$8\r\nskiplist\r\n"
    );
    // A set sorted for STORE is sorted ALPHA whatever BY says.
    run(&mut db, &mut s, "SADD st b 10 a 9");
    assert_eq!(run(&mut db, &mut s, "SORT st BY nosort STORE d"), ":4\r\n");
    assert_eq!(
        run(&mut db, &mut s, "LRANGE d 0 -1"),
        bulks(&["10", "9", "a", "b"])
    );
    assert_eq!(run(&mut db, &mut s, "SORT nosuch STORE d"), ":0\r\n");
    assert_eq!(run(&mut db, &mut s, "EXISTS d"), ":0\r\n");
}

#[test]
fn alpha_by_weights_and_get_patterns() {
    let (mut db, mut s) = setup();
    run(&mut db, &mut s, "RPUSH l 1 2 3");
    run(&mut db, &mut s, "MSET w_1 c w_2 a w_3 b");
    run(&mut db, &mut s, "HSET h_1 name one");
    run(&mut db, &mut s, "HSET h_3 name three");
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY w_* ALPHA"),
        bulks(&["2", "3", "1"])
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY w_* ALPHA DESC"),
        bulks(&["1", "3", "2"])
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT l GET # GET h_*->name"),
        "*6\r\n$1\r\n1\r\n$3\r\none\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n$5\r\nthree\r\n"
    );
    assert_eq!(
        run(
            &mut db,
            &mut s,
            "SORT l BY w_* GET h_*->name ALPHA STORE out"
        ),
        ":3\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LRANGE out 0 -1"),
        bulks(&["", "three", "one"])
    );
    // Numeric weights that are not numbers.
    assert_eq!(
        run(&mut db, &mut s, "SORT l BY w_*"),
        "-ERR One or more scores can't be converted into double\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT_RO l STORE x"),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "SORT l LIMIT 0 x"),
        "-ERR value is not an integer or out of range\r\n"
    );
    run(&mut db, &mut s, "SET str x");
    assert_eq!(
        run(&mut db, &mut s, "SORT str"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}
