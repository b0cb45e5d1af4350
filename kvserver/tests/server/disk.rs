//! A full disk, on a small tmpfs the test mounts: a background save that runs out of space
//! refuses writes with Redis's MISCONF while reads go on, leaves no file behind, and once
//! space returns a BGSAVE succeeds and writes resume; an AOF that cannot be written refuses
//! writes with MISCONF naming the system's error, and once space returns the writes go on
//! and every acknowledged one is in the file. Where no tmpfs can be mounted the test says so
//! and stops; `persistence::a_failed_background_save_refuses_writes_until_a_save_succeeds`
//! injects the write error instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::aof::aof_args;
use crate::persistence::{q, wait_info, TempDir};
use crate::support::Server;

/// A tmpfs of `mb` megabytes mounted on a fresh directory, unmounted on drop (then the
/// directory goes with `_dir`).
struct Tmpfs {
    path: PathBuf,
    _dir: TempDir,
}

impl Tmpfs {
    fn mount(name: &str, mb: u32) -> Option<Tmpfs> {
        let dir = TempDir::new(name);
        let path = PathBuf::from(dir.path());
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(&path)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "can't mount a tmpfs here ({}): the injected-error test stands for this one",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Tmpfs { path, _dir: dir })
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// `n` bytes that LZF cannot shrink.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn raw(c: &mut redis::Connection, args: &[&[u8]]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn files(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_full_disk_refuses_writes_until_space_returns() {
    let Some(fs) = Tmpfs::mount("full-disk-rdb", 4) else {
        return;
    };
    let filler = Path::new(fs.path()).join("filler");
    std::fs::write(&filler, vec![0u8; 2_500_000]).unwrap();
    let server = Server::start(&["--threads", "2", "--dir", fs.path(), "--save", "3600 1"]);
    let mut c = server.client();
    for i in 0..2000u64 {
        let k = format!("k{i}");
        raw(&mut c, &[b"SET", k.as_bytes(), &noise(i, 1000)]).unwrap();
    }
    let r: String = q(&mut c, &["BGSAVE"]);
    assert_eq!(r, "Background saving started");
    wait_info(&mut c, "rdb_bgsave_in_progress", "0");
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert!(info.contains("rdb_last_bgsave_status:err\r\n"), "{info}");
    let e = raw(&mut c, &[b"SET", b"k0", b"x"]).unwrap_err();
    assert_eq!(e.code(), Some("MISCONF"), "{e}");
    assert!(raw(&mut c, &[b"PING"]).is_err());
    // Reads go on, and nothing half written is left.
    let v: Vec<u8> = q(&mut c, &["GET", "k1"]);
    assert_eq!(v, noise(1, 1000));
    assert_eq!(files(fs.path()), ["filler"]);
    // Space returns: a save succeeds and writes resume.
    std::fs::remove_file(&filler).unwrap();
    let r: String = q(&mut c, &["BGSAVE"]);
    assert_eq!(r, "Background saving started");
    wait_info(&mut c, "rdb_bgsave_in_progress", "0");
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert!(info.contains("rdb_last_bgsave_status:ok\r\n"), "{info}");
    let _: () = q(&mut c, &["SET", "k0", "x"]);
    let file = Path::new(fs.path()).join("dump.rdb");
    let check = Command::new("redis-check-rdb").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[test]
fn a_full_disk_under_the_aof_refuses_writes_until_space_returns() {
    let Some(fs) = Tmpfs::mount("full-disk-aof", 4) else {
        return;
    };
    let filler = Path::new(fs.path()).join("filler");
    std::fs::write(&filler, vec![0u8; 3_000_000]).unwrap();
    let args = aof_args("2", fs.path(), "everysec", &[]);
    let server = Server::start(&args);
    let mut c = server.client();
    let mut acked = Vec::new();
    let mut refused = None;
    for i in 0..5000u64 {
        let k = format!("k{i}");
        match raw(&mut c, &[b"SET", k.as_bytes(), &noise(i, 1000)]) {
            Ok(_) => acked.push(i),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let e = refused.expect("the disk filled up");
    assert_eq!(e.code(), Some("MISCONF"), "{e}");
    assert!(
        e.to_string()
            .contains("Errors writing to the AOF file: No space left on device"),
        "{e}"
    );
    let info: String = q(&mut c, &["INFO", "persistence"]);
    assert!(info.contains("aof_last_write_status:err\r\n"), "{info}");
    let v: Vec<u8> = q(&mut c, &["GET", "k0"]);
    assert_eq!(v, noise(0, 1000));
    // Space returns: the writer catches up and writes are taken again.
    std::fs::remove_file(&filler).unwrap();
    let mut resumed = false;
    for _ in 0..300 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        if raw(&mut c, &[b"SET", b"after", b"1"]).is_ok() {
            resumed = true;
            break;
        }
    }
    assert!(resumed, "writes resume once space returns");
    // A clean stop syncs the file: every acknowledged write is in it, and it is whole.
    server.terminate();
    let manifest = Path::new(fs.path()).join("appendonlydir/appendonly.aof.manifest");
    crate::aof::redis_check_aof(&manifest);
    let server = Server::start(&args);
    let mut c = server.client();
    for i in acked {
        let v: Vec<u8> = q(&mut c, &["GET", &format!("k{i}")]);
        assert_eq!(v, noise(i, 1000), "k{i}");
    }
    let v: Option<String> = q(&mut c, &["GET", "after"]);
    assert_eq!(v.as_deref(), Some("1"));
}
