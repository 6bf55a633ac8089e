-- Append the day's air-quality readings from the landing zone.
INSERT INTO staging.raw_events PARTITION (event_date = '2025-01-15', device_type = 'air')
SELECT sensor_id, site_id, reading_ts, pm25, pm10, co2,
       NULL AS temperature, NULL AS humidity, NULL AS wind_speed, 'new' AS status
FROM landing.air_sensor_readings
WHERE ingest_date = DATE '2025-01-15';
