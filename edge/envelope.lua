-- Persona Service edge hooks (JSON/HTTP only; native gRPC passes untouched).
--
-- The gRPC server puts the HTTP status and the rendered error envelope in
-- metadata (`x-http-status`, `x-error-body`); this hook turns them into the
-- HTTP response. gRPC errors without that metadata (a crash, Envoy's own
-- upstream failures) are mapped from the gRPC code, never leaking internals.

local CARRIERS = { ["x-http-status"] = true, ["x-error-body"] = true }

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

local function is_grpc(content_type)
  return content_type ~= nil and string.sub(content_type, 1, 16) == "application/grpc"
end

local function get(headers, name)
  local value = headers:get(name)
  return value
end

function envoy_on_request(request_handle)
  local headers = request_handle:headers()
  if is_grpc(get(headers, "content-type")) then
    request_handle:streamInfo():dynamicMetadata():set("persona", "native_grpc", "1")
    return
  end
  -- Callers may not forge the server's carrier headers.
  for name, _ in pairs(CARRIERS) do headers:remove(name) end
end

local function envelope(code, message)
  return string.format('{"error":{"code":"%s","message":"%s","details":{}}}', code, message)
end

-- Copy server-supplied headers from trailers (errors after initial metadata).
local function strip(headers)
  local drop = {}
  for name, _ in pairs(headers) do
    if CARRIERS[name] or string.sub(name, 1, 5) == "grpc-" then table.insert(drop, name) end
  end
  for _, name in ipairs(drop) do headers:remove(name) end
end

local function render(response_handle, status, body)
  local headers = response_handle:headers()
  headers:replace(":status", status)
  headers:replace("content-type", "application/json")
  response_handle:body(true):setBytes(body)
  headers = response_handle:headers()  -- handles do not survive the body() yield
  headers:replace("content-length", tostring(string.len(body)))
  strip(headers)
end

function envoy_on_response(response_handle)
  local meta = response_handle:streamInfo():dynamicMetadata():get("persona")
  if meta ~= nil and meta["native_grpc"] == "1" then return end

  local headers = response_handle:headers()
  local status = get(headers, "x-http-status")
  if status ~= nil then
    -- Trailers-only gRPC error: everything arrived as headers.
    local body = get(headers, "x-error-body") or envelope(INTERNAL[2], INTERNAL[3])
    render(response_handle, status, body)
    return
  end

  local grpc_status = get(headers, "grpc-status")
  if grpc_status ~= nil and grpc_status ~= "0" then
    local mapped = FALLBACK[grpc_status] or INTERNAL
    render(response_handle, tostring(mapped[1]), envelope(mapped[2], mapped[3]))
    return
  end

  local content_type = get(headers, "content-type") or ""
  if string.find(content_type, "text/event-stream", 1, true) then return end
  if is_grpc(content_type) then
    -- A gRPC response the transcoder did not convert (it failed mid-way).
    render(response_handle, tostring(INTERNAL[1]), envelope(INTERNAL[2], INTERNAL[3]))
    return
  end
  strip(headers)
end
