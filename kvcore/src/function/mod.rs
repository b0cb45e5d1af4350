//! Redis Functions: libraries of Lua functions loaded with FUNCTION LOAD and called with FCALL.
//!
//! A library is its code, whose first line names it (`#!lua name=mylib`); running the code
//! once registers its functions (`redis.register_function`). The registry ([`Functions`]) keeps
//! every library by its exact name and every function by its name in any case (FCALL finds
//! `MyFunc` as `myfunc`, as Redis's function dictionary does), so that two libraries can never
//! register the same function name.
//!
//! The registry is the one truth all stores share (a server's shards each run FCALL on their
//! own thread), and it holds code, not compiled functions: each thread runs a library's code in
//! its own Lua state the first time it calls one of its functions ([`lua`]), and keeps the
//! compiled functions while the library stays the same (the same code allocation). FUNCTION
//! FLUSH bumps a counter that makes every thread start a fresh Lua state, as Redis does.
//!
//! What a library is made of is all its code: an RDB file and FUNCTION DUMP hold the code of each
//! library after Redis's `RDB_OPCODE_FUNCTION2` (see [`crate::rdb::function_record`]), and
//! loading one runs the code again.

pub(crate) mod lua;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::script::Running;

/// The flags a function may declare (`flags={'no-writes'}`), as bits.
pub mod flag {
    /// The function never writes: FCALL_RO may call it, and it runs on read-only replicas.
    pub const NO_WRITES: u8 = 1;
    /// It runs (and writes) past `maxmemory`.
    pub const ALLOW_OOM: u8 = 2;
    /// It runs on a replica whose master link is down with `replica-serve-stale-data no`.
    pub const ALLOW_STALE: u8 = 4;
    /// It refuses to run in cluster mode.
    pub const NO_CLUSTER: u8 = 8;
    /// Its keys may be in several slots.
    pub const ALLOW_CROSS_SLOT: u8 = 16;
}

/// Flag names, in the order Redis lists them (`scripts_flags_def`).
pub const FLAG_NAMES: [(u8, &str); 5] = [
    (flag::NO_WRITES, "no-writes"),
    (flag::ALLOW_OOM, "allow-oom"),
    (flag::ALLOW_STALE, "allow-stale"),
    (flag::NO_CLUSTER, "no-cluster"),
    (flag::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
];

/// One function of a library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name as registered.
    pub name: Vec<u8>,
    /// Its description, if it was given one.
    pub description: Option<Vec<u8>>,
    /// Its [`flag`] bits.
    pub flags: u8,
}

/// A library: its name, its whole code (shebang line included) and its functions.
#[derive(Debug)]
pub struct Library {
    /// Its name (from `name=` in the shebang line).
    pub name: Vec<u8>,
    /// Its code as loaded.
    pub code: Arc<[u8]>,
    /// Its functions, in the order registered.
    pub functions: Vec<FunctionInfo>,
}

const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Whether `name` is a valid library or function name: letters, digits and `_`, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn err(msg: impl AsRef<[u8]>) -> Vec<u8> {
    let mut e = b"ERR ".to_vec();
    e.extend_from_slice(msg.as_ref());
    e
}

fn with_name(prefix: &str, name: &[u8], suffix: &str) -> Vec<u8> {
    let mut m = prefix.as_bytes().to_vec();
    m.extend_from_slice(name);
    m.extend_from_slice(suffix.as_bytes());
    err(m)
}

/// A library's shebang line read as Redis reads it: the library's name and where the code after
/// the line starts (at its line feed, so line numbers stay the user's), or Redis's error.
pub fn metadata(code: &[u8]) -> Result<(Vec<u8>, usize), Vec<u8>> {
    if !code.starts_with(b"#!") {
        return Err(err("Missing library metadata"));
    }
    // Redis reads the code as a C string: the line must end before any NUL.
    let text = memchr::memchr(0, code).map_or(code, |nul| &code[..nul]);
    let Some(end) = memchr::memchr(b'\n', text) else {
        return Err(err("Invalid library metadata"));
    };
    let parts = match crate::resp::parse::split_words(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err(err("Invalid library metadata")),
    };
    let engine = parts[0].get(2..).unwrap_or_default();
    let mut name: Option<Vec<u8>> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(err(
                    "Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(with_name("Invalid metadata value given: ", part, ""));
    }
    let Some(name) = name else {
        return Err(err("Library name was not given"));
    };
    if !valid_name(&name) {
        return Err(err(BAD_NAME));
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(with_name("Engine '", engine, "' not found"));
    }
    Ok((name, end))
}

/// Libraries and the functions they registered.
#[derive(Default)]
struct Registry {
    libraries: BTreeMap<Vec<u8>, Arc<Library>>,
    /// Every function by its lowercased name: its library.
    functions: HashMap<Vec<u8>, Arc<Library>>,
}

impl Registry {
    /// LOAD's check before the code runs: a library of that name without REPLACE.
    fn refuse_existing(&self, name: &[u8], replace: bool) -> Result<(), Vec<u8>> {
        if !replace && self.libraries.contains_key(name) {
            return Err(with_name("Library '", name, "' already exists"));
        }
        Ok(())
    }

    /// Links a library whose code ran (replacing one of its name when `replace`), or Redis's
    /// error: no function registered, or one of them registered by another library.
    fn link(&mut self, lib: Library, replace: bool) -> Result<Arc<Library>, Vec<u8>> {
        self.refuse_existing(&lib.name, replace)?;
        if lib.functions.is_empty() {
            return Err(err("No functions registered"));
        }
        for f in &lib.functions {
            if let Some(owner) = self.functions.get(&f.name.to_ascii_lowercase()) {
                if owner.name != lib.name {
                    return Err(with_name("Function ", &f.name, " already exists"));
                }
            }
        }
        self.unlink(&lib.name);
        let lib = Arc::new(lib);
        for f in &lib.functions {
            self.functions
                .entry(f.name.to_ascii_lowercase())
                .or_insert_with(|| lib.clone());
        }
        self.libraries.insert(lib.name.clone(), lib.clone());
        Ok(lib)
    }

    fn unlink(&mut self, name: &[u8]) -> Option<Arc<Library>> {
        let old = self.libraries.remove(name)?;
        for f in &old.functions {
            let key = f.name.to_ascii_lowercase();
            if self
                .functions
                .get(&key)
                .is_some_and(|l| Arc::ptr_eq(l, &old))
            {
                self.functions.remove(&key);
            }
        }
        Some(old)
    }

    /// RESTORE's join of `new` (libraries checked among themselves) into this registry:
    /// all of them or none.
    fn join(&mut self, new: Registry, replace: bool) -> Result<(), Vec<u8>> {
        for name in new.libraries.keys() {
            if !replace && self.libraries.contains_key(name) {
                return Err(with_name("Library ", name, " already exists"));
            }
        }
        for (key, lib) in &new.functions {
            if let Some(owner) = self.functions.get(key) {
                if !new.libraries.contains_key(&owner.name) {
                    let f = lib
                        .functions
                        .iter()
                        .find(|f| f.name.to_ascii_lowercase() == *key);
                    return Err(with_name(
                        "Function ",
                        f.map_or(key.as_slice(), |f| &f.name),
                        " already exists",
                    ));
                }
            }
        }
        for name in new.libraries.keys() {
            self.unlink(name);
        }
        for (name, lib) in new.libraries {
            for f in &lib.functions {
                self.functions
                    .entry(f.name.to_ascii_lowercase())
                    .or_insert_with(|| lib.clone());
            }
            self.libraries.insert(name, lib);
        }
        Ok(())
    }
}

/// How FUNCTION RESTORE (or a load from a file) treats the libraries already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Every library there goes first.
    Flush,
    /// Adds; a library of the same name fails the whole restore.
    Append,
    /// Adds; a library of the same name is replaced.
    Replace,
}

/// A function running now, for FUNCTION STATS.
struct Current {
    name: Vec<u8>,
    command: Vec<Vec<u8>>,
    since: Instant,
}

#[derive(Default)]
struct Shared {
    registry: Mutex<Registry>,
    /// Changes to the registry so far: a thread's compiled libraries of an older count may
    /// be stale.
    version: std::sync::atomic::AtomicU64,
    /// FUNCTION FLUSH calls so far: a thread's Lua state of an older count is dropped.
    flushes: std::sync::atomic::AtomicU64,
    running: Arc<Running>,
    current: Mutex<Option<Current>>,
}

/// The function libraries, shared by every store of a host (cloning shares them).
#[derive(Clone, Default)]
pub struct Functions(Arc<Shared>);

impl Functions {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.0.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.0
            .version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn version(&self) -> u64 {
        self.0.version.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn flushes(&self) -> u64 {
        self.0.flushes.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn running(&self) -> &Arc<Running> {
        &self.0.running
    }

    /// The function named `name` (in any case) and its library.
    pub fn find(&self, name: &[u8]) -> Option<(Arc<Library>, FunctionInfo)> {
        let reg = self.registry();
        let lib = reg.functions.get(&name.to_ascii_lowercase())?.clone();
        let f = lib
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))?
            .clone();
        Some((lib, f))
    }

    /// Every library, by name.
    pub fn libraries(&self) -> Vec<Arc<Library>> {
        self.registry().libraries.values().cloned().collect()
    }

    /// Numbers of libraries and of functions.
    pub fn counts(&self) -> (usize, usize) {
        let reg = self.registry();
        (reg.libraries.len(), reg.functions.len())
    }

    /// Bytes this thread's function Lua state holds (INFO `used_memory_vm_functions`, summed
    /// over a host's stores).
    pub fn lua_memory(&self) -> usize {
        lua::lua_memory(self)
    }

    /// Bytes the registry holds (code, names, descriptions): INFO `used_memory_functions`.
    pub fn memory(&self) -> usize {
        let reg = self.registry();
        reg.libraries
            .values()
            .map(|l| {
                std::mem::size_of::<Library>()
                    + l.code.len()
                    + 2 * l.name.len()
                    + l.functions
                        .iter()
                        .map(|f| {
                            std::mem::size_of::<FunctionInfo>()
                                + 2 * f.name.len()
                                + f.description.as_ref().map_or(0, Vec::len)
                        })
                        .sum::<usize>()
            })
            .sum()
    }

    /// FUNCTION LOAD: runs `code` (stopped past Redis's 500 ms unless `no_timeout`, as for
    /// a master's or a file's) and links its library. Returns the library's name.
    pub fn load(&self, code: &[u8], replace: bool, no_timeout: bool) -> Result<Vec<u8>, Vec<u8>> {
        let (name, body) = metadata(code)?;
        self.registry().refuse_existing(&name, replace)?;
        let code: Arc<[u8]> = code.into();
        let functions = lua::compile(self, &name, &code, body, !no_timeout)?;
        let lib = Library {
            name: name.clone(),
            code,
            functions,
        };
        self.registry().link(lib, replace)?;
        self.changed();
        Ok(name)
    }

    /// FUNCTION RESTORE (and a file's functions): every library of `codes` loaded, then joined
    /// to those there by `policy`; all or nothing.
    pub fn restore(&self, codes: &[Vec<u8>], policy: Policy) -> Result<(), Vec<u8>> {
        let mut new = Registry::default();
        for code in codes {
            let (name, body) = metadata(code)?;
            new.refuse_existing(&name, false)?;
            let code: Arc<[u8]> = code.as_slice().into();
            let functions = lua::compile(self, &name, &code, body, false)?;
            let lib = Library {
                name,
                code,
                functions,
            };
            new.link(lib, false)?;
        }
        {
            let mut reg = self.registry();
            match policy {
                Policy::Flush => *reg = new,
                Policy::Append | Policy::Replace => reg.join(new, policy == Policy::Replace)?,
            }
        }
        self.changed();
        Ok(())
    }

    /// FUNCTION DELETE: false when there is no library of that name.
    pub fn delete(&self, name: &[u8]) -> bool {
        let gone = self.registry().unlink(name).is_some();
        if gone {
            self.changed();
        }
        gone
    }

    /// FUNCTION FLUSH: every library goes, and every thread's Lua state with them.
    pub fn flush(&self) {
        *self.registry() = Registry::default();
        self.0
            .flushes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.changed();
    }

    /// FUNCTION DUMP's payload.
    pub fn dump(&self) -> Vec<u8> {
        let libs = self.libraries();
        crate::rdb::functions_dump(libs.iter().map(|l| &l.code[..]))
    }

    /// FUNCTION KILL: stops a running function that has not written.
    pub fn kill(&self, scripts: &crate::script::ScriptCache) -> Result<(), &'static [u8]> {
        if !self.0.running.busy() && scripts.eval_busy() {
            return Err(b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
        }
        self.0.running.kill()
    }

    /// The function running now (its name, its FCALL and for how long, in ms), if any.
    pub fn current(&self) -> Option<(Vec<u8>, Vec<Vec<u8>>, u64)> {
        let c = self.0.current.lock().unwrap_or_else(|p| p.into_inner());
        c.as_ref().map(|c| {
            (
                c.name.clone(),
                c.command.clone(),
                c.since.elapsed().as_millis() as u64,
            )
        })
    }

    pub(crate) fn set_current(&self, call: Option<(&[u8], &[&[u8]])>) {
        let mut c = self.0.current.lock().unwrap_or_else(|p| p.into_inner());
        *c = call.map(|(name, command)| Current {
            name: name.to_vec(),
            command: command.iter().map(|a| a.to_vec()).collect(),
            since: Instant::now(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_read_as_redis_reads_it() {
        let ok = metadata(b"#!lua name=lib1\nreturn 1").unwrap();
        assert_eq!(ok, (b"lib1".to_vec(), 15));
        assert_eq!(metadata(b"#!LUA NAME=\"x\"\n").unwrap().0, b"x");
        let e = |code: &[u8]| String::from_utf8(metadata(code).unwrap_err()).unwrap();
        assert_eq!(e(b"return 1"), "ERR Missing library metadata");
        assert_eq!(e(b"#!lua name=x"), "ERR Invalid library metadata");
        assert_eq!(e(b"#!lua name=\"x\n"), "ERR Invalid library metadata");
        assert_eq!(e(b"#! name=t\n"), "ERR Engine '' not found");
        assert_eq!(e(b"#!js name=t\n"), "ERR Engine 'js' not found");
        assert_eq!(
            e(b"#!lua name=t foo=bar\n"),
            "ERR Invalid metadata value given: foo=bar"
        );
        assert_eq!(e(b"#!lua\n"), "ERR Library name was not given");
        assert_eq!(
            e(b"#!lua name=a name=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(e(b"#!lua name=a-b\n"), format!("ERR {BAD_NAME}"));
        // The name is checked before the engine.
        assert_eq!(e(b"#!js name=a-b\n"), format!("ERR {BAD_NAME}"));
    }

    fn lib(name: &str, fns: &[&str]) -> Library {
        Library {
            name: name.into(),
            code: Arc::from(&b""[..]),
            functions: fns
                .iter()
                .map(|f| FunctionInfo {
                    name: f.as_bytes().to_vec(),
                    description: None,
                    flags: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn registry_links_replaces_and_joins_all_or_nothing() {
        let mut r = Registry::default();
        r.link(lib("a", &["f1", "f2"]), false).unwrap();
        assert_eq!(
            r.link(lib("a", &["f3"]), false).unwrap_err(),
            b"ERR Library 'a' already exists"
        );
        assert_eq!(
            r.link(lib("b", &["F1"]), false).unwrap_err(),
            b"ERR Function F1 already exists"
        );
        assert_eq!(
            r.link(lib("b", &[]), false).unwrap_err(),
            b"ERR No functions registered"
        );
        // Replacing a library may reuse its own function names.
        r.link(lib("a", &["f1", "f9"]), true).unwrap();
        assert!(r.functions.contains_key(&b"f9"[..]) && !r.functions.contains_key(&b"f2"[..]));
        let mut new = Registry::default();
        new.link(lib("a", &["g"]), false).unwrap();
        new.link(lib("c", &["F9"]), false).unwrap();
        let snapshot: Vec<_> = r.libraries.keys().cloned().collect();
        assert_eq!(
            r.join(std::mem::take(&mut new), false).unwrap_err(),
            b"ERR Library a already exists"
        );
        new.link(lib("a", &["g"]), false).unwrap();
        new.link(lib("c", &["F9"]), false).unwrap();
        // F9 belongs to the `a` being replaced: no collision.
        r.join(new, true).unwrap();
        assert_ne!(snapshot, r.libraries.keys().cloned().collect::<Vec<_>>());
        assert_eq!(r.functions.len(), 2);
        assert_eq!(r.functions[&b"f9"[..]].name, b"c");
    }
}
