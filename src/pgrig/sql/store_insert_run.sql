INSERT INTO runs (study_id, key, kind, target, params, status, reason, result,
                  raw, tool_versions, started_at, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
