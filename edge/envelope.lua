-- Persona Service edge hooks (JSON/HTTP only; native gRPC passes untouched).
--
-- Errors: the gRPC server puts the HTTP status and the rendered error body in
-- metadata (`x-http-status`, `x-error-body`, and `x-error-content-type` when
-- the RPC's error shape is not JSON); this hook turns them into the HTTP
-- response. gRPC errors without that metadata (a crash, Envoy's own upstream
-- failures) are mapped from the gRPC code, never leaking internals.
-- Success: the server may set the status (`x-persona-status`) and any header
-- (`x-persona-set-<name>`); they are applied here without per-path tables.
-- 3xx, 204 and 304 answers and every HEAD answer go out without a body.

local CARRIERS = { ["x-http-status"] = true, ["x-error-body"] = true, ["x-error-content-type"] = true,
                   ["x-error-code"] = true, ["x-persona-status"] = true, ["x-persona-log"] = true }
local SET_PREFIX = "x-persona-set-"
-- Marks a request as coming through the JSON edge, so the server sends the
-- envelope carriers (and native gRPC callers get only their status details).
local EDGE_MARK = "x-persona-edge"

-- gRPC code -> HTTP status and envelope code, for errors the server did not render.
local FALLBACK = {
  ["1"]  = { 499, "bad_request", "The request was cancelled." },
  ["3"]  = { 400, "bad_request", "The request is malformed." },
  ["5"]  = { 404, "not_found", "The resource does not exist." },
  ["7"]  = { 403, "forbidden", "The credential is not allowed to do this." },
  ["8"]  = { 429, "rate_limited", "Too many requests." },
  ["12"] = { 404, "not_found", "The requested operation does not exist." },
  ["14"] = { 503, "service_unavailable", "The service is temporarily unavailable." },
  ["16"] = { 401, "unauthorized", "A valid bearer credential is required." },
}
local INTERNAL = { 500, "internal_error", "An unexpected error occurred." }
-- How a body that is not JSON is refused (the transcoder's reasons are reworded to it).
local INVALID_JSON = "The body is not valid JSON: "
-- The request messages' fields, for answers in JSON names: the edge appends
-- the real table (process/edge.py lua_source); empty, answers use
-- the transcoder's names turned into JSON's default (lowerCamel) ones.
JSON_FIELDS = JSON_FIELDS or { bindings = {}, messages = {} }

local function envelope(code, message)
  return string.format('{"error":{"code":"%s","message":"%s","details":{}}}', code, message)
end

local function is_grpc(content_type)
  if content_type == nil or string.sub(content_type, 1, 16) ~= "application/grpc" then return false end
  local rest = string.sub(content_type, 17, 17)
  return rest == "" or rest == "+" or rest == ";"
end

local function is_grpc_web(content_type)
  return content_type ~= nil and string.sub(content_type, 1, 20) == "application/grpc-web"
end

local function get(headers, name)
  local value = headers:get(name)
  return value
end

-- A client's X-Request-Id is kept when it is sane (the server's rule: 1 to
-- 128 of letters, digits and `._:@/+=-`); otherwise the request gets a fresh
-- uuid4, the format Envoy and the server make, so the access log, the answer
-- and the server's logs name the request alike.
local function sane_request_id(id)
  return id ~= nil and #id >= 1 and #id <= 128 and string.match(id, "^[%w%._:@/%+=%-]+$") ~= nil
end

-- A path for the log: the query keeps its parameter names, not their values
-- (a signed URL's signature, a SCIM filter's e-mail address, a cursor).
local function loggable_path(path)
  local base, query = string.match(path, "^([^?]*)%??(.*)$")
  if query == "" then return base end
  local names = {}
  for param in string.gmatch(query, "[^&]+") do table.insert(names, (string.match(param, "^[^=]*"))) end
  return base .. "?" .. table.concat(names, "&")
end

local seeded = false
local function uuid4()
  if not seeded then
    math.randomseed(os.time() + math.floor(os.clock() * 1000000))
    seeded = true
  end
  return (string.gsub("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", "[xy]", function(c)
    local v = (c == "x") and math.random(0, 15) or math.random(8, 11)
    return string.format("%x", v)
  end))
end

-- HTTP allows header names that gRPC metadata does not (`%`, `'`, `;`...);
-- forwarded, they would fail the call before the server sees it. Dropped here.
local function drop_unforwardable_headers(headers)
  local drop = {}
  for name, _ in pairs(headers) do
    if string.sub(name, 1, 1) ~= ":" and string.find(name, "^[0-9a-z_%.%-]+$") == nil then
      table.insert(drop, name)
    end
  end
  for _, name in ipairs(drop) do headers:remove(name) end
end

function envoy_on_request(request_handle)
  local headers = request_handle:headers()
  drop_unforwardable_headers(headers)
  if not sane_request_id(get(headers, "x-request-id")) then
    headers:replace("x-request-id", uuid4())
  end
  -- The client address as Envoy saw it ("ip:port"); the server trusts it
  -- from the edge only. (X-Forwarded-For would name this host's own address
  -- for loopback clients.)
  headers:replace("x-envoy-client-address", request_handle:streamInfo():downstreamRemoteAddress())
  -- For the access log: the client's method and path (before any rewrite,
  -- query values dropped), and the W3C trace id of its `traceparent`
  -- (version-traceid-parentid-flags).
  local meta = request_handle:streamInfo():dynamicMetadata()
  meta:set("persona", "method", get(headers, ":method") or "")
  meta:set("persona", "path", loggable_path(get(headers, ":path") or ""))
  local trace_id = string.match(get(headers, "traceparent") or "", "^%x%x%-(%x+)%-%x+%-%x%x$")
  if trace_id ~= nil and #trace_id == 32 and trace_id ~= string.rep("0", 32) then
    meta:set("persona", "trace_id", string.lower(trace_id))
  end
  if is_grpc_web(get(headers, "content-type")) then
    -- (A plain text reason: Envoy's 415 mapper puts it in the envelope, kernel/edge.py.)
    request_handle:respond({[":status"] = "415", ["content-type"] = "text/plain"},
      "gRPC-Web is not served: use native gRPC (h2c) or JSON.")
    return
  end
  -- Only the edge lists a body's keys for the server (record_body_keys).
  headers:remove("x-persona-body-keys")
  if is_grpc(get(headers, "content-type")) then
    headers:remove(EDGE_MARK)
    headers:remove("x-persona-safe-method")
    request_handle:streamInfo():dynamicMetadata():set("persona", "native_grpc", "1")
    return
  end
  -- Refused here for every route: a URL over the edge's limit, or one that
  -- is not UTF-8 once percent-decoded (the servers would fail it obscurely).
  local refusal = url_refusal(get(headers, ":path") or "")
  if refusal ~= nil then
    request_handle:respond({[":status"] = refusal[1], ["content-type"] = "text/plain"}, refusal[2])
    return
  end
  -- Callers may not forge the server's carrier headers.
  for name, _ in pairs(CARRIERS) do headers:remove(name) end
  -- gRPC transport headers mean nothing to an HTTP/JSON call (a malformed
  -- `grpc-timeout` would fail it in the backend).
  headers:remove("grpc-timeout")
  headers:replace(EDGE_MARK, "json")
  -- HEAD is answered as GET (the transcoder binds GET), without the body;
  -- the server is told (`x-persona-head`), so a download need not read it.
  local method = headers:get(":method")
  if method == "HEAD" then
    headers:replace(":method", "GET")
    headers:replace("x-persona-head", "1")
    request_handle:streamInfo():dynamicMetadata():set("persona", "head", "1")
  else
    headers:remove("x-persona-head")
  end
  -- Routing retries a safe method on another backend if one dies mid-request.
  if method == "GET" or method == "HEAD" then
    headers:replace("x-persona-safe-method", "1")
  else
    headers:remove("x-persona-safe-method")
  end
  normalize_path_ids(request_handle, headers)
  route_streaming(request_handle, headers)
  route_body_streaming(request_handle)
  if not json_media_type(request_handle) then return end
  record_body_keys(request_handle)
end

-- Paths whose path-bound id may contain `://` (which only binds
-- percent-encoded): the id after the prefix is decoded, then re-encoded in
-- full, so raw (`/v1/models/persona://<id>`) and encoded forms both bind.
local ENCODED_ID_PREFIXES = { "/v1/models/" }

local function percent_decode(text)
  return (string.gsub(text, "%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end))
end

local function percent_encode(text)
  return (string.gsub(text, "[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

-- Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
-- surrogates, nothing past U+10FFFF), as protobuf strings must be.
local function is_utf8(text)
  local i, n = 1, #text
  while i <= n do
    local c = string.byte(text, i)
    local count, low, high = 0, 0x80, 0xBF
    if c < 0x80 then count = 0
    elseif c >= 0xC2 and c <= 0xDF then count = 1
    elseif c == 0xE0 then count, low = 2, 0xA0
    elseif c == 0xED then count, high = 2, 0x9F
    elseif c >= 0xE1 and c <= 0xEF then count = 2
    elseif c == 0xF0 then count, low = 3, 0x90
    elseif c >= 0xF1 and c <= 0xF3 then count = 3
    elseif c == 0xF4 then count, high = 3, 0x8F
    else return false end
    for k = 1, count do
      local b = string.byte(text, i + k)
      if b == nil or b < (k == 1 and low or 0x80) or b > (k == 1 and high or 0xBF) then return false end
    end
    i = i + count + 1
  end
  return true
end

-- The edge's URL limit (kernel/edge.py EDGE_URL_BYTES): beyond it, 431
-- `headers_too_large`; a URL that is not UTF-8 once decoded: 400
-- `bad_request`. {status, reason} or nil. (Envoy's local reply mappers
-- write the envelope, in the route's error shape.)
local MAX_URL_BYTES = 8192

function url_refusal(path)
  if #path > MAX_URL_BYTES then return { "431", "the URL is too long" } end
  if string.find(path, "%%[89a-fA-F]") == nil and string.find(path, "[\128-\255]") == nil then return nil end
  if not is_utf8(percent_decode(path)) then return { "400", "the URL is not valid UTF-8 once percent-decoded" } end
  return nil
end

function normalize_path_ids(request_handle, headers)
  local path = headers:get(":path") or ""
  for _, prefix in ipairs(ENCODED_ID_PREFIXES) do
    if string.sub(path, 1, #prefix) == prefix then
      local rest, query = string.match(string.sub(path, #prefix + 1), "^([^?]*)(.*)$")
      local encoded = percent_encode(percent_decode(rest))
      if encoded ~= rest then
        headers:replace(":path", prefix .. encoded .. query)
        request_handle:clearRouteCache()
      end
      return
    end
  end
end

-- POST paths whose streaming form is chosen by the JSON body (OpenAI's
-- `"stream": true`) rather than a query parameter: the (small) body is
-- buffered and, when it asks to stream, the request goes to `<path>:stream`.
local BODY_STREAM_PATHS = { ["/v1/chat/completions"] = true }

function route_body_streaming(request_handle)
  local headers = request_handle:headers()
  if headers:get(":method") ~= "POST" then return end
  local path = headers:get(":path") or ""
  local base, query = string.match(path, "^([^?]*)(.*)$")
  if not BODY_STREAM_PATHS[base] then return end
  local body = request_handle:body()
  if body == nil then return end
  local text = body:getBytes(0, body:length())
  headers = request_handle:headers()  -- handles do not survive the body() yield
  if top_level_member(text, "stream") == "true" then
    headers:replace(":path", base .. ":stream" .. query)
    request_handle:clearRouteCache()
  end
end

-- The literal value (`true`, `false`, `null`, a number; "" for a string,
-- object or array) of the top-level member `key` of a JSON object, the last
-- one if repeated; nil when absent or the text is not an object. A scanner
-- that skips strings and tracks nesting, so a `"stream"` inside a string or a
-- nested object (a tool's JSON schema) is not the request's own member.
function top_level_member(text, key)
  local start = string.find(text, "%S")
  if start == nil or string.sub(text, start, start) ~= "{" then return nil end
  local depth, i, found = 0, start, nil
  while true do
    local s = string.find(text, '[{}%[%]"]', i)
    if s == nil then return found end
    local c = string.sub(text, s, s)
    if c == '"' then
      local j = s + 1
      while true do  -- the closing quote, stepping over escapes
        local e = string.find(text, '[\\"]', j)
        if e == nil then return found end
        if string.sub(text, e, e) == "\\" then j = e + 2 else j = e; break end
      end
      if depth == 1 and string.sub(text, s + 1, j - 1) == key then
        local colon, value = string.match(text, "^%s*(:)%s*([%w%.%-]*)", j + 1)
        if colon ~= nil then found = value end
      end
      i = j + 1
    else
      if c == "{" or c == "[" then depth = depth + 1 else depth = depth - 1 end
      if depth == 0 then return found end
      i = s + 1
    end
  end
end

-- `POST <path>?stream=true` goes to the RPC's streaming binding
-- `POST <path>:stream` (two RPCs cannot share one verb and path). The
-- `stream` parameter itself is consumed here; `stream=false` is dropped.
function route_streaming(request_handle, headers)
  if headers:get(":method") ~= "POST" then return end
  local path = headers:get(":path") or ""
  local base, query = string.match(path, "^([^?]*)%?(.*)$")
  if base == nil then return end
  local kept, stream = {}, nil
  for param in string.gmatch(query, "[^&]+") do
    local name, value = string.match(param, "^([^=]*)=?(.*)$")
    if name == "stream" then stream = value else table.insert(kept, param) end
  end
  if stream == nil then return end
  local target = base
  if stream == "true" or stream == "1" then target = base .. ":stream" end
  if #kept > 0 then target = target .. "?" .. table.concat(kept, "&") end
  headers:replace(":path", target)
  request_handle:clearRouteCache()
end

-- A body the transcoder reads as JSON must say so: `application/json`,
-- parameters allowed but a charset only of UTF-8 (RFC 8259); else 415 before
-- the transcoder parses whatever it is. The route metadata lists those
-- bindings (kernel/edge.py json_body_paths); bodies bound raw
-- (google.api.HttpBody: SCIM, webhooks) are their RPC's to check, and a
-- request without a body needs no content type. False when it answered.
function json_media_type(request_handle)
  local method = request_handle:headers():get(":method")
  if method == "GET" or method == "HEAD" then return true end
  local body = request_handle:body()
  if body == nil or body:length() == 0 then return true end
  local headers = request_handle:headers()  -- handles do not survive the body() yield
  local content_type = string.lower(get(headers, "content-type") or "")
  local media = string.match(content_type, "^%s*([^;%s]+)")
  local charset = string.match(content_type, ";%s*charset%s*=%s*\"?([^\";%s]+)")
  if media == "application/json" and (charset == nil or charset == "utf-8") then return true end
  if binds_json_body(request_handle, method, headers:get(":path")) then
    local sent = string.sub(string.gsub(content_type, "[^%w%.%+%-/;= ]", ""), 1, 100)
    local instead = sent ~= "" and ("not " .. sent) or "named in a Content-Type header"
    request_handle:respond({[":status"] = "415", ["content-type"] = "text/plain"},
      "Send the body as application/json (UTF-8), " .. instead .. ".")
    return false
  end
  return true
end

-- Whether the transcoder reads this call's body as JSON (the route metadata's
-- json_body_paths; not a raw google.api.HttpBody).
function binds_json_body(request_handle, method, path)
  local call = method .. " " .. string.match(path or "", "^[^?]*")
  for pattern, _ in pairs(request_handle:metadata():get("json_body_paths") or {}) do
    if string.find(call, pattern) then return true end
  end
  return false
end

-- Strict bodies: the transcoder drops unknown JSON fields silently, so the
-- key paths of a JSON object body go to the server in `x-persona-body-keys`,
-- which refuses the ones its request message lacks (server:
-- kernel/transport/body_keys.py, which documents the format). GET and HEAD
-- pay nothing; a non-object body is only peeked at.
local BODY_KEYS_MAX = 4096   -- bytes; a longer list is sent as "!" (a 400)
local BODY_KEYS_DEPTH = 32   -- containers deeper are not walked

function record_body_keys(request_handle)
  local method = request_handle:headers():get(":method")
  if method == "GET" or method == "HEAD" then return end
  local body = request_handle:body()
  if body == nil or body:length() == 0 then return end
  if string.find(body:getBytes(0, math.min(body:length(), 64)), "^%s*[^%s{]") then return end
  local free_form = request_handle:metadata():get("free_form_keys") or {}
  local text = body:getBytes(0, body:length())
  local keys, arrays, comma = body_key_paths(text, free_form)
  -- A trailing comma is not JSON, though the transcoder's parser takes it.
  if comma ~= nil and binds_json_body(request_handle, method, request_handle:headers():get(":path")) then
    local close = string.match(text, "^,%s*(.)", comma)
    local rest = string.gsub(string.sub(text, comma, comma + 39), "[\128-\255]", "?")
    request_handle:respond({[":status"] = "400", ["content-type"] = "text/plain"},
      INVALID_JSON .. "A comma before " .. close .. " (JSON allows no trailing comma). At: " .. rest)
    return
  end
  if keys ~= nil and keys ~= "" then
    request_handle:headers():replace("x-persona-body-keys", keys)
  end
  -- Where the body holds arrays: kept for the answer, should the transcoder
  -- refuse one where its field takes a single value (wrong_type).
  if arrays ~= nil and arrays ~= "" then
    request_handle:streamInfo():dynamicMetadata():set("persona", "body_arrays", arrays)
  end
end

local function key_segment(key)
  if string.find(key, "[^%w_]") == nil then return key end
  return (string.gsub(key, "[^%w_]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

-- The distinct key paths of a JSON object, comma-separated: keys joined by
-- `.`, each percent-encoded beyond [A-Za-z0-9_] and followed by `[]` per array
-- level it holds (array elements share their path, so the list is bounded by
-- the schema, not by the body); the values of `free_form` keys are not walked.
-- Also the paths (same form, distinct) of the keys whose value is an array,
-- and the position of the first trailing comma (`,` before `}` or `]`, also
-- inside free-form values), or nil.
-- nil when the text is not an object. One pass over structural characters,
-- allocating only for keys; malformed JSON just ends the scan (the
-- transcoder refuses it).
function body_key_paths(text, free_form)
  local i = string.find(text, "%S")
  if i == nil or string.sub(text, i, i) ~= "{" then return nil end
  local prefixes, objects, depth = {}, {}, 0  -- per open container: its keys' prefix; is it an object
  local key_path, key_free = nil, false        -- the last key read, awaiting its value
  local skip = 0                               -- depth inside a value not walked
  local seen, out, size = {}, {}, 0
  local arrays, array_seen = {}, {}
  while true do
    local s = string.find(text, '[{}%[%]"]', i)
    if s == nil then break end
    local c = string.byte(text, s)
    if c == 34 then  -- a string: a key when an object's and followed by `:`
      local j = s + 1
      while true do
        local e = string.find(text, '[\\"]', j)
        if e == nil then return table.concat(out, ","), table.concat(arrays, ",") end
        if string.byte(text, e) == 92 then j = e + 2 else j = e; break end
      end
      if skip == 0 and objects[depth] and string.find(text, "^%s*:", j + 1) then
        local key = string.sub(text, s + 1, j - 1)
        key_path, key_free = prefixes[depth] .. key_segment(key), free_form[key] ~= nil
        if not seen[key_path] then
          seen[key_path] = true
          size = size + #key_path + 1
          if size > BODY_KEYS_MAX then return "!" end
          out[#out + 1] = key_path
        end
      end
      i = j + 1
    elseif c == 123 or c == 91 then  -- `{` or `[`
      if c == 91 and skip == 0 and objects[depth] and key_path ~= nil and not array_seen[key_path] then
        array_seen[key_path] = true
        arrays[#arrays + 1] = key_path
      end
      if skip > 0 or depth >= BODY_KEYS_DEPTH or (objects[depth] and key_free) then
        skip = skip + 1
      else
        local owner = depth == 0 and "" or (objects[depth] and (key_path or "?") or prefixes[depth])
        depth = depth + 1
        objects[depth] = c == 123
        if depth == 1 then
          prefixes[depth] = ""
        elseif c == 123 then
          prefixes[depth] = owner .. "."
        else
          prefixes[depth] = owner .. "[]"
        end
      end
      key_path, key_free = nil, false
      i = s + 1
    else  -- `}` or `]`
      local k = s - 1
      local b = string.byte(text, k)
      while b == 32 or b == 10 or b == 13 or b == 9 do k = k - 1; b = string.byte(text, k) end
      if b == 44 then return table.concat(out, ","), table.concat(arrays, ","), k end
      if skip > 0 then skip = skip - 1 else depth = depth - 1 end
      if depth == 0 then break end
      i = s + 1
    end
  end
  return table.concat(out, ","), table.concat(arrays, ",")
end


-- Copy server-supplied headers from trailers (errors after initial metadata).
local function strip(headers)
  local drop = {}
  for name, _ in pairs(headers) do
    if CARRIERS[name] or string.sub(name, 1, 5) == "grpc-" or string.sub(name, 1, #SET_PREFIX) == SET_PREFIX then
      table.insert(drop, name)
    end
  end
  for _, name in ipairs(drop) do headers:remove(name) end
end

-- Replace the body; a HEAD answer keeps the length of the body it omits.
local function set_body(response_handle, body, head)
  response_handle:body(true):setBytes(head and "" or body)
  local headers = response_handle:headers()  -- handles do not survive the body() yield
  headers:replace("content-length", tostring(string.len(body)))
  return headers
end

local function render(response_handle, status, body, content_type, head)
  local headers = response_handle:headers()
  headers:replace(":status", status)
  headers:replace("content-type", content_type or "application/json")
  strip(set_body(response_handle, body, head))
end

local function bodiless(status)
  local code = tonumber(status) or 200
  return (code >= 300 and code < 400) or code == 204 or code == 304
end

-- A successful answer: the status and headers the server set (one pass over
-- the headers: this runs on every response).
local function answer(response_handle, headers, head)
  local status = get(headers, "x-persona-status")
  local set, drop = {}, {}
  for name, value in pairs(headers) do
    if string.sub(name, 1, #SET_PREFIX) == SET_PREFIX then
      set[string.sub(name, #SET_PREFIX + 1)] = value
      table.insert(drop, name)
    elseif CARRIERS[name] or string.sub(name, 1, 5) == "grpc-" then
      table.insert(drop, name)
    end
  end
  for _, name in ipairs(drop) do headers:remove(name) end
  if status ~= nil then headers:replace(":status", status) end
  for name, value in pairs(set) do headers:replace(name, value) end
  if bodiless(status) then
    headers:remove("content-type")
    response_handle:body(true):setBytes("")
    response_handle:headers():replace("content-length", "0")
  elseif head then
    local body = response_handle:body(true)
    set_body(response_handle, body:getBytes(0, body:length()), true)
    -- A length the server declared (a download it did not read for HEAD) stands.
    if set["content-length"] ~= nil then response_handle:headers():replace("content-length", set["content-length"]) end
  end
end

-- The caller (org, workspace, credential) and the trace id for the access
-- log; the trace id also goes back to the client as `x-trace-id`.
local function keep_log_fields(response_handle, headers, meta)
  local who = headers:get("x-persona-log")
  local dynamic = response_handle:streamInfo():dynamicMetadata()
  if who ~= nil then
    local org, workspace, principal = string.match(who, "^(%S+) (%S+) (%S+)$")
    dynamic:set("persona", "org", org or "")
    dynamic:set("persona", "workspace", workspace or "")
    dynamic:set("persona", "principal", principal or "")
    headers:remove("x-persona-log")
  end
  if meta ~= nil and meta["trace_id"] ~= nil and meta["trace_id"] ~= "" then
    headers:replace("x-trace-id", meta["trace_id"])
  end
end

function envoy_on_response(response_handle)
  local meta = response_handle:streamInfo():dynamicMetadata():get("persona")
  if meta ~= nil and meta["native_grpc"] == "1" then return end
  local head = meta ~= nil and meta["head"] == "1"

  local headers = response_handle:headers()
  keep_log_fields(response_handle, headers, meta)
  local status = get(headers, "x-http-status")
  if status ~= nil then
    -- Trailers-only gRPC error: everything arrived as headers. The catalogue
    -- code goes to the access log (dynamic metadata), not to the client.
    response_handle:streamInfo():dynamicMetadata():set("persona", "code", get(headers, "x-error-code") or "")
    local body = get(headers, "x-error-body") or envelope(INTERNAL[2], INTERNAL[3])
    render(response_handle, status, body, get(headers, "x-error-content-type"), head)
    return
  end

  local grpc_status = get(headers, "grpc-status")
  if grpc_status ~= nil and grpc_status ~= "0" then
    local mapped = FALLBACK[grpc_status] or INTERNAL
    response_handle:streamInfo():dynamicMetadata():set("persona", "code", mapped[2])
    render(response_handle, tostring(mapped[1]), envelope(mapped[2], mapped[3]), nil, head)
    return
  end

  local content_type = get(headers, "content-type") or ""
  if string.find(content_type, "text/event-stream", 1, true) then return end
  if is_grpc(content_type) then
    -- A gRPC response the transcoder did not convert (it failed mid-way).
    render(response_handle, tostring(INTERNAL[1]), envelope(INTERNAL[2], INTERNAL[3]), nil, head)
    return
  end
  if get(headers, ":status") == "400" and get(headers, "x-persona-status") == nil then
    reword_bad_request(response_handle, meta)
    headers = response_handle:headers()  -- handles do not survive the body() yield
  end
  answer(response_handle, headers, head)
end

-- Envoy's own 400s (the transcoder's reasons, in the envelope by the 400
-- mapper, kernel/edge.py; OpenAI's shape on its paths) reworded so a person
-- can act on them: the unknown query parameter is named as such, a JSON
-- syntax error says where it is, a value of the wrong JSON type names its
-- field as the JSON contract does (wrong_type).
local MALFORMED = '{"error":{"code":"bad_request","details":{},"message":"The request is malformed: '
local PLAIN_TAIL = '"}}'
local OPENAI_TAIL = '","param":null,"type":"invalid_request_error"}}'

local function json_unescape(text)
  local map = { n = "\n", t = "\t", r = "\r", b = "\b", f = "\f", ["/"] = "/", ["\\"] = "\\", ['"'] = '"' }
  text = string.gsub(text, "\\u00(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end)
  return (string.gsub(text, "\\(.)", function(c) return map[c] or c end))
end

local function json_escape(text)
  return (string.gsub(text, '[%c"\\]', function(c)
    return (c == '"' or c == "\\") and ("\\" .. c) or string.format("\\u%04x", string.byte(c))
  end))
end

-- Caller input an answer may echo: at most `n` bytes, non-ASCII bytes shown
-- as "?" (a cut, or an invalid, UTF-8 sequence would make the answer itself
-- invalid UTF-8).
local function echo(text, n)
  return (string.gsub(string.sub(text, 1, n), "[\128-\255]", "?"))
end

-- What each kind of field (edge.py _field_spec) takes, in words (one, many)
-- and as `details.expected`; integers add their range when a number is out of it.
local KINDS = {
  string = { "a string", "strings", '{"type":"string"}' },
  bytes = { "a base64-encoded string", "base64-encoded strings", '{"format":"byte","type":"string"}' },
  bool = { "a boolean (true or false)", "booleans", '{"type":"boolean"}' },
  int32 = { "an integer", "integers", '{"format":"int32","type":"integer"}', "from -2147483648 to 2147483647" },
  uint32 = { "an integer", "integers", '{"format":"uint32","type":"integer"}', "from 0 to 4294967295" },
  int64 = { "an integer", "integers", '{"format":"int64","type":"integer"}',
            "from -9223372036854775808 to 9223372036854775807" },
  uint64 = { "an integer", "integers", '{"format":"uint64","type":"integer"}', "from 0 to 18446744073709551615" },
  number = { "a number", "numbers", '{"type":"number"}' },
  enum = { "one of its documented values", "documented values", '{"type":"string"}' },
  object = { "an object", "objects", '{"type":"object"}' },
  map = { "an object", "objects", '{"type":"object"}' },
  array = { "an array", "arrays", '{"type":"array"}' },
  value = { "a JSON value", "JSON values", "{}" },
  timestamp = { 'an RFC 3339 timestamp such as "2030-01-01T00:00:00Z"', "RFC 3339 timestamps",
                '{"format":"date-time","type":"string"}' },
  duration = { 'a duration such as "1.5s"', "durations", '{"format":"duration","type":"string"}' },
  fieldmask = { "a comma-separated list of field names", "lists of field names",
                '{"format":"field-mask","type":"string"}' },
}
-- Kinds whose JSON is a string of a given form: a string of another form gets no ", not a string".
local STRING_FORMS = { bytes = true, enum = true, timestamp = true, duration = true, fieldmask = true }
local RECEIVED = { string = "a string", number = "a number", boolean = "a boolean", object = "an object",
                   array = "an array", null = "null" }

-- The transcoder's type names (TYPE_INT32; type.googleapis.com/<message>) as kinds.
local PROTO_KINDS = {
  TYPE_STRING = "string", TYPE_BYTES = "bytes", TYPE_BOOL = "bool", TYPE_DOUBLE = "number", TYPE_FLOAT = "number",
  TYPE_ENUM = "enum", TYPE_INT32 = "int32", TYPE_SINT32 = "int32", TYPE_SFIXED32 = "int32", TYPE_UINT32 = "uint32",
  TYPE_FIXED32 = "uint32", TYPE_INT64 = "int64", TYPE_SINT64 = "int64", TYPE_SFIXED64 = "int64",
  TYPE_UINT64 = "uint64", TYPE_FIXED64 = "uint64",
  ["google.protobuf.Value"] = "value", ["google.protobuf.ListValue"] = "array",
  ["google.protobuf.Timestamp"] = "timestamp", ["google.protobuf.Duration"] = "duration",
  ["google.protobuf.FieldMask"] = "fieldmask", ["google.protobuf.StringValue"] = "string",
  ["google.protobuf.BytesValue"] = "bytes", ["google.protobuf.BoolValue"] = "bool",
  ["google.protobuf.Int32Value"] = "int32", ["google.protobuf.UInt32Value"] = "uint32",
  ["google.protobuf.Int64Value"] = "int64", ["google.protobuf.UInt64Value"] = "uint64",
  ["google.protobuf.DoubleValue"] = "number", ["google.protobuf.FloatValue"] = "number",
}

local function proto_kind(name)
  return PROTO_KINDS[name] or PROTO_KINDS[string.match(name, "^type%.googleapis%.com/(.*)$") or ""] or "object"
end

-- A field of a request message by proto name (or, `by_key`, as a body's key
-- names it: its JSON or proto name): {name (proto), json, kind, repeated,
-- message}; nil if the table does not know it.
local function field_of(message, name, by_key)
  local fields = message ~= nil and JSON_FIELDS.messages[message] or nil
  if fields == nil or name == nil then return nil end
  local spec = fields[name]
  if spec == nil and by_key then
    for proto, candidate in pairs(fields) do
      if string.match(candidate, "^%S+") == name then name, spec = proto, candidate; break end
    end
  end
  if spec == nil then return nil end
  local json, kind, many, nested = string.match(spec, "^(%S+) (%w+)(%S*) ?(%S*)$")
  return { name = name, json = json, kind = kind, repeated = many == "[]", message = nested ~= "" and nested or nil }
end

-- A transcoder path (proto names joined by `.`, `[i]` after a repeated
-- field's) walked from `message`: its JSON form, its last field, whether an
-- index followed that field, and the message it ends in; nil where the table
-- does not know a field. The transcoder counts the elements of an array of
-- messages, not of other values (it names every one `[0]`): those are `[]`,
-- any element, as in the body keys (kernel/transport/body_keys.py).
local function walk(message, path)
  local out, field, indexed, i = {}, nil, false, 1
  while i <= #path do
    local name, after = string.match(path, "^([%w_]+)()", i)
    if name == nil then return nil end
    field = field_of(message, name)
    if field == nil then return nil end
    i = after
    local suffix = ""
    while string.sub(path, i, i) == "[" do
      local e = select(2, string.find(path, "^%b[]", i))
      if e == nil then return nil end
      suffix = suffix .. string.sub(path, i, e)
      i = e + 1
    end
    if field.message == nil and field.kind ~= "map" then suffix = string.gsub(suffix, "%b[]", "[]") end
    out[#out + 1] = field.json .. suffix
    indexed, message = suffix ~= "", field.message
    if string.sub(path, i, i) == "." then i = i + 1 elseif i <= #path then return nil end
  end
  return table.concat(out, "."), field, indexed, message
end

-- protobuf's default JSON name (lowerCamel), for a path the table does not know.
local function lower_camel(path)
  return (string.gsub(path, "_(%l)", string.upper))
end

-- The binding the call took (the client's method and path, kept at the
-- request): its request message and its `body` selector.
local function binding_of(meta)
  local method = meta ~= nil and meta["method"] or ""
  if method == "HEAD" then method = "GET" end
  local call = method .. " " .. string.match(meta ~= nil and meta["path"] or "", "^[^?]*")
  for _, binding in ipairs(JSON_FIELDS.bindings) do
    if string.find(call, binding[1]) then return binding[2], binding[3] end
  end
  return nil, "*"
end

-- The JSON type of a value as the transcoder quotes it.
local function json_type(value)
  local first = string.sub(value, 1, 1)
  if first == '"' then return "string" end
  if value == "true" or value == "false" then return "boolean" end
  if value == "null" then return "null" end
  if string.find(first, "[%-%d]") then return "number" end
  -- A well-known type's own reason: "Field 'x', Invalid data type for timestamp, value is 5".
  local inner = string.match(value, "Invalid data type for %w+, value is (.*)$")
  if inner ~= nil then return json_type(inner) end
  return "string"  -- "Illegal timestamp format...": a string of another form
end

-- A body key path's keys but the last (record_body_keys' form: as the
-- client wrote them, `[]` per array) resolved from `message`: as a proto
-- path (`messages[].tool_calls[]`), and the message the last key is in.
local function key_parents(message, keys)
  local names = {}
  for n = 1, #keys - 1 do
    local key, arrays = string.match(keys[n], "^([%w_]+)([%[%]]*)$")
    local field = field_of(message, key, true)
    if field == nil then return nil end
    names[#names + 1] = field.name .. arrays
    message = field.message
  end
  return table.concat(names, "."), message
end

-- The array the transcoder refused under `parent` (it names no field there):
-- the body's first array-valued key (record_body_keys) in that object whose
-- field takes a single value. Its JSON path (with the parent's indices) and
-- field, or nil.
local function refused_array(meta, message, parent)
  local parent_json = walk(message, parent)
  if parent_json == nil then return nil end
  local shape = string.gsub(parent, "%b[]", "[]")  -- array elements share a key path
  for path in string.gmatch(meta ~= nil and meta["body_arrays"] or "", "[^,]+") do
    local keys = {}
    for key in string.gmatch(path, "[^.]+") do keys[#keys + 1] = key end
    local parents, owner = key_parents(message, keys)
    if parents == shape then
      local field = field_of(owner, keys[#keys], true)
      if field ~= nil and not field.repeated and field.kind ~= "value" and field.kind ~= "array" then
        return (parent_json == "" and "" or parent_json .. ".") .. field.json, field
      end
    end
  end
  return nil
end

-- The transcoder's reasons for a value of the wrong JSON type (protobuf's
-- JSON parser), in proto names and types:
--   `<path>: invalid value <value> for type <TYPE_INT32 | type.googleapis.com/<message>>`
--   `<parent>: invalid value Starting an object on a scalar field for type <field>`
--   `<parent>: Proto field is not repeating, cannot start list.`
-- said as the contract does: the field by its JSON path from the body (or
-- the query parameter), what it takes and what it got. The message, the
-- `details` (JSON: reason `wrong_type`, `field` or `parameter`, `expected`,
-- `received`) and the field; nil for another reason.
function wrong_type(reason, meta)
  local at, value, type_name = string.match(reason, "^(.-): invalid value (.*) for type (%S+)$")
  local received, kind, object_field, list = nil, nil, nil, false
  if at == nil then
    at = string.match(reason, "^(.-): Proto field is not repeating, cannot start list%.$")
    if at == nil then return nil end
    received, list = "array", true  -- `at`: the object holding the array
  elseif value == "Starting an object on a scalar field" then
    received, object_field = "object", type_name  -- `at`: the object holding that field
  else
    received, kind = json_type(value), proto_kind(type_name)
  end
  local message, body = binding_of(meta)
  -- Fields not in the body are query (or path) parameters; paths in the body start there.
  local parameter = body == ""
  if body ~= "*" and body ~= "" then
    local prefix = string.sub(at, 1, #body + 1)
    if at == body or prefix == body .. "." or prefix == body .. "[" then
      local _, field = walk(message, body)
      message, at = field and field.message, string.sub(at, #body + 2)
    else
      parameter = true
    end
  end
  if object_field ~= nil then
    local _, holder = walk(message, at)
    if holder ~= nil and holder.repeated and holder.message == nil and string.match(at, "[%w_]+$") == object_field then
      at = at .. "[0]"  -- an object among the elements of an array of scalars
    else
      at = (at == "" and "" or at .. ".") .. object_field
    end
  end
  local name, field, indexed
  if list then
    name, field = refused_array(meta, message, at)
    if name == nil then  -- an array the body's keys do not show
      local within = at ~= "" and (" of `" .. echo(lower_camel(at), 200) .. "`") or ""
      return "A field" .. within .. " holds an array where it takes a single value.",
        '{"reason":"wrong_type","received":"array"}', nil
    end
  else
    name, field, indexed = walk(message, at)
    if name == nil then name = lower_camel(at) end
  end
  kind = kind or (field and field.kind)
  local words = KINDS[kind or ""]
  local said, expected = "a single value", "{}"
  if field ~= nil and field.repeated and not indexed and not list then
    said = "an array of " .. (words and words[2] or "values")
    expected = '{"items":' .. (words and words[3] or "{}") .. ',"type":"array"}'
  elseif words ~= nil then
    said, expected = words[1], words[3]
  end
  -- A number out of an integer's range (or a fraction): the range, and the number.
  local ranged = received == "number" and not parameter and words ~= nil and words[4] ~= nil and said == words[1]
  if ranged then said = said .. " " .. words[4] end
  if parameter then  -- named as the query names it (JSON or proto name)
    local query = "&" .. (string.match(meta ~= nil and meta["path"] or "", "%?(.*)$") or "") .. "&"
    if not string.find(query, "&" .. name .. "&", 1, true) and string.find(query, "&" .. at .. "&", 1, true) then
      name = at
    end
  end
  name = echo(name, 200)
  local details = '{"expected":' .. expected .. (parameter and ',"parameter":"' or ',"field":"') .. json_escape(name)
    .. '","reason":"wrong_type"' .. (parameter and "" or (',"received":"' .. received .. '"')) .. "}"
  if parameter then
    return "Query parameter `" .. name .. "` must be " .. said .. ".", details, nil
  end
  local not_this = ""
  if ranged then
    not_this = ", not " .. echo(value, 40)
  elseif not (received == "string" and STRING_FORMS[kind or ""]) then
    not_this = ", not " .. RECEIVED[received]
  end
  local elements = string.match(name, "^(.*)%[%]$")
  local subject = elements ~= nil and ("Each element of `" .. elements .. "`") or ("`" .. name .. "`")
  return subject .. " must be " .. said .. not_this .. ".", details, name
end

local function reworded(reason, meta)
  local field = string.match(reason, '^Could not find field "([^"]*)" in the type "[%w%._]+"%.$')
  if field ~= nil then return 'Unknown query parameter "' .. field .. '".' end
  if reason == ": Root element must be a message." then return "The body must be a JSON object." end
  if string.sub(reason, 1, #INVALID_JSON) == INVALID_JSON then return reason end  -- the Lua's own (a trailing comma)
  local what, context, caret = string.match(reason, "^(.-)\n(.-)\n( *)%^$")
  if what == nil then return wrong_type(reason, meta) end
  local rest = echo(string.sub(context, #caret + 1), 40)
  return INVALID_JSON .. what .. " " .. (rest == "" and "At the end of the body." or ("At: " .. rest))
end

function reword_bad_request(response_handle, meta)
  local body = response_handle:body(true)
  if body == nil then return end
  local text = body:getBytes(0, body:length())
  if string.sub(text, 1, #MALFORMED) ~= MALFORMED then return end
  local rest = string.match(string.sub(text, #MALFORMED + 1), "^(.-)%s*$")
  local openai = string.sub(rest, -#OPENAI_TAIL) == OPENAI_TAIL
  local tail = openai and OPENAI_TAIL or PLAIN_TAIL
  if string.sub(rest, -#tail) ~= tail then return end
  local message, details, field = reworded(json_unescape(string.sub(rest, 1, -#tail - 1)), meta)
  if message == nil then return end
  local new = '{"error":{"code":"bad_request","details":' .. (details or "{}") .. ',"message":"' .. json_escape(message)
    .. '"' .. (openai and (',"param":' .. (field and ('"' .. json_escape(field) .. '"') or "null")
                           .. ',"type":"invalid_request_error"') or "") .. "}}"
  body:setBytes(new)
  response_handle:headers():replace("content-length", tostring(#new))
end
