-- Mark weather readings that pass the range check from registered sensors as verified.
UPDATE staging.raw_events
SET status = 'verified'
WHERE event_date = '2025-01-15'
  AND device_type = 'meteo'
  AND status = 'new'
  AND humidity BETWEEN 0 AND 100
  AND sensor_id IN (SELECT sensor_id FROM ref.sensors WHERE kind = 'meteo');
