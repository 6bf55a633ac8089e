-- Count the processed raw events into the status table, then flag them as reported.
MERGE INTO ops.pipeline_status AS t
USING (
  SELECT event_date, device_type, count(*) AS events
  FROM staging.raw_events
  WHERE event_date = DATE '2025-01-15' AND status = 'processed'
  GROUP BY event_date, device_type
) AS s
ON t.event_date = s.event_date AND t.device_type = s.device_type
WHEN MATCHED THEN UPDATE SET t.events = s.events
WHEN NOT MATCHED THEN INSERT (event_date, device_type, events) VALUES (s.event_date, s.device_type, s.events);

UPDATE staging.raw_events
SET status = 'reported'
WHERE event_date = '2025-01-15' AND status = 'processed';
