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
  -- For the access log: the client's method and path (before any rewrite),
  -- and the W3C trace id of its `traceparent` (version-traceid-parentid-flags).
  local meta = request_handle:streamInfo():dynamicMetadata()
  meta:set("persona", "method", get(headers, ":method") or "")
  meta:set("persona", "path", get(headers, ":path") or "")
  local trace_id = string.match(get(headers, "traceparent") or "", "^%x%x%-(%x+)%-%x+%-%x%x$")
  if trace_id ~= nil and #trace_id == 32 and trace_id ~= string.rep("0", 32) then
    meta:set("persona", "trace_id", string.lower(trace_id))
  end
  if is_grpc_web(get(headers, "content-type")) then
    request_handle:respond({[":status"] = "415", ["content-type"] = "application/json"},
      envelope("unsupported_media_type", "gRPC-Web is not served: use native gRPC (h2c) or JSON."))
    return
  end
  if is_grpc(get(headers, "content-type")) then
    headers:remove(EDGE_MARK)
    headers:remove("x-persona-safe-method")
    request_handle:streamInfo():dynamicMetadata():set("persona", "native_grpc", "1")
    return
  end
  -- Callers may not forge the server's carrier headers.
  for name, _ in pairs(CARRIERS) do headers:remove(name) end
  -- gRPC transport headers mean nothing to an HTTP/JSON call (a malformed
  -- `grpc-timeout` would fail it in the backend).
  headers:remove("grpc-timeout")
  headers:replace(EDGE_MARK, "json")
  -- HEAD is answered as GET (the transcoder binds GET), without the body.
  local method = headers:get(":method")
  if method == "HEAD" then
    headers:replace(":method", "GET")
    request_handle:streamInfo():dynamicMetadata():set("persona", "head", "1")
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
  answer(response_handle, headers, head)
end
