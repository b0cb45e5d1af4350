//! The Lua side of functions: a Lua state per thread, apart from EVAL's (as Redis keeps one for
//! each), in which libraries' code runs.
//!
//! Code sees one global view whose lookups go two ways. While a library's code runs to
//! register its functions, the view holds only a `redis` table with `register_function`,
//! `log`, the log levels and the version (any other name, `redis.call` included, fails as a
//! nonexistent global); when a function runs, the view is EVAL's: every library, the full
//! `redis` API, no `KEYS` or `ARGV` (a function gets its keys and arguments as its two
//! arguments). Both views are read-only.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, MultiValue, Table, Value as Lv};

use super::{flag, valid_name, FunctionInfo, Functions, Library, FLAG_NAMES};
use crate::resp::ReplyWriter;
use crate::script::{
    internal, lua_error_text, run_in, script_error_text, Caller, Engine, Run, ScriptError,
};

/// How long a library's code may run when loaded by a client (Redis's `LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// Lua source of the function view, run once per state after the script prelude with the real
/// globals, the prelude's helpers and `register_function`; returns the view and the switch
/// between its two ways.
const FUNCTION_PRELUDE: &str = r#"
local G, api, register = ...
local readonly, rawget, raw_error, raw_tostring = api.readonly, rawget, error, tostring
local real_redis = api.real_of[rawget(G, 'redis')]
local function missing(k)
  raw_error("Script attempted to access nonexistent global variable '" .. raw_tostring(k) .. "'", 3)
end
local function strict(t)
  return readonly(t, function(_, k)
    local v = rawget(t, k)
    if v == nil then missing(k) end
    return v
  end)
end
local load_redis = {
  register_function = register,
  log = real_redis.log,
  LOG_DEBUG = real_redis.LOG_DEBUG,
  LOG_VERBOSE = real_redis.LOG_VERBOSE,
  LOG_NOTICE = real_redis.LOG_NOTICE,
  LOG_WARNING = real_redis.LOG_WARNING,
  REDIS_VERSION = real_redis.REDIS_VERSION,
  REDIS_VERSION_NUM = real_redis.REDIS_VERSION_NUM,
}
local load_globals = { redis = strict(load_redis) }
local loading = false
local view = readonly(G, function(_, k)
  local v
  if loading then v = rawget(load_globals, k) else v = rawget(G, k) end
  if v == nil then missing(k) end
  return v
end)
return view, function(on) loading = on end
"#;

/// A library's code being run: what it registered so far (the callbacks in a Lua table: the
/// host holds few Lua values itself, as each takes a slot of a bounded stack).
struct LoadCtx {
    infos: Vec<FunctionInfo>,
    callbacks: Table,
}

/// A thread's function engine.
struct FnEngine {
    e: Engine,
    view: Table,
    set_loading: Function,
    load: Rc<RefCell<Option<LoadCtx>>>,
    /// The code of each library this thread has run, by name ...
    codes: HashMap<Vec<u8>, Arc<[u8]>>,
    /// ... and, in Lua, its functions: `compiled[library][function]`.
    compiled: Table,
    flushes_seen: u64,
    version_seen: u64,
    /// Libraries run since the last garbage collection step.
    runs: u32,
}

thread_local! {
    static FENGINE: RefCell<Option<FnEngine>> = const { RefCell::new(None) };
}

fn fail<T>(msg: &str) -> mlua::Result<T> {
    Err(mlua::Error::external(ScriptError(
        format!("ERR {msg}").into_bytes(),
    )))
}

/// A string or a number as Lua's `tostring` gives it (Redis's `lua_isstring`), else `None`.
fn string_arg(lua: &mlua::Lua, v: &Lv) -> Option<Vec<u8>> {
    match v {
        Lv::String(s) => Some(s.as_bytes().to_vec()),
        Lv::Integer(_) | Lv::Number(_) => lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec()),
        _ => None,
    }
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=...,
/// callback=..., description=..., flags={...}}`, checked as Redis checks it.
fn register(
    lua: &mlua::Lua,
    load: &RefCell<Option<LoadCtx>>,
    args: MultiValue,
) -> mlua::Result<()> {
    let mut slot = load.borrow_mut();
    let Some(ctx) = slot.as_mut() else {
        return fail("redis.register_function can only be called on FUNCTION LOAD command");
    };
    if args.is_empty() || args.len() > 2 {
        return fail("wrong number of arguments to redis.register_function");
    }
    let (mut name, mut description, mut callback, mut flags) = (None, None, None, 0u8);
    if args.len() == 1 {
        let Some(Lv::Table(t)) = args.front() else {
            return fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
        };
        for pair in t.pairs::<Lv, Lv>() {
            let (k, v) = pair?;
            let Some(key) = string_arg(lua, &k) else {
                return fail("named argument key given to redis.register_function is not a string");
            };
            let is = |s: &str| key.eq_ignore_ascii_case(s.as_bytes());
            if is("function_name") {
                match string_arg(lua, &v) {
                    Some(n) => name = Some(n),
                    None => return fail(
                        "function_name argument given to redis.register_function must be a string",
                    ),
                }
            } else if is("description") {
                match string_arg(lua, &v) {
                    Some(d) => description = Some(d),
                    None => return fail(
                        "description argument given to redis.register_function must be a string",
                    ),
                }
            } else if is("callback") {
                match v {
                    Lv::Function(f) => callback = Some(f),
                    _ => {
                        return fail(
                            "callback argument given to redis.register_function must be a function",
                        )
                    }
                }
            } else if is("flags") {
                let Lv::Table(list) = v else {
                    return fail("flags argument to redis.register_function must be a table representing function flags");
                };
                flags = 0;
                for i in 1.. {
                    let item: Lv = list.raw_get(i)?;
                    if item.is_nil() {
                        break;
                    }
                    let found = string_arg(lua, &item).and_then(|s| {
                        FLAG_NAMES
                            .iter()
                            .find(|(_, n)| s.eq_ignore_ascii_case(n.as_bytes()))
                    });
                    match found {
                        Some((bit, _)) => flags |= bit,
                        None => return fail("unknown flag given"),
                    }
                }
            } else {
                return fail("unknown argument given to redis.register_function");
            }
        }
        if name.is_none() {
            return fail("redis.register_function must get a function name argument");
        }
        if callback.is_none() {
            return fail("redis.register_function must get a callback argument");
        }
    } else {
        let Some(n) = args.front().and_then(|v| string_arg(lua, v)) else {
            return fail("first argument to redis.register_function must be a string");
        };
        let Some(Lv::Function(f)) = args.get(1) else {
            return fail("second argument to redis.register_function must be a function");
        };
        name = Some(n);
        callback = Some(f.clone());
    }
    let (Some(name), Some(callback)) = (name, callback) else {
        return fail("redis.register_function must get a callback argument");
    };
    if !valid_name(&name) {
        return fail(super::BAD_NAME);
    }
    if ctx.infos.iter().any(|f| f.name == name) {
        return fail("Function already exists in the library");
    }
    ctx.callbacks.raw_set(lua.create_string(&name)?, callback)?;
    ctx.infos.push(FunctionInfo {
        name,
        description,
        flags,
    });
    Ok(())
}

impl FnEngine {
    fn new() -> mlua::Result<FnEngine> {
        let e = Engine::new()?;
        let load: Rc<RefCell<Option<LoadCtx>>> = Rc::default();
        let ctx = load.clone();
        let register_fn = e
            .lua
            .create_function(move |lua, args: MultiValue| register(lua, &ctx, args))?;
        let (view, set_loading): (Table, Function) = e
            .lua
            .load(FUNCTION_PRELUDE)
            .set_name("@kv_redis_api")
            .call((e.globals.clone(), e.api.clone(), register_fn))?;
        let compiled = e.lua.create_table()?;
        Ok(FnEngine {
            e,
            view,
            set_loading,
            load,
            codes: HashMap::new(),
            compiled,
            flushes_seen: 0,
            version_seen: 0,
            runs: 0,
        })
    }

    /// Runs the code of library `name` (`code[body..]`) and keeps what it registered (a
    /// library of that name run before is forgotten); returns the functions registered.
    fn run_library(
        &mut self,
        name: &[u8],
        code: &Arc<[u8]>,
        body: usize,
        timeout: bool,
    ) -> Result<Vec<FunctionInfo>, Vec<u8>> {
        let f = self
            .e
            .lua
            .load(code.get(body..).unwrap_or_default())
            .set_name("@user_function")
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.view.clone())
            .into_function()
            .map_err(|e| {
                let mut m = b"ERR Error compiling function: ".to_vec();
                m.extend_from_slice(lua_error_text(&e).as_bytes());
                m
            })?;
        *self.load.borrow_mut() = Some(LoadCtx {
            infos: Vec::new(),
            callbacks: self.e.lua.create_table().map_err(internal)?,
        });
        self.set_loading.call::<()>(true).map_err(internal)?;
        if timeout {
            let start = Instant::now();
            self.e
                .lua
                .set_hook(
                    mlua::HookTriggers::new().every_nth_instruction(100_000),
                    move |_, _| {
                        if start.elapsed() > LOAD_TIMEOUT {
                            return Err(mlua::Error::external(ScriptError(
                                b"ERR FUNCTION LOAD timeout".to_vec(),
                            )));
                        }
                        Ok(mlua::VmState::Continue)
                    },
                )
                .map_err(internal)?;
        }
        let ran = f.call::<()>(());
        self.e.lua.remove_hook();
        let _ = self.set_loading.call::<()>(false);
        let ctx = self.load.borrow_mut().take();
        // A collection step every 50 loads, as Redis's luaGC: loading many libraries stays
        // linear, and the garbage of their runs does not pile up.
        self.runs += 1;
        if self.runs >= 50 {
            self.runs = 0;
            let _ = self.e.lua.gc_step_kbytes(50);
        }
        match (ran, ctx) {
            (Ok(()), Some(ctx)) => {
                let key = self.e.lua.create_string(name).map_err(internal)?;
                self.compiled
                    .raw_set(key, ctx.callbacks)
                    .map_err(internal)?;
                self.codes.insert(name.to_vec(), code.clone());
                Ok(ctx.infos)
            }
            (Ok(()), None) => Err(b"ERR the library's load was lost".to_vec()),
            (Err(e), _) => {
                let mut m = b"ERR Error registering functions: ".to_vec();
                m.extend_from_slice(&crate::script::one_line(&script_error_text(&e)));
                Err(m)
            }
        }
    }

    /// The compiled function `name` of `lib`, running the library's code first if this thread
    /// has not run this version of it.
    fn function(&mut self, lib: &Library, name: &[u8]) -> Result<Function, Vec<u8>> {
        let fresh = self
            .codes
            .get(&lib.name)
            .is_some_and(|code| Arc::ptr_eq(code, &lib.code));
        if !fresh {
            let (_, body) = super::metadata(&lib.code)?;
            self.run_library(&lib.name, &lib.code, body, false)?;
        }
        let lookup = || -> mlua::Result<Option<Function>> {
            let fns: Option<Table> = self
                .compiled
                .raw_get(self.e.lua.create_string(&lib.name)?)?;
            match fns {
                Some(fns) => fns.raw_get(self.e.lua.create_string(name)?),
                None => Ok(None),
            }
        };
        lookup()
            .map_err(internal)?
            .ok_or_else(|| b"ERR Function not found".to_vec())
    }

    /// Forgets a library this thread ran.
    fn forget(&mut self, name: &[u8]) {
        self.codes.remove(name);
        if let Ok(key) = self.e.lua.create_string(name) {
            let _ = self.compiled.raw_set(key, Lv::Nil);
        }
    }
}

/// Runs `f` with this thread's function engine (made on first use, made again after a FUNCTION
/// FLUSH), its memory of libraries no longer current dropped.
fn with_engine<R>(
    functions: &Functions,
    f: impl FnOnce(&mut FnEngine) -> Result<R, Vec<u8>>,
) -> Result<R, Vec<u8>> {
    FENGINE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err(b"ERR functions cannot be loaded or run from a function".to_vec());
        };
        let flushes = functions.flushes();
        if slot.as_ref().is_some_and(|e| e.flushes_seen != flushes) {
            *slot = None;
        }
        if slot.is_none() {
            let mut engine = FnEngine::new().map_err(internal)?;
            engine.flushes_seen = flushes;
            *slot = Some(engine);
        }
        let Some(engine) = slot.as_mut() else {
            return Err(b"ERR the Lua environment is not available".to_vec());
        };
        // Libraries deleted or replaced since this thread ran them are dropped once they are
        // as many as the libraries there (each check of a library compares its code first, so
        // a stale one is never run): the cost of the sweep is spread over the changes.
        let version = functions.version();
        if engine.version_seen != version {
            engine.version_seen = version;
            let (libraries, _) = functions.counts();
            if engine.codes.len() > 2 * libraries + 16 {
                let current: HashMap<Vec<u8>, Arc<[u8]>> = functions
                    .libraries()
                    .into_iter()
                    .map(|l| (l.name.clone(), l.code.clone()))
                    .collect();
                let stale: Vec<Vec<u8>> = (engine.codes.iter())
                    .filter(|(name, code)| {
                        !current.get(*name).is_some_and(|c| Arc::ptr_eq(c, code))
                    })
                    .map(|(name, _)| name.clone())
                    .collect();
                for name in stale {
                    engine.forget(&name);
                }
            }
        }
        f(engine)
    })
}

/// Runs the code of library `name` (`code[body..]`) on this thread, stopped past the load
/// timeout when `timeout`; returns the functions it registered. This thread keeps them: its
/// first call of one runs no code again if the library is linked as run.
pub(crate) fn compile(
    functions: &Functions,
    name: &[u8],
    code: &Arc<[u8]>,
    body: usize,
    timeout: bool,
) -> Result<Vec<FunctionInfo>, Vec<u8>> {
    with_engine(functions, |e| e.run_library(name, code, body, timeout))
}

/// Bytes this thread's function Lua state holds (0 before its first use).
pub fn lua_memory(functions: &Functions) -> usize {
    FENGINE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return 0;
        };
        if slot
            .as_ref()
            .is_some_and(|e| e.flushes_seen != functions.flushes())
        {
            *slot = None;
        }
        slot.as_ref().map_or(0, |e| e.e.lua.used_memory())
    })
}

/// What a function call gets.
pub(crate) struct CallArgs<'a> {
    /// Its keys.
    pub(crate) keys: &'a [&'a [u8]],
    /// Its other arguments.
    pub(crate) argv: &'a [&'a [u8]],
    /// Commands that write are refused (FCALL_RO, or a `no-writes` function).
    pub(crate) read_only: bool,
}

/// Runs the function `info` of `lib`: its reply (or its error) goes to `w`.
pub(crate) fn call(
    functions: &Functions,
    lib: &Library,
    info: &FunctionInfo,
    args: CallArgs<'_>,
    caller: &mut dyn Caller,
    w: &mut ReplyWriter<'_>,
) {
    let read_only = args.read_only || info.flags & flag::NO_WRITES != 0;
    caller.allow_oom(info.flags & flag::ALLOW_OOM != 0);
    let r = with_engine(functions, |e| {
        let f = e.function(lib, &info.name)?;
        let run = Run {
            keys: args.keys,
            argv: args.argv,
            as_args: true,
            label: &info.name,
            eval: false,
            read_only,
            running: functions.running(),
        };
        run_in(&mut e.e, &f, run, caller, w)
    });
    if let Err(e) = r {
        w.error(&e);
    }
}
