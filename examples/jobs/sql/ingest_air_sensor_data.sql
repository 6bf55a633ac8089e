-- Append the day's air-quality readings from the landing zone.
INSERT INTO staging.raw_events PARTITION (event_date = '2025-01-15', device_type = 'air')
SELECT sensor_id, site_id, reading_ts, pm25, pm10, co2, 'new' AS status
FROM landing.air_sensor_readings
WHERE ingest_date = '2025-01-15';
