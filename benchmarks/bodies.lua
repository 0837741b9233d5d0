-- wrk script: POST JSON bodies read from a file (one body per line), in turn, and print
-- the latency distribution as one JSON line (prefixed WRKJSON) when the run ends.
--
--   wrk -t1 -c16 -d2s --timeout 30s -s benchmarks/bodies.lua URL -- BODIES_FILE
--
-- Every request is formatted once, in init(): a 10,000-row body is megabytes, and
-- formatting it per request would make wrk, not the service, the bottleneck.

local requests = {}
local counter = 0

function init(args)
  local headers = { ["Content-Type"] = "application/json" }
  for line in io.lines(args[1]) do
    if #line > 0 then
      requests[#requests + 1] = wrk.format("POST", nil, headers, line)
    end
  end
  if #requests == 0 then
    error("no bodies in " .. args[1])
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
