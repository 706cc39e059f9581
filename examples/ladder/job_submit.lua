--[[
Slurm job_submit/lua plugin: refuse, at sbatch time, a job that skips a rung of the scaling ladder.

slurm.conf: JobSubmitPlugins=lua, and this file as /etc/slurm/job_submit.lua (docs/ladder.md).
The job names its run (and optionally its family) in its comment: --comment=run=r7,family=llama-v3.
Refused jobs get gpuyield's message ("needs a completed run on 8 GPUs ...") on the user's terminal.
The check runs `gpuyield preflight` on the ledger's store; keep the store on local disk of the
controller, refreshed by the usual `gpuyield ingest` (each ingest rebuilds the ladder summary).
]]

local GPUYIELD = "/opt/gpuyield/bin/gpuyield"
local DB = "/var/lib/gpuyield/gpuyield.duckdb"
local REFUSE_ON_ERROR = false  -- a broken check lets jobs through unless this is true
local NO_VAL = 4294967294

-- Names go to a shell: only the characters gpuyield allows in family and run names.
local function safe(name)
  return name ~= nil and string.match(name, "^[%w][%w%._:/%+%-]*$") ~= nil
end

-- "gres:gpu:8", "gres/gpu:h100:8", "gres/gpu=8" -> 8
local function gpus_in(tres)
  if tres == nil then return 0 end
  local count = string.match(tres, "gpu[:=][%w_]*[:=]?(%d+)")
  return tonumber(count) or 0
end

local function total_gpus(job_desc)
  local per_job = gpus_in(job_desc.tres_per_job)
  if per_job > 0 then return per_job end
  local nodes = job_desc.min_nodes
  if nodes == nil or nodes == NO_VAL or nodes < 1 then nodes = 1 end
  return gpus_in(job_desc.tres_per_node) * nodes
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local comment = job_desc.comment or ""
  local family = string.match(comment, "family=([^,%s]+)")
  local run = string.match(comment, "run=([^,%s]+)")
  local gpus = total_gpus(job_desc)
  if gpus == 0 or (family == nil and run == nil) then return slurm.SUCCESS end
  local who
  if family ~= nil then
    if not safe(family) then return slurm.SUCCESS end
    who = "--family " .. family
  else
    if not safe(run) then return slurm.SUCCESS end
    who = "--run " .. run
  end
  local command = string.format("%s preflight --db %s --gpus %d %s 2>&1", GPUYIELD, DB, gpus, who)
  local handle = io.popen(command)
  local output = handle:read("*a")
  local _, _, status = handle:close()
  if status == 0 then return slurm.SUCCESS end
  if status == 3 then
    slurm.log_user("%s", output)
    return slurm.ERROR
  end
  slurm.log_error("gpuyield preflight exited %s: %s", tostring(status), output)
  if REFUSE_ON_ERROR then return slurm.ERROR end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
