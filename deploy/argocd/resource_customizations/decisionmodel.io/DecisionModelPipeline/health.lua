-- Argo CD health of a DecisionModelPipeline (docs/gitops.md). Healthy once every stage of the
-- spec's generation promoted; Suspended while a stage waits for an approval; Degraded when the
-- run failed or was aborted, the spec is not a pipeline, or a stage's cluster has no worker;
-- Progressing otherwise.
-- Self-contained (Argo CD runs each kind's script alone, no require): conditions() and said()
-- are repeated in the other kind's script on purpose.
local hs = {}

local function conditions(status)
  local found = {}
  if status ~= nil and status.conditions ~= nil then
    for _, c in ipairs(status.conditions) do
      found[c.type] = c
    end
  end
  return found
end

local function said(c)
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

local generation = obj.metadata.generation
local status = obj.status
if status == nil or status.observedGeneration == nil or status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  return hs
end

local c = conditions(status)
if c.Accepted ~= nil and c.Accepted.status == "False" then
  hs.status = "Degraded"
  hs.message = said(c.Accepted)
  return hs
end
if c.StageWorkersPolling ~= nil and c.StageWorkersPolling.status == "False" then
  hs.status = "Degraded"
  hs.message = said(c.StageWorkersPolling)
  return hs
end

local summary = status.summary or ""
local phase = status.phase
-- The phase is the run's that recorded it last (runWorkflowId): another run's (the one before
-- a spec change or a retry) says nothing yet of the current run (status.workflowId).
if status.runWorkflowId ~= nil and status.runWorkflowId ~= status.workflowId then
  phase = nil
end
if phase == "Failed" or phase == "Aborted" or phase == "Invalid" then
  hs.status = "Degraded"
  hs.message = "The run " .. string.lower(phase) .. ": " .. summary
elseif phase == "AwaitingApproval" then
  hs.status = "Suspended"
  hs.message = "A stage awaits approval (dmrollout pipeline promote): " .. summary
elseif phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "Every stage promoted: " .. summary
else
  hs.status = "Progressing"
  hs.message = "The run is progressing: " .. summary
end
return hs
