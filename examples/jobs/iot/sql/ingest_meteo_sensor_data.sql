-- Append the day's weather-station readings from the landing zone.
INSERT INTO staging.raw_events PARTITION (event_date = '2025-01-15', device_type = 'meteo')
SELECT sensor_id, site_id, reading_ts, NULL AS pm25, NULL AS pm10, NULL AS co2,
       temperature, humidity, wind_speed, 'new' AS status
FROM landing.meteo_sensor_readings
WHERE ingest_date = DATE '2025-01-15';
