//! Lua scripting: the environment Redis 7 gives EVAL scripts, on Lua 5.1 (Redis's version).
//!
//! - **Globals**: the base library without `dofile`, `loadfile` and `print`; `string`,
//!   `table`, `math` (`random` and `randomseed` on Redis's 48-bit generator, so a fresh store
//!   draws the same numbers as a fresh Redis), `os` with `clock` only, `redis`, `KEYS` and
//!   `ARGV`. Scripts see them through a read-only view: assigning a global fails with
//!   "Attempt to modify a readonly table", reading a missing one with "Script attempted to
//!   access nonexistent global variable". The library tables are read-only too.
//! - **`redis.call` / `redis.pcall`** run a command through a [`Caller`] the host provides
//!   (a store runs it on itself; a server also checks where the keys live). The reply comes
//!   back as Lua values by Redis's rules: integers are numbers, bulk strings strings, nulls
//!   `false`, statuses `{ok=...}`, errors `{err=...}`, arrays tables. `redis.call` raises an
//!   error reply, `redis.pcall` returns it.
//! - **The return value** goes to the client by the reverse rules: numbers are truncated to
//!   integers, `true` is 1, `false` and `nil` are null, a table is an array up to its first
//!   `nil` unless it holds `err` or `ok`.
//! - **Errors** carry where they happened, as Redis writes them: `... script: <sha>, on
//!   @user_script:<line>.`
//!
//! One Lua state per thread ([`with_engine`]): a server's shard threads each have their own,
//! as each owns its store. The bodies of loaded scripts live in a [`ScriptCache`] the host may
//! share between stores (SCRIPT LOAD on one connection, EVALSHA on another); a thread's
//! compiled functions are only a memo of it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value as Lv};

use crate::resp::reply::{parse_reply, Value};
use crate::resp::ReplyWriter;

/// A script's SHA1 digest, 40 lowercase hex digits.
pub type Sha = [u8; 40];

/// The SHA1 of `body` in lowercase hex (script names, `redis.sha1hex`).
pub fn sha1_hex(body: &[u8]) -> Sha {
    let hex = sha1_smol::Sha1::from(body).digest().to_string();
    let mut out = [0u8; 40];
    out.copy_from_slice(hex.as_bytes());
    out
}

/// `s` as a [`Sha`] when it is 40 hex digits (any case), lowercased.
pub fn parse_sha(s: &[u8]) -> Option<Sha> {
    let s: &[u8; 40] = s.try_into().ok()?;
    let mut out = [0u8; 40];
    for (o, c) in out.iter_mut().zip(s) {
        if !c.is_ascii_hexdigit() {
            return None;
        }
        *o = c.to_ascii_lowercase();
    }
    Some(out)
}

/// The flags of a script's shebang line (`#!lua flags=no-writes,allow-oom`), checked as Redis
/// checks them: `None` without a shebang; `Err` with Redis's error for a bad one.
pub fn shebang_flags(body: &[u8]) -> Result<Option<Vec<&[u8]>>, Vec<u8>> {
    const FLAGS: &[&[u8]] = &[
        b"no-writes",
        b"allow-oom",
        b"allow-stale",
        b"no-cluster",
        b"allow-cross-slot-keys",
    ];
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let Some(end) = memchr::memchr(b'\n', body) else {
        return Err(b"ERR Invalid script shebang".to_vec());
    };
    let mut parts = body[..end]
        .split(|c| c.is_ascii_whitespace())
        .filter(|p| !p.is_empty());
    let err = |what: &str, part: &[u8]| {
        let mut m = format!("ERR {what}: ").into_bytes();
        m.extend_from_slice(part);
        m
    };
    match parts.next() {
        Some(b"#!lua") => {}
        Some(other) => return Err(err("Unexpected engine in script shebang", other)),
        None => return Err(b"ERR Invalid engine in script shebang".to_vec()),
    }
    let mut flags = Vec::new();
    for part in parts {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(err("Unknown lua shebang option", part));
        };
        for flag in list.split(|&c| c == b',') {
            if !FLAGS.contains(&flag) {
                return Err(err("Unexpected flag in script shebang", flag));
            }
            flags.push(flag);
        }
    }
    Ok(Some(flags))
}

/// The scripting state stores share: bodies of the scripts EVAL and SCRIPT LOAD have seen, by
/// SHA1, and the function libraries (FUNCTION LOAD). Cloning shares it.
#[derive(Clone, Default)]
pub struct ScriptCache(
    Arc<Mutex<CacheInner>>,
    Arc<Running>,
    crate::function::Functions,
);

/// Scripts running now, on any store sharing the cache, for SCRIPT KILL (or FUNCTION KILL).
#[derive(Default)]
pub(crate) struct Running {
    /// Scripts running.
    pub(crate) scripts: std::sync::atomic::AtomicUsize,
    /// Those of them that have not written yet (SCRIPT KILL may stop these).
    clean: std::sync::atomic::AtomicUsize,
    /// SCRIPT KILL calls so far: a clean script started before the latest one stops.
    kills: std::sync::atomic::AtomicU64,
}

impl Running {
    /// KILL: stops the running scripts that have not written. `Err` is Redis's reply when
    /// none can be stopped.
    pub(crate) fn kill(&self) -> Result<(), &'static [u8]> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.scripts.load(SeqCst) == 0 {
            return Err(b"NOTBUSY No scripts in execution right now.");
        }
        if self.clean.load(SeqCst) == 0 {
            return Err(b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        self.kills.fetch_add(1, SeqCst);
        Ok(())
    }

    /// Whether a script is running.
    pub(crate) fn busy(&self) -> bool {
        self.scripts.load(std::sync::atomic::Ordering::SeqCst) > 0
    }
}

#[derive(Default)]
struct CacheInner {
    bodies: HashMap<Sha, Arc<[u8]>>,
    /// SCRIPT FLUSH calls so far: a thread's compiled functions of an older count are stale.
    flushes: u64,
}

impl ScriptCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `body` (once) and returns its SHA1.
    pub fn insert(&self, body: &[u8]) -> Sha {
        let sha = sha1_hex(body);
        self.insert_as(sha, body);
        sha
    }

    /// [`ScriptCache::insert`] for a caller that has the SHA1 of `body` already.
    fn insert_as(&self, sha: Sha, body: &[u8]) {
        self.lock().bodies.entry(sha).or_insert_with(|| body.into());
    }

    /// The body of the script named `sha`.
    pub fn get(&self, sha: &Sha) -> Option<Arc<[u8]>> {
        self.lock().bodies.get(sha).cloned()
    }

    /// Whether a script named `sha` is loaded.
    pub fn contains(&self, sha: &Sha) -> bool {
        self.lock().bodies.contains_key(sha)
    }

    /// Number of scripts loaded (INFO `number_of_cached_scripts`).
    pub fn len(&self) -> usize {
        self.lock().bodies.len()
    }

    /// Bytes of the loaded scripts' bodies.
    pub fn body_bytes(&self) -> usize {
        self.lock().bodies.values().map(|b| b.len()).sum()
    }

    /// Whether no script is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SCRIPT KILL: stops the running scripts that have not written (from another thread
    /// than theirs: a script runs to its end on its own). `Err` is Redis's reply when none can
    /// be stopped.
    pub fn kill(&self) -> Result<(), &'static [u8]> {
        if !self.1.busy() && self.2.running().busy() {
            return Err(b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.");
        }
        self.1.kill()
    }

    /// Whether an EVAL script is running (on any store sharing the cache).
    pub(crate) fn eval_busy(&self) -> bool {
        self.1.busy()
    }

    /// The function libraries (FUNCTION LOAD, FCALL), shared as the scripts are.
    pub fn functions(&self) -> &crate::function::Functions {
        &self.2
    }

    /// SCRIPT FLUSH: forgets every script.
    pub fn flush(&self) {
        let mut c = self.lock();
        c.bodies.clear();
        c.flushes += 1;
    }

    fn flushes(&self) -> u64 {
        self.lock().flushes
    }
}

/// What a script's `redis.call` runs through: the host executes `args` (name first, as a
/// client would send them) and writes the reply in protocol `proto` (RESP2 unless the script
/// called `redis.setresp(3)`) into `out`, or returns the error text (without `-`) that refuses
/// it before it runs.
pub trait Caller {
    /// Runs one command for the script.
    fn call(
        &mut self,
        args: &[&[u8]],
        proto: crate::resp::Proto,
        out: &mut Vec<u8>,
    ) -> Result<(), Vec<u8>>;

    /// Whether the script's commands may run past `maxmemory` (a function's `allow-oom`
    /// flag); none may unless told.
    fn allow_oom(&mut self, _on: bool) {}

    /// Whether the ACL user of the script's caller may run this command: `Err` is the error
    /// the script gets (see [`crate::Db::acl_script_check`]). Everything passes unless told.
    fn permitted(
        &mut self,
        _spec: &crate::commands::CommandSpec,
        _args: &[&[u8]],
    ) -> Result<(), Vec<u8>> {
        Ok(())
    }
}

/// How a script ends: its reply is written to the writer given to [`run`].
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The script ran (its reply may still be an error it returned).
    Ran,
    /// No script of that SHA is loaded (EVALSHA).
    NoScript,
}

/// The body of a script, or the SHA1 of a loaded one.
pub enum Source<'a> {
    /// EVAL's body.
    Body(&'a [u8]),
    /// EVALSHA's digest (already checked to be one).
    Sha(Sha),
}

/// A thread's Lua state and what it compiled.
pub(crate) struct Engine {
    pub(crate) lua: Lua,
    /// The view scripts run in (read-only, errors on missing globals).
    pub(crate) env: Table,
    /// The real globals, where KEYS and ARGV are set before each run.
    pub(crate) globals: Table,
    /// The real `redis` table: `call` and `pcall` are set in it for the length of a run.
    redis: Table,
    /// `function(f, handler) return xpcall(f, handler) end`.
    runner: Function,
    /// `function(f, handler, keys, args)`: `f(keys, args)` under `xpcall` (functions).
    runner_args: Function,
    /// Redis's error handler: adds the source and line to an error.
    handler: Function,
    /// The prelude's helpers (`readonly`, `deny`), for a state that adds views of its own.
    pub(crate) api: Table,
    /// Compiled scripts by SHA1, in Lua: the host holds few Lua values itself (mlua keeps each
    /// on a stack of about 8000 slots; thousands of scripts would overflow it).
    compiled: Table,
    pub(crate) flushes_seen: u64,
}

/// Lua source of the environment; run once per state with the full libraries, it returns the
/// script view, the runner, the error handler and the table `redis.call` looks its entry point
/// up in.
const PRELUDE: &str = r#"
local G = _G
local getinfo = debug.getinfo
local raw_pcall, raw_error, raw_type, raw_tostring, rawget = pcall, error, type, tostring, rawget
local setmetatable, rawset = setmetatable, rawset
G.debug = nil
G.dofile = nil
G.loadfile = nil
G.print = nil
G.os = { clock = os.clock }

local api = ...
local redis = {}
redis.sha1hex = api.sha1hex
function redis.error_reply(e)
  if raw_type(e) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return api.error_reply(e)
end
function redis.status_reply(s)
  if raw_type(s) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = s }
end
function redis.log(level, ...) end
function redis.replicate_commands() return true end
function redis.set_repl(flags) end
function redis.breakpoint() return false end
function redis.debug(...) end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = '7.4.1'
redis.REDIS_VERSION_NUM = 0x070401
G.redis = redis

-- cjson (lua-cjson 2.1 as Redis builds it): encode here, decode in Rust.
local cjson = { null = api.null, decode = api.json_decode }
local format, floor, gsub, huge = string.format, math.floor, string.gsub, math.huge
local escapes = {
  ['\b'] = '\\b', ['\t'] = '\\t', ['\n'] = '\\n', ['\f'] = '\\f', ['\r'] = '\\r',
  ['"'] = '\\"', ['\\'] = '\\\\', ['/'] = '\\/', ['\127'] = '\\u007f',
}
for i = 0, 31 do
  local c = string.char(i)
  if not escapes[c] then escapes[c] = format('\\u%04x', i) end
end
local function fail(kind, why)
  raw_error('Cannot serialise ' .. kind .. ': ' .. why, 0)
end
-- The encoder's settings (lua-cjson's json_config_t), changed by cjson.encode_* below.
local cfg = { depth = 1000, invalid = 0, convert = false, ratio = 2, safe = 10, precision = 14,
  decode_depth = 1000, decode_invalid = true }
local function enc_number(n)
  if n ~= n or n == huge or n == -huge then
    if cfg.invalid == 0 then fail('number', 'must not be NaN or Inf') end
    if cfg.invalid == 2 then return 'null' end
    if n ~= n then return 'nan' end
  end
  return format('%.' .. cfg.precision .. 'g', n)
end
local function enc_string(s)
  return '"' .. (gsub(s, '[%c"\\/]', escapes)) .. '"'
end
local encode_value
local function enc_table(t, depth)
  if depth > cfg.depth then raw_error(format('Cannot serialise, excessive nesting (%d)', depth), 0) end
  local max, items, array = 0, 0, true
  for k in pairs(t) do
    if raw_type(k) == 'number' and k ~= 0 and floor(k) == k and k >= 1 then
      if k > max then max = k end
      items = items + 1
    else
      array = false
      break
    end
  end
  if array and cfg.ratio > 0 and max > items * cfg.ratio and max > cfg.safe then
    if not cfg.convert then fail('table', 'excessively sparse array') end
    array = false
  end
  local out = {}
  if array and max > 0 then
    for i = 1, max do out[i] = encode_value(t[i], depth) end
    return '[' .. table.concat(out, ',') .. ']'
  end
  for k, v in pairs(t) do
    local kt = raw_type(k)
    local key
    if kt == 'number' then key = '"' .. enc_number(k) .. '"'
    elseif kt == 'string' then key = enc_string(k)
    else fail(kt, 'table key must be a number or string') end
    out[#out + 1] = key .. ':' .. encode_value(v, depth)
  end
  return '{' .. table.concat(out, ',') .. '}'
end
encode_value = function(v, depth)
  local t = raw_type(v)
  if t == 'string' then return enc_string(v)
  elseif t == 'number' then return enc_number(v)
  elseif t == 'boolean' then return v and 'true' or 'false'
  elseif t == 'nil' then return 'null'
  elseif t == 'table' then return enc_table(v, depth + 1)
  elseif v == cjson.null then return 'null'
  end
  fail(t, 'type not supported')
end
-- lua-cjson's configuration functions: each sets what it is given and returns the setting.
local function int_option(name, arg, key, min, max, pos)
  if arg ~= nil then
    local v = arg
    if raw_type(v) == 'string' then v = tonumber(v) end
    if raw_type(v) ~= 'number' then
      raw_error(format("bad argument #%d to '%s' (number expected, got %s)",
        pos or 1, name, raw_type(arg)), 0)
    end
    v = v >= 0 and floor(v) or -floor(-v)
    if v < min or v > max then
      raw_error(format("bad argument #%d to '%s' (expected integer between %d and %d)",
        pos or 1, name, min, max), 0)
    end
    cfg[key] = v
  end
  return cfg[key]
end
-- An on/off setting: a boolean, or 'on' / 'off' (and 'null' where `null_ok`), as lua-cjson's
-- json_enum_option reads it; returned as a boolean ('null' as itself).
local function enum_option(name, arg, null_ok)
  if arg == nil then return nil end
  if arg == true or arg == 'on' then return 1 end
  if arg == false or arg == 'off' then return 0 end
  if null_ok and arg == 'null' then return 2 end
  raw_error(format("bad argument #1 to '%s' (invalid option '%s')", name, tostring(arg)), 0)
end
local function shown(v) if v == 2 then return 'null' end return v == 1 end
function cjson.encode_max_depth(n) return int_option('encode_max_depth', n, 'depth', 1, 2147483647) end
function cjson.decode_max_depth(n)
  return int_option('decode_max_depth', n, 'decode_depth', 1, 2147483647)
end
function cjson.encode_number_precision(n)
  return int_option('encode_number_precision', n, 'precision', 1, 14)
end
function cjson.encode_invalid_numbers(v)
  local o = enum_option('encode_invalid_numbers', v, true)
  if o ~= nil then cfg.invalid = o end
  return shown(cfg.invalid)
end
function cjson.decode_invalid_numbers(v)
  local o = enum_option('decode_invalid_numbers', v, false)
  if o ~= nil then cfg.decode_invalid = (o == 1) end
  return cfg.decode_invalid
end
function cjson.encode_sparse_array(convert, ratio, safe)
  local o = enum_option('encode_sparse_array', convert, false)
  if o ~= nil then cfg.convert = (o == 1) end
  if ratio ~= nil then int_option('encode_sparse_array', ratio, 'ratio', 0, 2147483647, 2) end
  if safe ~= nil then int_option('encode_sparse_array', safe, 'safe', 0, 2147483647, 3) end
  return cfg.convert, cfg.ratio, cfg.safe
end
-- Whether cjson keeps its buffer between calls: memory reuse only, nothing a script sees.
function cjson.encode_keep_buffer(keep) return keep end
api.cjson_cfg = cfg
api.encode_value = encode_value
api.cjson = cjson
G.cjson = cjson

-- bit (LuaBitOp), in Rust.
G.bit = api.bit

-- pcall as Redis 7 has it: an error table from redis.call comes back as its message.
local function pcall_result(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if raw_type(e) == 'userdata' then e = api.pcall_text(e) end
  if raw_type(e) == 'table' and raw_type(rawget(e, 'err')) == 'string' then
    e = rawget(e, 'err')
  end
  return false, e
end
G.pcall = function(f, ...) return pcall_result(raw_pcall(f, ...)) end

-- Read-only tables, as Redis's patched Lua has them: a script sees an empty proxy per table
-- whose reads go to the real one; every way to write through it fails.
local real_of = setmetatable({}, { __mode = 'k' })
local function deny() raw_error('Attempt to modify a readonly table', 2) end
local shown_mt = setmetatable({}, { __newindex = deny, __metatable = false })
local function readonly(t, index)
  local p = setmetatable({}, {
    __index = index or t,
    __newindex = deny,
    __metatable = shown_mt,
  })
  real_of[p] = t
  return p
end
for _, name in ipairs({ 'string', 'table', 'math', 'os', 'redis', 'coroutine', 'cjson', 'bit' }) do
  rawset(G, name, readonly(rawget(G, name)))
end

local env = readonly(G, function(_, k)
  local v = rawget(G, k)
  if v == nil then
    raw_error("Script attempted to access nonexistent global variable '" .. raw_tostring(k) .. "'", 2)
  end
  return v
end)
rawset(G, '_G', env)

-- The base functions that reach past a proxy: they see the real table to read it, and
-- refuse to write it.
local raw_next, raw_pairs, raw_setmetatable, raw_getfenv, raw_setfenv =
  next, pairs, setmetatable, getfenv, setfenv
local raw_loadstring, raw_load = loadstring, load
local function real(t) return real_of[t] or t end
rawset(G, 'next', function(t, k) return raw_next(real(t), k) end)
rawset(G, 'pairs', function(t) return raw_pairs(real(t)) end)
rawset(G, 'rawget', function(t, k) return rawget(real(t), k) end)
rawset(G, 'rawset', function(t, k, v)
  if real_of[t] then deny() end
  return rawset(t, k, v)
end)
rawset(G, 'setmetatable', function(t, mt)
  if real_of[t] then deny() end
  return raw_setmetatable(t, mt)
end)
rawset(G, 'getfenv', function(f)
  local e
  if raw_type(f) == 'number' then e = raw_getfenv(f == 0 and 0 or f + 1)
  elseif f == nil then e = raw_getfenv(2)
  else e = raw_getfenv(f) end
  if e == G then return env end
  return e
end)
rawset(G, 'setfenv', function(f, t)
  if raw_type(f) == 'number' then f = f == 0 and 0 or f + 1 end
  if f == 0 then deny() end
  return raw_setfenv(f, t)
end)
-- Code a script loads runs in the script's view; precompiled code is refused (as Redis's
-- Lua refuses it: bytecode can break the interpreter).
local function in_view(f, err)
  if f then raw_setfenv(f, env) end
  return f, err
end
rawset(G, 'loadstring', function(s, name)
  if raw_type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary code not allowed' end
  return in_view(raw_loadstring(s, name))
end)
rawset(G, 'load', function(f, name)
  local first = true
  local function reader()
    local piece = f()
    if first and raw_type(piece) == 'string' and piece ~= '' then
      first = false
      if piece:byte(1) == 27 then return nil end
    end
    return piece
  end
  return in_view(raw_load(reader, name))
end)

local function handler(err)
  -- The frame that raised: past C functions (error, a library call) and this file's wrappers.
  local level = 2
  local i = getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.source == '@kv_redis_api') do
    level = level + 1
    i = getinfo(level, 'nSl')
  end
  if raw_type(err) == 'userdata' then
    err = { err = api.error_text(err) }
  elseif raw_type(err) ~= 'table' then
    err = { err = 'ERR ' .. raw_tostring(err) }
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end

local function runner(f, h) return xpcall(f, h) end
api.runner_args = function(f, h, keys, args)
  return xpcall(function() return f(keys, args) end, h)
end
api.readonly = readonly
api.real_of = real_of
return env, runner, handler, api, redis
"#;

impl Engine {
    pub(crate) fn new() -> mlua::Result<Engine> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::DEBUG;
        // SAFETY: `debug` is the one unsafe library loaded; the prelude keeps only its
        // `getinfo` (in the error handler's upvalue) and removes it from the globals before
        // any script runs, so no script can reach it.
        let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::default()) };
        let globals = lua.globals();
        install_random(&lua, &globals)?;
        let api_sha = lua.create_function(|lua, args: MultiValue| {
            let text = match (args.len(), args.front()) {
                (1, Some(Lv::String(s))) => s.as_bytes().to_vec(),
                (1, Some(v @ (Lv::Integer(_) | Lv::Number(_)))) => v.to_string()?.into_bytes(),
                (1, _) => Vec::new(),
                _ => {
                    return Err(mlua::Error::external(ScriptError(
                        b"ERR wrong number of arguments".to_vec(),
                    )))
                }
            };
            lua.create_string(sha1_hex(&text))
        })?;
        let error_reply = lua.create_function(|lua, e: mlua::String| {
            let e = e.as_bytes();
            let mut text = Vec::with_capacity(e.len() + 1);
            if e.first() != Some(&b'-') {
                text.push(b'-');
            }
            text.extend_from_slice(&e);
            error_table(lua, &text)
        })?;
        let error_text = lua.create_function(|lua, e: Lv| {
            let text = match &e {
                Lv::Error(err) => script_error_text(err),
                other => other.to_string()?.into_bytes(),
            };
            lua.create_string(text)
        })?;
        // What pcall returns for a failed C function: a raised message as it is (lua-cjson's
        // and LuaBitOp's errors), a command's error reply as its text.
        let pcall_text = lua.create_function(|lua, e: Lv| {
            fn text(err: &mlua::Error) -> Vec<u8> {
                match err {
                    mlua::Error::RuntimeError(_) => lua_error_text(err).into_bytes(),
                    mlua::Error::CallbackError { cause, .. } => text(cause),
                    other => script_error_text(other),
                }
            }
            let t = match &e {
                Lv::Error(err) => text(err),
                other => other.to_string()?.into_bytes(),
            };
            lua.create_string(t)
        })?;
        let api = lua.create_table()?;
        api.set("pcall_text", pcall_text)?;
        api.set("sha1hex", api_sha)?;
        api.set("error_reply", error_reply)?;
        api.set("error_text", error_text)?;
        api.set(
            "null",
            Lv::LightUserData(mlua::LightUserData(std::ptr::null_mut())),
        )?;
        api.set("json_decode", lua.create_function(json_decode)?)?;
        api.set("bit", bit_library(&lua)?)?;
        let (env, runner, handler, api, redis): (Table, Function, Function, Table, Table) =
            lua.load(PRELUDE).set_name("@kv_redis_api").call(api)?;
        // cjson.encode is a C function in Redis: an error names the script's line, and a
        // script's `return cjson.encode(x)` keeps its frame. So is ours, around the encoder.
        let encode_value: Function = api.get("encode_value")?;
        let encode = lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(located(
                    lua,
                    "bad argument #1 to 'encode' (expected 1 argument)",
                ));
            }
            encode_value
                .call::<mlua::String>((args.front().cloned().unwrap_or(Lv::Nil), 0))
                .map_err(|e| located(lua, &lua_error_text(&e)))
        })?;
        let cjson: Table = api.get("cjson")?;
        lua.set_named_registry_value("kv_cjson_cfg", api.get::<Table>("cjson_cfg")?)?;
        cjson.raw_set("encode", encode)?;
        // The configuration functions are C functions too: their argument errors name the
        // script's line, and a tail call keeps the script's frame.
        for name in [
            "encode_max_depth",
            "decode_max_depth",
            "encode_number_precision",
            "encode_invalid_numbers",
            "decode_invalid_numbers",
            "encode_sparse_array",
        ] {
            let inner: Function = cjson.raw_get(name)?;
            let outer = lua.create_function(move |lua, args: MultiValue| {
                inner
                    .call::<MultiValue>(args)
                    .map_err(|e| located(lua, &lua_error_text(&e)))
            })?;
            cjson.raw_set(name, outer)?;
        }
        let runner_args: Function = api.get("runner_args")?;
        let compiled = lua.create_table()?;
        Ok(Engine {
            lua,
            env,
            globals,
            redis,
            runner,
            runner_args,
            handler,
            api,
            compiled,
            flushes_seen: 0,
        })
    }

    /// The compiled function of `body` (named `sha`), or the compile error's text.
    fn function(&mut self, sha: &Sha, body: &[u8]) -> Result<Function, Vec<u8>> {
        let key = self.lua.create_string(sha).map_err(internal)?;
        if let Ok(Some(f)) = self.compiled.raw_get::<Option<Function>>(&key) {
            return Ok(f);
        }
        shebang_flags(body)?;
        // A shebang line is skipped, its line feed kept (line numbers stay the user's).
        let code = match body.strip_prefix(b"#!") {
            Some(_) => &body[memchr::memchr(b'\n', body).unwrap_or(body.len())..],
            None => body,
        };
        let f = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let mut m = b"ERR Error compiling script (new function): ".to_vec();
                m.extend_from_slice(lua_error_text(&e).as_bytes());
                m
            })?;
        self.compiled.raw_set(key, f.clone()).map_err(internal)?;
        Ok(f)
    }
}

/// An error raised by a library function, with the position of the script line that called
/// it in front, as `luaL_error` writes it.
fn located(lua: &Lua, msg: &str) -> mlua::Error {
    let at = lua
        .inspect_stack(1, |d| {
            let line = d.current_line().unwrap_or(0);
            let src = d.source().short_src.map(|s| s.into_owned());
            match src {
                Some(src) if line > 0 => format!("{src}:{line}: "),
                _ => String::new(),
            }
        })
        .unwrap_or_default();
    mlua::Error::RuntimeError(format!("{at}{msg}"))
}

/// `cjson.decode`: JSON text to Lua values (`null` is `cjson.null`); nesting past
/// `cjson.decode_max_depth` is lua-cjson's error.
fn json_decode(lua: &Lua, text: mlua::String) -> mlua::Result<Lv> {
    let max = lua
        .named_registry_value::<Table>("kv_cjson_cfg")
        .and_then(|cfg| cfg.raw_get::<i64>("decode_depth"))
        .unwrap_or(1000);
    if let Some((depth, at)) = too_deep(&text.as_bytes(), max) {
        return Err(located(
            lua,
            &format!("Found too many nested data structures ({depth}) at character {at}"),
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&text.as_bytes())
        .map_err(|e| located(lua, &format!("Expected value but found invalid token: {e}")))?;
    json_to_lua(lua, &v)
}

/// Where JSON text first nests deeper than `max` (outside strings): the depth and the
/// 1-based character of the bracket that opened it.
fn too_deep(text: &[u8], max: i64) -> Option<(i64, usize)> {
    let (mut depth, mut in_str, mut escaped) = (0i64, false, false);
    for (i, &c) in text.iter().enumerate() {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some((depth, i + 1));
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn json_to_lua(lua: &Lua, v: &serde_json::Value) -> mlua::Result<Lv> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => Lv::LightUserData(mlua::LightUserData(std::ptr::null_mut())),
        J::Bool(b) => Lv::Boolean(*b),
        J::Number(n) => Lv::Number(n.as_f64().unwrap_or(f64::NAN)),
        J::String(s) => Lv::String(lua.create_string(s)?),
        J::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, item)?)?;
            }
            Lv::Table(t)
        }
        J::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, item) in map {
                t.raw_set(lua.create_string(k)?, json_to_lua(lua, item)?)?;
            }
            Lv::Table(t)
        }
    })
}

/// LuaBitOp's `bit` library: numbers as 32-bit integers (rounded, wrapped), results signed.
fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    fn tobit(lua: &Lua, name: &str, n: usize, v: &Lv) -> mlua::Result<i32> {
        let x = match v {
            Lv::Integer(i) => *i as f64,
            Lv::Number(f) => *f,
            Lv::String(s) => s
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .ok_or_else(|| bad_arg(lua, name, n, v))?,
            _ => return Err(bad_arg(lua, name, n, v)),
        };
        // LuaBitOp adds 2^52 + 2^51 and keeps the low 32 bits: round half to even, wrap.
        Ok((x + 6_755_399_441_055_744.0).to_bits() as u32 as i32)
    }
    fn bad_arg(lua: &Lua, name: &str, n: usize, v: &Lv) -> mlua::Error {
        let got = if v.is_nil() {
            "no value"
        } else {
            v.type_name()
        };
        located(
            lua,
            &format!("bad argument #{n} to '{name}' (number expected, got {got})"),
        )
    }
    fn arg(args: &MultiValue, i: usize) -> Lv {
        args.get(i).cloned().unwrap_or(Lv::Nil)
    }
    let t = lua.create_table()?;
    type Unary = (&'static str, fn(i32) -> i32);
    type Binary = (&'static str, fn(i32, i32) -> i32);
    type Shift = (&'static str, fn(i32, u32) -> i32);
    let unary: [Unary; 3] = [
        ("tobit", |x| x),
        ("bnot", |x| !x),
        ("bswap", |x| x.swap_bytes()),
    ];
    for (name, f) in unary {
        t.set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                Ok(f64::from(f(tobit(lua, name, 1, &arg(&args, 0))?)))
            })?,
        )?;
    }
    let fold: [Binary; 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, f) in fold {
        t.set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let mut acc = tobit(lua, name, 1, &arg(&args, 0))?;
                for i in 1..args.len() {
                    acc = f(acc, tobit(lua, name, i + 1, &arg(&args, i))?);
                }
                Ok(f64::from(acc))
            })?,
        )?;
    }
    let shifts: [Shift; 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let x = tobit(lua, name, 1, &arg(&args, 0))?;
                let n = tobit(lua, name, 2, &arg(&args, 1))? as u32 & 31;
                Ok(f64::from(f(x, n)))
            })?,
        )?;
    }
    t.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let x = tobit(lua, "tohex", 1, &arg(&args, 0))? as u32;
            let n = match arg(&args, 1) {
                Lv::Nil => 8,
                other => tobit(lua, "tohex", 2, &other)?,
            };
            let upper = n < 0;
            let n = n.unsigned_abs().min(8) as usize;
            let hex = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            lua.create_string(&hex[8 - n..])
        })?,
    )?;
    Ok(t)
}

/// The message of a Lua error as Lua wrote it (mlua adds context around some kinds).
pub(crate) fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        // mlua appends a traceback to an error coming out of Lua code; Redis shows none.
        mlua::Error::RuntimeError(m) => m
            .split_once("\nstack traceback:")
            .map_or(m.as_str(), |(head, _)| head)
            .to_string(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// `math.random` and `math.randomseed` on Redis's generator: the 48-bit linear congruential
/// generator of `lrand48` (multiplier 0x5DEECE66D, increment 0xB), whose state starts at
/// 0x1234ABCD330E; a seed `s` sets it to `s << 16 | 0x330E`.
fn install_random(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    const MASK: u64 = (1 << 48) - 1;
    let state = Rc::new(RefCell::new(0x1234_ABCD_330E_u64));
    let draw = {
        let state = state.clone();
        move || {
            let mut x = state.borrow_mut();
            *x = (x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & MASK;
            (*x >> 17) as i64
        }
    };
    let random = lua.create_function(move |lua, args: MultiValue| {
        const MAX: i64 = i32::MAX as i64;
        let r = (draw() % MAX) as f64 / MAX as f64;
        let int_arg = |v: Option<&Lv>, n: usize| -> mlua::Result<i64> {
            let number = match v {
                Some(Lv::Integer(i)) => Some(*i as f64),
                Some(Lv::Number(f)) => Some(*f),
                Some(Lv::String(s)) => s.to_str().ok().and_then(|s| s.trim().parse().ok()),
                _ => None,
            };
            number.map(|f| f as i64).ok_or_else(|| {
                let got = v.filter(|v| !v.is_nil()).map_or("no value", Lv::type_name);
                located(
                    lua,
                    &format!("bad argument #{n} to 'random' (number expected, got {got})"),
                )
            })
        };
        let empty = |n: usize| {
            located(
                lua,
                &format!("bad argument #{n} to 'random' (interval is empty)"),
            )
        };
        match args.len() {
            0 => Ok(r),
            1 => {
                let u = int_arg(args.front(), 1)?;
                if u < 1 {
                    return Err(empty(1));
                }
                Ok((r * u as f64).floor() + 1.0)
            }
            2 => {
                let l = int_arg(args.front(), 1)?;
                let u = int_arg(args.get(1), 2)?;
                if l > u {
                    return Err(empty(2));
                }
                Ok((r * (u - l + 1) as f64).floor() + l as f64)
            }
            _ => Err(located(lua, "wrong number of arguments")),
        }
    })?;
    let randomseed = lua.create_function(move |_, seed: f64| {
        let s = seed as i32 as u32 as u64;
        *state.borrow_mut() = (s << 16) | 0x330E;
        Ok(())
    })?;
    let math: Table = globals.get("math")?;
    math.set("random", random)?;
    math.set("randomseed", randomseed)?;
    Ok(())
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's Lua state (made on first use), forgetting what it compiled if
/// `cache` was flushed since.
fn with_engine<R>(
    cache: &ScriptCache,
    f: impl FnOnce(&mut Engine) -> Result<R, Vec<u8>>,
) -> Result<R, Vec<u8>> {
    ENGINE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err(b"ERR scripts cannot be run or loaded from a script".to_vec());
        };
        // SCRIPT FLUSH resets the Lua state, as in Redis (its memory goes with it).
        let flushes = cache.flushes();
        if slot.as_ref().is_some_and(|e| e.flushes_seen != flushes) {
            *slot = None;
        }
        if slot.is_none() {
            let mut engine = Engine::new().map_err(internal)?;
            engine.flushes_seen = flushes;
            engine.lua.gc_collect().map_err(internal)?;
            *slot = Some(engine);
        }
        let Some(engine) = slot.as_mut() else {
            return Err(b"ERR the Lua environment is not available".to_vec());
        };
        f(engine)
    })
}

/// Bytes this thread's Lua state holds (0 before its first script). A state SCRIPT FLUSH
/// made stale is dropped here rather than at its next script.
pub fn lua_memory(cache: &ScriptCache) -> usize {
    // (Inside a script the state is in use: INFO from a script leaves it out.)
    ENGINE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return 0;
        };
        if slot
            .as_ref()
            .is_some_and(|e| e.flushes_seen != cache.flushes())
        {
            *slot = None;
        }
        slot.as_ref().map_or(0, |e| e.lua.used_memory())
    })
}

/// SCRIPT LOAD: compiles `body` (reporting a syntax error as EVAL would) and keeps it.
pub fn load(cache: &ScriptCache, body: &[u8]) -> Result<Sha, Vec<u8>> {
    let sha = sha1_hex(body);
    with_engine(cache, |e| e.function(&sha, body))?;
    cache.insert_as(sha, body);
    Ok(sha)
}

/// Runs a script: `keys` and `argv` become KEYS and ARGV, `caller` runs its commands, and
/// the reply goes to `w`. `read_only` (EVAL_RO, EVALSHA_RO) refuses the commands that write.
pub fn run(
    cache: &ScriptCache,
    source: Source<'_>,
    keys: &[&[u8]],
    argv: &[&[u8]],
    read_only: bool,
    caller: &mut dyn Caller,
    w: &mut ReplyWriter<'_>,
) -> Outcome {
    let stored: Arc<[u8]>;
    let (sha, body_bytes): (Sha, &[u8]) = match &source {
        Source::Body(b) => (sha1_hex(b), b),
        Source::Sha(sha) => match cache.get(sha) {
            Some(b) => {
                stored = b;
                (*sha, &stored)
            }
            None => return Outcome::NoScript,
        },
    };
    let result = with_engine(cache, |e| -> Result<(), Vec<u8>> {
        let f = e.function(&sha, body_bytes)?;
        let run = Run {
            keys,
            argv,
            as_args: false,
            label: &sha,
            eval: true,
            read_only,
            running: &cache.1,
        };
        run_in(e, &f, run, caller, w)
    });
    if let Err(e) = result {
        w.error(&e);
    }
    if matches!(source, Source::Body(_)) {
        cache.insert_as(sha, body_bytes);
    }
    Outcome::Ran
}

/// One run of compiled code: what it gets and how its errors are labelled.
pub(crate) struct Run<'a> {
    /// Its keys.
    pub(crate) keys: &'a [&'a [u8]],
    /// Its other arguments.
    pub(crate) argv: &'a [&'a [u8]],
    /// Keys and arguments as the function's two arguments (FCALL), not KEYS and ARGV.
    pub(crate) as_args: bool,
    /// What errors name: the script's SHA1, or the function's name.
    pub(crate) label: &'a [u8],
    /// An EVAL script (a run-time error that is no table says `f_<sha>`).
    pub(crate) eval: bool,
    /// Commands that write are refused.
    pub(crate) read_only: bool,
    /// The running count SCRIPT KILL (or FUNCTION KILL) looks at.
    pub(crate) running: &'a Arc<Running>,
}

/// Runs `f` on engine `e`: `caller` runs its commands, the reply goes to `w`; `Err` is an
/// error of the engine itself (the script's own errors are replies).
pub(crate) fn run_in(
    e: &mut Engine,
    f: &Function,
    r: Run<'_>,
    caller: &mut dyn Caller,
    w: &mut ReplyWriter<'_>,
) -> Result<(), Vec<u8>> {
    let Run {
        keys,
        argv,
        as_args,
        label,
        eval,
        read_only,
        running,
    } = r;
    if !as_args {
        set_array(&e.lua, &e.globals, "KEYS", keys).map_err(internal)?;
        set_array(&e.lua, &e.globals, "ARGV", argv).map_err(internal)?;
    }
    let caller = RefCell::new(caller);
    let run = RunGuard::start(running);
    let wrote = run.wrote.clone();
    let (running, since) = (running.clone(), run.since);
    // Every 100k instructions: stop if a KILL came after the start and nothing was
    // written (and on every later check, so a pcall cannot swallow it).
    e.lua
        .set_hook(
            mlua::HookTriggers::new().every_nth_instruction(100_000),
            move |_, _| {
                use std::sync::atomic::Ordering::SeqCst;
                if !wrote.get() && running.kills.load(SeqCst) != since {
                    return Err(mlua::Error::external(ScriptError(KILLED.to_vec())));
                }
                Ok(mlua::VmState::Continue)
            },
        )
        .map_err(internal)?;
    let ran = e.lua.scope(|scope| {
        let call = scope.create_function(|lua, args: MultiValue| {
            let (v, failed) = call_command(lua, *caller.borrow_mut(), read_only, true, args, &run)?;
            match (failed, v) {
                (true, Lv::Table(t)) => {
                    let text: mlua::String = t.raw_get("err")?;
                    Err(mlua::Error::external(ScriptError(text.as_bytes().to_vec())))
                }
                (_, v) => Ok(v),
            }
        })?;
        let pcall = scope.create_function(|lua, args: MultiValue| {
            Ok(call_command(lua, *caller.borrow_mut(), read_only, false, args, &run)?.0)
        })?;
        let setresp = scope.create_function(|_, args: MultiValue| {
            let fail = |m: &[u8]| Err(mlua::Error::external(ScriptError(m.to_vec())));
            if args.len() != 1 {
                return fail(b"ERR redis.setresp() requires one argument.");
            }
            let n = match args.front() {
                Some(Lv::Integer(i)) => *i as f64,
                Some(Lv::Number(n)) => *n,
                Some(Lv::String(s)) => s
                    .to_str()
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0.0),
                _ => 0.0,
            };
            match n as i64 {
                2 => run.resp3.set(false),
                3 => run.resp3.set(true),
                _ => return fail(b"ERR RESP version must be 2 or 3."),
            }
            Ok(())
        })?;
        e.redis.raw_set("call", call)?;
        e.redis.raw_set("pcall", pcall)?;
        e.redis.raw_set("setresp", setresp)?;
        let (ok, value): (bool, Lv) = if as_args {
            let k = e.lua.create_sequence_from(
                keys.iter()
                    .map(|k| e.lua.create_string(k))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?;
            let a = e.lua.create_sequence_from(
                argv.iter()
                    .map(|k| e.lua.create_string(k))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?;
            e.runner_args.call((f.clone(), e.handler.clone(), k, a))?
        } else {
            e.runner.call((f.clone(), e.handler.clone()))?
        };
        e.redis.raw_set("call", Lv::Nil)?;
        e.redis.raw_set("pcall", Lv::Nil)?;
        e.redis.raw_set("setresp", Lv::Nil)?;
        if ok {
            write_value(w, &value, 0, run.resp3.get());
        } else {
            write_error(w, &value, label, eval);
        }
        Ok(())
    });
    e.lua.remove_hook();
    // A collection step every 50 scripts, as Redis's evalGenericCommand: the garbage of many
    // short scripts does not pile up until Lua's own cycle (nor does one full cycle stall).
    RUNS.with(|n| {
        n.set(n.get() + 1);
        if n.get() >= 50 {
            n.set(0);
            let _ = e.lua.gc_step_kbytes(50);
        }
    });
    ran.map_err(internal)
}

thread_local! {
    /// Scripts run on this thread since the last collection step.
    static RUNS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One script's entry in [`Running`], left when dropped.
pub(crate) struct RunGuard {
    running: Arc<Running>,
    /// The SCRIPT KILL count when the script started.
    since: u64,
    /// Whether a command of the script wrote (it can no longer be killed).
    wrote: Rc<std::cell::Cell<bool>>,
    /// `redis.setresp(3)` was called: commands reply in RESP3, and the return value's booleans
    /// are booleans.
    resp3: std::cell::Cell<bool>,
}

impl RunGuard {
    fn start(running: &Arc<Running>) -> RunGuard {
        use std::sync::atomic::Ordering::SeqCst;
        running.scripts.fetch_add(1, SeqCst);
        running.clean.fetch_add(1, SeqCst);
        RunGuard {
            running: running.clone(),
            since: running.kills.load(SeqCst),
            wrote: Rc::new(std::cell::Cell::new(false)),
            resp3: std::cell::Cell::new(false),
        }
    }

    /// Whether SCRIPT KILL came after the script started.
    fn kill_requested(&self) -> bool {
        self.running.kills.load(std::sync::atomic::Ordering::SeqCst) != self.since
    }

    /// A command of the script is about to write.
    fn writes(&self) {
        if !self.wrote.replace(true) {
            self.running
                .clean
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.running.scripts.fetch_sub(1, SeqCst);
        if !self.wrote.get() {
            self.running.clean.fetch_sub(1, SeqCst);
        }
    }
}

/// What a script stopped by SCRIPT KILL raises.
const KILLED: &[u8] = b"ERR Script killed by user with SCRIPT KILL...";

/// An error reply `redis.call` raises: the text of the `err` field of Redis's error table.
#[derive(Debug)]
pub(crate) struct ScriptError(pub(crate) Vec<u8>);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for ScriptError {}

/// The text of an error a Rust function raised into Lua: a [`ScriptError`]'s own, else the
/// error's message with ERR before it.
pub(crate) fn script_error_text(e: &mlua::Error) -> Vec<u8> {
    match e {
        mlua::Error::ExternalError(inner) => match inner.downcast_ref::<ScriptError>() {
            Some(s) => s.0.clone(),
            None => format!("ERR {inner}").into_bytes(),
        },
        mlua::Error::CallbackError { cause, .. } => script_error_text(cause),
        other => format!("ERR {}", lua_error_text(other)).into_bytes(),
    }
}

pub(crate) fn internal(e: mlua::Error) -> Vec<u8> {
    let mut m = b"ERR Error running script: ".to_vec();
    m.extend_from_slice(one_line(lua_error_text(&e).as_bytes()).as_slice());
    m
}

/// `text` with CR and LF turned into spaces (a reply line may hold neither).
pub(crate) fn one_line(text: &[u8]) -> Vec<u8> {
    text.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

fn set_array(lua: &Lua, globals: &Table, name: &str, items: &[&[u8]]) -> mlua::Result<()> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    globals.raw_set(name, t)
}

/// `{err = ...}` from an error reply's text (`-CODE message` or a bare message, which gets
/// ERR), as Redis builds the error tables scripts see.
fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let (code, msg): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match memchr::memchr(b' ', rest) {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let msg = trim_crlf(msg);
    let mut full = Vec::with_capacity(code.len() + 1 + msg.len());
    full.extend_from_slice(code);
    full.push(b' ');
    full.extend_from_slice(msg);
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(&full)?)?;
    Ok(t)
}

fn trim_crlf(mut s: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// A number as a command argument: an integer when it is one, else the shortest text that
/// reads back as the same double.
fn number_arg(n: f64) -> Vec<u8> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if n.fract() == 0.0 && (-TWO_63..TWO_63).contains(&n) {
        return itoa::Buffer::new().format(n as i64).as_bytes().to_vec();
    }
    let mut b = ryu::Buffer::new();
    let s = b.format(n);
    // Redis writes exponents with a sign (1e+21); ryu writes 1e21.
    match s.split_once('e') {
        Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}").into_bytes(),
        _ => s.as_bytes().to_vec(),
    }
}

/// `redis.call` / `redis.pcall`: returns the reply as a Lua value and whether it is an error
/// that `redis.call` raises.
fn call_command(
    lua: &Lua,
    caller: &mut dyn Caller,
    read_only: bool,
    raise: bool,
    args: MultiValue,
    run: &RunGuard,
) -> mlua::Result<(Lv, bool)> {
    let fail = |text: &[u8]| -> mlua::Result<(Lv, bool)> {
        Ok((Lv::Table(error_table(lua, text)?), raise))
    };
    if args.is_empty() {
        return fail(b"Please specify at least one argument for this redis lib call");
    }
    let mut owned: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    for a in args.iter() {
        match a {
            Lv::String(s) => owned.push(s.as_bytes().to_vec()),
            Lv::Integer(i) => owned.push(itoa::Buffer::new().format(*i).as_bytes().to_vec()),
            Lv::Number(n) => owned.push(number_arg(*n)),
            _ => return fail(b"Lua redis lib command arguments must be strings or integers"),
        }
    }
    let argv: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let Some(spec) = crate::commands::lookup(argv[0]) else {
        return fail(b"Unknown Redis command called from script");
    };
    if !spec.arity_ok(argv.len()) {
        return fail(b"Wrong number of args calling Redis command from script");
    }
    if spec.has(crate::commands::flags::NOSCRIPT)
        || crate::commands::scripting_noscript_subcommand(&argv)
    {
        return fail(b"This Redis command is not allowed from script");
    }
    if let Err(refused) = caller.permitted(spec, &argv) {
        return fail(&refused);
    }
    if read_only && spec.has(crate::commands::flags::WRITE) {
        return fail(b"Write commands are not allowed from read-only scripts.");
    }
    if spec.has(crate::commands::flags::WRITE) {
        // A SCRIPT KILL answered OK while the script was clean: it stops here, before its
        // first write, rather than becoming unkillable.
        if !run.wrote.get() && run.kill_requested() {
            return Err(mlua::Error::external(ScriptError(KILLED.to_vec())));
        }
        run.writes();
    }
    let mut out = Vec::new();
    let resp3 = run.resp3.get();
    let proto = if resp3 {
        crate::resp::Proto::Resp3
    } else {
        crate::resp::Proto::Resp2
    };
    if let Err(refused) = caller.call(&argv, proto, &mut out) {
        return fail(&refused);
    }
    let reply = match parse_reply(&out) {
        Ok(Some((v, _))) => v,
        _ => return fail(b"-ERR the command gave no reply the script can read"),
    };
    let failed = matches!(reply, Value::Error(_));
    Ok((to_lua(lua, reply, resp3)?, raise && failed))
}

/// A reply as a script sees it: RESP2's nulls are `false`, RESP3's `nil`; RESP3's map, set,
/// double, big number and verbatim string are tables with one field naming the type.
fn to_lua(lua: &Lua, v: Value, resp3: bool) -> mlua::Result<Lv> {
    let tagged = |tag: &str, v: Lv| -> mlua::Result<Lv> {
        let t = lua.create_table()?;
        t.raw_set(tag, v)?;
        Ok(Lv::Table(t))
    };
    Ok(match v {
        Value::Int(i) => Lv::Number(i as f64),
        Value::Bulk(b) => Lv::String(lua.create_string(&b)?),
        Value::Null | Value::NullArray if resp3 => Lv::Nil,
        Value::Null | Value::NullArray => Lv::Boolean(false),
        Value::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(&s)?)?;
            Lv::Table(t)
        }
        Value::Error(e) => {
            let mut text = Vec::with_capacity(e.len() + 1);
            text.push(b'-');
            text.extend_from_slice(&e);
            Lv::Table(error_table(lua, &text)?)
        }
        Value::Array(items) | Value::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item, resp3)?)?;
            }
            Lv::Table(t)
        }
        Value::Set(items) => {
            let t = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                t.raw_set(to_lua(lua, item, resp3)?, true)?;
            }
            tagged("set", Lv::Table(t))?
        }
        Value::Map(pairs) => {
            let t = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                t.raw_set(to_lua(lua, k, resp3)?, to_lua(lua, v, resp3)?)?;
            }
            tagged("map", Lv::Table(t))?
        }
        Value::Double(d) => tagged("double", Lv::Number(d))?,
        Value::Bool(b) => Lv::Boolean(b),
        Value::BigNumber(digits) => tagged("big_number", Lv::String(lua.create_string(&digits)?))?,
        Value::Verbatim { format, text } => {
            let v = lua.create_table()?;
            v.raw_set("format", lua.create_string(format)?)?;
            v.raw_set("string", lua.create_string(&text)?)?;
            tagged("verbatim_string", Lv::Table(v))?
        }
    })
}

/// How deep a returned table may nest before the rest is cut (Lua's own C stack bounds
/// Redis's recursion; a self-referencing table would otherwise never end). Redis reaches 7995
/// arrays (2665 maps) before "reached lua stack limit"; we stop at 1000: every level holds
/// references in mlua's auxiliary stack, which has room for about 8000.
const MAX_DEPTH: usize = 1000;

/// A script's return value, by Redis's rules (`resp3`: the script called `redis.setresp(3)`,
/// and its booleans are sent as booleans).
fn write_value(w: &mut ReplyWriter<'_>, v: &Lv, depth: usize, resp3: bool) {
    match v {
        Lv::String(s) => w.bulk(&s.as_bytes()),
        Lv::Boolean(b) if resp3 => w.bool(*b),
        Lv::Boolean(true) => w.int(1),
        Lv::Integer(i) => w.int(*i),
        Lv::Number(n) => w.int(truncate(*n)),
        Lv::Table(t) => {
            if let Ok(Lv::String(e)) = t.raw_get::<Lv>("err") {
                // As Redis: written after its `-` as it is (a leading `-` of its own stays).
                return w.error(&one_line(&e.as_bytes()));
            }
            if let Ok(Lv::String(s)) = t.raw_get::<Lv>("ok") {
                return w.simple(&one_line(&s.as_bytes()));
            }
            match t.raw_get::<Lv>("double") {
                Ok(Lv::Number(d)) => return w.double(d),
                Ok(Lv::Integer(d)) => return w.double(d as f64),
                _ => {}
            }
            if let Ok(Lv::String(s)) = t.raw_get::<Lv>("big_number") {
                return w.big_number(&one_line(&s.as_bytes()));
            }
            if let Ok(Lv::Table(v)) = t.raw_get::<Lv>("verbatim_string") {
                if let (Ok(Lv::String(f)), Ok(Lv::String(text))) =
                    (v.raw_get::<Lv>("format"), v.raw_get::<Lv>("string"))
                {
                    if let Ok(format) = <[u8; 3]>::try_from(&f.as_bytes()[..]) {
                        return w.verbatim(&format, &text.as_bytes());
                    }
                }
            }
            if depth < MAX_DEPTH {
                if let Ok(Lv::Table(m)) = t.raw_get::<Lv>("map") {
                    let pairs: Vec<(Lv, Lv)> = m.pairs::<Lv, Lv>().filter_map(Result::ok).collect();
                    w.map_len(pairs.len());
                    for (k, v) in &pairs {
                        write_value(w, k, depth + 1, resp3);
                        write_value(w, v, depth + 1, resp3);
                    }
                    return;
                }
                if let Ok(Lv::Table(m)) = t.raw_get::<Lv>("set") {
                    let members: Vec<Lv> = m
                        .pairs::<Lv, Lv>()
                        .filter_map(Result::ok)
                        .map(|(k, _)| k)
                        .collect();
                    w.set_len(members.len());
                    for k in &members {
                        write_value(w, k, depth + 1, resp3);
                    }
                    return;
                }
            }
            if depth >= MAX_DEPTH {
                return w.error(b"ERR reached lua stack limit");
            }
            let mut items = Vec::new();
            let mut i = 1;
            while let Ok(item) = t.raw_get::<Lv>(i) {
                if item.is_nil() {
                    break;
                }
                items.push(item);
                i += 1;
            }
            w.array_len(items.len());
            for item in &items {
                write_value(w, item, depth + 1, resp3);
            }
        }
        _ => w.null(),
    }
}

/// C's `(long long)` of a double: toward zero, saturated (NaN is the minimum, as on x86).
fn truncate(n: f64) -> i64 {
    if n.is_nan() {
        i64::MIN
    } else {
        n as i64
    }
}

/// A failed run's reply: the error table's message with where it happened.
fn write_error(w: &mut ReplyWriter<'_>, err: &Lv, label: &[u8], eval: bool) {
    let Lv::Table(t) = err else {
        let text = match err {
            Lv::String(s) => s.to_string_lossy(),
            _ => "execution failure".to_string(),
        };
        let mut m = b"ERR Error running script ".to_vec();
        if eval {
            m.extend_from_slice(b"f_");
        }
        m.extend_from_slice(label);
        m.extend_from_slice(b", ");
        m.extend_from_slice(one_line(&text.as_bytes()[..text.len().min(100)]).as_slice());
        return w.error(&m);
    };
    let field = |name: &str| -> Option<Vec<u8>> {
        match t.raw_get::<Lv>(name).ok()? {
            Lv::String(s) => Some(s.as_bytes().to_vec()),
            Lv::Integer(i) => Some(i.to_string().into_bytes()),
            Lv::Number(n) => Some(number_arg(n)),
            _ => None,
        }
    };
    let mut m = field("err").unwrap_or_default();
    if let (Some(source), Some(line)) = (field("source"), field("line")) {
        m.extend_from_slice(b" script: ");
        m.extend_from_slice(label);
        m.extend_from_slice(b", on ");
        m.extend_from_slice(&source);
        m.push(b':');
        m.extend_from_slice(&line);
        m.push(b'.');
    }
    w.error(&one_line(&m));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha_of_empty_is_sha1s() {
        assert_eq!(&sha1_hex(b""), b"da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            parse_sha(b"DA39A3EE5E6B4B0D3255BFEF95601890AFD80709"),
            Some(sha1_hex(b""))
        );
        assert_eq!(parse_sha(b"xyz"), None);
    }

    #[test]
    fn numbers_as_arguments_read_back() {
        assert_eq!(number_arg(3.0), b"3");
        assert_eq!(number_arg(-0.5), b"-0.5");
        assert_eq!(number_arg(1e21), b"1e+21");
        for n in [0.1, 1.5e-7, 123.456, -1e300, 2f64.powi(70)] {
            let back: f64 = std::str::from_utf8(&number_arg(n))
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(back, n);
        }
    }
}
