-- Argo CD health of a DecisionModel (docs/gitops.md). Healthy only when the spec's generation
-- serves (a warning it serves through is named in the message); Suspended while a candidate
-- waits for a person's approval; Degraded when a rollout failed or was rolled back for cause
-- (Stalled), or a guard, a refusal or lost replicas need a fix (Degraded); Progressing
-- otherwise. Reads the kstatus conditions the controller writes.
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
if c.Stalled ~= nil and c.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = said(c.Stalled)
  return hs
end
local serving = c.Ready ~= nil and c.Ready.status == "True" and c.Ready.observedGeneration == generation
local settled = c.Reconciling == nil or c.Reconciling.status ~= "True"
if c.Degraded ~= nil and c.Degraded.status == "True" then
  -- A warning the model serves through (CacheNotShareable, CacheSpecImmutable: "phase
  -- unchanged") leaves the committed spec serving: Healthy, the warning in the message.
  if serving and settled and status.phase == "Ready" then
    hs.status = "Healthy"
    hs.message = said(c.Ready) .. "; warning " .. said(c.Degraded)
    return hs
  end
  hs.status = "Degraded"
  hs.message = said(c.Degraded)
  return hs
end
if c.Reconciling ~= nil and c.Reconciling.status == "True" then
  if c.Reconciling.reason == "AwaitingPromotion" or c.Reconciling.reason == "ReplicasNotModelReady" then
    hs.status = "Suspended"
  else
    hs.status = "Progressing"
  end
  hs.message = said(c.Reconciling)
  return hs
end
if serving then
  hs.status = "Healthy"
  hs.message = said(c.Ready)
  return hs
end
if c.Ready ~= nil and c.Ready.status == "False" then
  hs.status = "Degraded"
  hs.message = said(c.Ready)
  return hs
end
hs.status = "Progressing"
hs.message = "Waiting for generation " .. tostring(generation) .. " to serve"
return hs
