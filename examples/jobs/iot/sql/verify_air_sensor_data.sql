-- Mark air readings that pass the range check from registered sensors as verified.
UPDATE staging.raw_events
SET status = 'verified'
WHERE event_date = '2025-01-15'
  AND device_type = 'air'
  AND status = 'new'
  AND pm25 BETWEEN 0 AND 1000
  AND sensor_id IN (SELECT sensor_id FROM ref.sensors WHERE kind = 'air');
