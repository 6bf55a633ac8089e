-- Append the day's weather-station readings from the landing zone.
INSERT INTO staging.raw_events PARTITION (event_date = '2025-01-15', device_type = 'meteo')
SELECT sensor_id, site_id, reading_ts, temperature, humidity, wind_speed, 'new' AS status
FROM landing.meteo_sensor_readings
WHERE ingest_date = '2025-01-15';
