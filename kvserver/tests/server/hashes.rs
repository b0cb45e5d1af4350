//! Hashes in the real server: field deadlines expire on the server's clock, lazily and by the
//! active cycle, on any shard.

use std::time::Duration;

use crate::support::{call, key_on, Server};

#[test]
fn hash_fields_expire_lazily_and_actively_on_every_shard() {
    let server = Server::start(&["--threads", "3"]);
    let mut c = server.raw();
    for shard in 0..3 {
        let (lazy, active) = (key_on("h", shard, 3, 0), key_on("h", shard, 3, 1));
        assert_eq!(call(&mut c, &format!("HSET {lazy} a 1 b 2")), ":2\r\n");
        assert_eq!(
            call(&mut c, &format!("HPEXPIRE {lazy} 50 FIELDS 1 a")),
            "*1\r\n:1\r\n"
        );
        assert_eq!(call(&mut c, &format!("HSET {active} x 1")), ":1\r\n");
        assert_eq!(
            call(&mut c, &format!("HPEXPIRE {active} 50 FIELDS 1 x")),
            "*1\r\n:1\r\n"
        );
        let ttl = call(&mut c, &format!("HPTTL {lazy} FIELDS 2 a b"));
        assert!(
            ttl.starts_with("*2\r\n:") && ttl.ends_with(":-1\r\n"),
            "{ttl}"
        );
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(call(&mut c, &format!("HGET {lazy} a")), "$-1\r\n");
        assert_eq!(call(&mut c, &format!("HLEN {lazy}")), ":1\r\n");
        // Nobody read it: the active cycle (10 times a second) removed its last field.
        assert_eq!(
            call(&mut c, &format!("EXISTS {active}")),
            ":0\r\n",
            "shard {shard}"
        );
    }
}
