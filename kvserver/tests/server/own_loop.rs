//! The shard's own event loop (`kvserver/src/net/conn/fast.rs`): plain clients are served
//! without a task, move to a task at a command the plain lanes do not take, and come back
//! after a run of plain batches, keeping their state; input and replies cross with them.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::support::{call, cmd, read_replies, Server};

/// Sockets in the shard's own epoll instance: the instance of the process that holds another
/// epoll instance (tokio's) among its sources, read from `/proc/PID/fdinfo`.
fn loop_clients(server: &Server) -> usize {
    let pid = server.pid();
    let is_epoll = |fd: &str| {
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            .is_ok_and(|t| t.as_os_str() == "anon_inode:[eventpoll]")
    };
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if !is_epoll(&name) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{name}")).unwrap();
        let tfds: Vec<String> = info
            .lines()
            .filter_map(|l| l.strip_prefix("tfd:"))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        if tfds.iter().any(|t| is_epoll(t)) {
            return tfds.len() - 1;
        }
    }
    panic!("no epoll instance of the process watches another: the shard's loop is not running");
}

/// Waits until the loop holds `n` clients (a client's move is done by the server between
/// its reply and its next read).
fn wait_loop_clients(server: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while loop_clients(server) != n {
        assert!(
            Instant::now() < deadline,
            "the loop holds {} clients, not {n}",
            loop_clients(server)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn clients_move_between_the_loop_and_tasks_keeping_their_state() {
    let server = Server::start(&["--threads", "1"]);
    let mut c = server.raw();
    assert_eq!(call(&mut c, "SET k v"), "+OK\r\n");
    wait_loop_clients(&server, 1);
    // A command of the connection's own: to a task, with its name.
    assert_eq!(call(&mut c, "CLIENT SETNAME mover"), "+OK\r\n");
    wait_loop_clients(&server, 0);
    assert_eq!(call(&mut c, "SELECT 3"), "+OK\r\n");
    // Plain batches in a row bring it back to the loop, in database 3 still.
    for i in 0..40 {
        assert_eq!(call(&mut c, &format!("SET n{i} {i}")), "+OK\r\n");
    }
    wait_loop_clients(&server, 1);
    assert_eq!(call(&mut c, "GET n39"), "$2\r\n39\r\n");
    assert_eq!(call(&mut c, "GET k"), "$-1\r\n");
    assert_eq!(call(&mut c, "CLIENT GETNAME"), "$5\r\nmover\r\n");
    wait_loop_clients(&server, 0);
    // A second client stays in the loop meanwhile, and the first one's going is counted.
    let mut d = server.raw();
    assert_eq!(call(&mut d, "INCR counter"), ":1\r\n");
    wait_loop_clients(&server, 1);
    drop(c);
    assert_eq!(call(&mut d, "INCR counter"), ":2\r\n");
    let clients = call(&mut d, "INFO clients");
    assert!(clients.contains("connected_clients:1\r\n"), "{clients}");
}

#[test]
fn a_pipeline_that_moves_to_a_task_midway_answers_in_order() {
    let server = Server::start(&["--threads", "1"]);
    let mut c = server.raw();
    let mut req = Vec::new();
    for line in [
        "SET a 1",
        "INCR a",
        "CLIENT SETNAME p",
        "GET a",
        "CLIENT GETNAME",
        "INCR a",
    ] {
        req.extend(cmd(line));
    }
    c.write_all(&req).unwrap();
    let replies: Vec<String> = read_replies(&mut c, 6)
        .into_iter()
        .map(|r| String::from_utf8(r).unwrap())
        .collect();
    assert_eq!(
        replies,
        [
            "+OK\r\n",
            ":2\r\n",
            "+OK\r\n",
            "$1\r\n2\r\n",
            "$1\r\np\r\n",
            ":3\r\n"
        ]
    );
}

#[test]
fn commands_split_across_reads_or_larger_than_the_loop_buffer_arrive_whole() {
    let server = Server::start(&["--threads", "1"]);
    let mut c = server.raw();
    assert_eq!(call(&mut c, "PING"), "+PONG\r\n");
    // One byte at a time: the loop keeps the start of the command between reads.
    for b in cmd("SET small value") {
        c.write_all(&[b]).unwrap();
        c.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(read_replies(&mut c, 1), [b"+OK\r\n".to_vec()]);
    // 200 KB in pieces: larger than the loop's buffer, so a task takes it over.
    let value: String = (0..200_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let req = cmd(&format!("SET big {value}"));
    for piece in req.chunks(7_000) {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(read_replies(&mut c, 1), [b"+OK\r\n".to_vec()]);
    assert_eq!(call(&mut c, "STRLEN big"), ":200000\r\n");
    let got = call(&mut c, "GET big");
    assert_eq!(got, format!("$200000\r\n{value}\r\n"));
    assert_eq!(call(&mut c, "GET small"), "$5\r\nvalue\r\n");
}

#[test]
fn a_reply_larger_than_the_socket_takes_is_written_whole() {
    let server = Server::start(&["--threads", "1"]);
    let mut c = server.raw();
    let value = "x".repeat(4 << 20);
    assert_eq!(call(&mut c, &format!("SET huge {value}")), "+OK\r\n");
    let mut w = server.raw();
    // Sixteen copies in one batch, not read for a while: the send stops short and a task
    // writes the rest while the loop goes on serving others.
    let mut req = Vec::new();
    for _ in 0..16 {
        req.extend(cmd("GET huge"));
    }
    w.write_all(&req).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(call(&mut c, "INCR other"), ":1\r\n");
    let want = format!("${}\r\n{value}\r\n", value.len()).repeat(16);
    let mut got = vec![0u8; want.len()];
    w.read_exact(&mut got).unwrap();
    assert!(
        got == want.as_bytes(),
        "the replies differ from 16 copies of the value"
    );
    assert_eq!(call(&mut w, "PING"), "+PONG\r\n");
}
