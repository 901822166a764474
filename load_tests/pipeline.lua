-- Pipelining for wrk: every write carries DEPTH copies of the GET request, and wrk counts each
-- response. Usage: wrk -s load_tests/pipeline.lua http://127.0.0.1:PORT/ping -- 16
local batch

function init(args)
  local depth = tonumber(args[1]) or 16
  batch = string.rep(wrk.format(), depth)
end

function request()
  return batch
end
