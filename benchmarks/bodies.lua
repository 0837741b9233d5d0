-- wrk script: POST bodies read from files (one whole body per file, binary-safe), in turn,
-- with one Content-Type, and print the latency distribution as one JSON line (prefixed
-- WRKJSON) when the run ends.
--
--   wrk -t1 -c16 -d2s --timeout 30s -s benchmarks/bodies.lua URL -- CONTENT_TYPE FILE...
--
-- The URL's query string (e.g. ?return_proba=true for table bodies) is sent as it is.
-- Files are read in binary mode ("rb"): an Arrow IPC body holds any byte, newlines and
-- zeros included, and Lua strings carry them unchanged.  Every request is formatted once,
-- in init(): a 10,000-row body is megabytes, and formatting it per request would make
-- wrk, not the service, the bottleneck.

local requests = {}
local counter = 0

local function read_body(path)
  local file = assert(io.open(path, "rb"))
  local body = file:read("*a")
  file:close()
  return body
end

function init(args)
  if #args < 2 then
    error("usage: -- CONTENT_TYPE FILE [FILE ...]")
  end
  local headers = { ["Content-Type"] = args[1] }
  for i = 2, #args do
    requests[#requests + 1] = wrk.format("POST", nil, headers, read_body(args[i]))
  end
  -- Threads start at different bodies, so 16 connections do not send the same row at once.
  counter = math.random(0, #requests - 1)
end

function request()
  counter = counter + 1
  return requests[(counter % #requests) + 1]
end

function done(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "bytes": %d, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"latency_us": {"min": %d, "mean": %.1f, "max": %d, '
      .. '"p50": %d, "p90": %d, "p95": %d, "p99": %d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(95),
    latency:percentile(99)
  ))
end
